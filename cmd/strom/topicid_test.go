package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopicsDescribeShowsTheTopicID ensures describe prints the topic ID
// stored in topic.json (text and --json), another one for a topic deleted
// and created again, and "none" for a topic created before topic IDs.
func TestTopicsDescribeShowsTheTopicID(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	idOf := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "ev", "topic.json"))
		require.NoError(t, err)
		var m struct{ ID string }
		require.NoError(t, json.Unmarshal(b, &m))
		require.Len(t, m.ID, 22)
		return m.ID
	}
	first := idOf()
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "ev")), "topic ev: ID "+first+", 1 partition(s), retention unlimited\n")
	var d []struct{ ID string }
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "topics", "describe", "ev", "--json"), &d))
	require.Len(t, d, 1)
	assert.Equal(t, first, d[0].ID)

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "ev")))
	ok(t, nil, "--dir", dir, "topics", "create", "ev")
	second := idOf()
	assert.NotEqual(t, first, second)
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "ev")), "topic ev: ID "+second+",")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "ev", "topic.json"), []byte(`{"version":1,"name":"ev","partitions":1}`+"\n"), 0o644))
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "ev")), "topic ev: ID none, 1 partition(s)")
}
