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

// TestPositionsNotesAPositionOfATopicCreatedAgain ensures positions set
// saves the topic's ID with the position, and that positions, once the
// topic was deleted and created again, names both IDs and says the
// consumer resumes at the log start offset rather than at the position.
func TestPositionsNotesAPositionOfATopicCreatedAgain(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	state := t.TempDir()
	ok(t, []byte("a\nb\nc\nd\ne\n"), "--dir", dir, "produce", "ev")
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "3")
	b, err := os.ReadFile(filepath.Join(state, "ev-0.position"))
	require.NoError(t, err)
	var saved struct{ TopicID string }
	require.NoError(t, json.Unmarshal(b, &saved))
	require.Len(t, saved.TopicID, 22, "positions set saves the topic ID: %s", b)

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "ev")))
	ok(t, nil, "--dir", dir, "topics", "create", "ev")
	ok(t, []byte("x\ny\nz\nw\nv\nu\n"), "--dir", dir, "produce", "ev")
	var rows []struct {
		TopicID      string
		Position     int64
		ResumeOffset *int64
		Lag          *int64
		Note         string
	}
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json"), &rows))
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, saved.TopicID, r.TopicID)
	require.NotNil(t, r.ResumeOffset)
	assert.Equal(t, int64(0), *r.ResumeOffset, "not the saved 3")
	assert.Equal(t, int64(6), *r.Lag)
	assert.Contains(t, r.Note, "saved against topic ID "+saved.TopicID)
	assert.Contains(t, r.Note, "deleted and created again")
}
