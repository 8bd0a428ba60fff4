package log_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestCreateTopicDrawsAnIDThatSurvivesReopening ensures a new topic gets a
// topic ID, stored in its topic.json, which a reader (read-only log) and a
// writer opening it later both see.
func TestCreateTopicDrawsAnIDThatSurvivesReopening(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	tp, err := lg.CreateTopic("events", 2)
	require.NoError(t, err)
	id := tp.ID()
	require.False(t, id.IsZero(), "a new topic has an ID")
	b, err := os.ReadFile(filepath.Join(dir, "events", "topic.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"id":"`+id.String()+`"`)
	parsed, err := log.ParseTopicID(id.String())
	require.NoError(t, err)
	assert.Equal(t, id, parsed)
	require.NoError(t, lg.Close())

	ro := openLog(t, dir, log.ReadOnly())
	rt, err := ro.Topic("events")
	require.NoError(t, err)
	assert.Equal(t, id, rt.ID(), "a reader sees the stored ID")
	rw := openLog(t, dir)
	wt, err := rw.WriteTopic("events")
	require.NoError(t, err)
	assert.Equal(t, id, wt.ID(), "a writer keeps the stored ID")
}

// TestTopicCreatedAgainGetsAnotherID ensures a topic deleted (its folder
// removed) and created again under the same name is told apart by its ID.
func TestTopicCreatedAgainGetsAnotherID(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	old := tp.ID()
	require.NoError(t, lg.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "events")))

	lg = openLog(t, dir)
	tp, err = lg.CreateTopic("events", 1)
	require.NoError(t, err)
	assert.False(t, tp.ID().IsZero())
	assert.NotEqual(t, old, tp.ID())
}

// TestTopicWithoutIDGetsOneFromItsFirstWriter ensures a topic.json without
// an ID (a topic created before topic IDs) still opens, that readers see
// the zero ID (unknown), and that each way of opening it for writing
// (LockWriter through a first append, WriteTopic, CreateTopic) draws an ID
// once and stores it, so later opens see the same.
func TestTopicWithoutIDGetsOneFromItsFirstWriter(t *testing.T) {
	for name, write := range map[string]func(lg *log.Log) (*log.Topic, error){
		"LockWriter": func(lg *log.Log) (*log.Topic, error) {
			tp, err := lg.Topic("events")
			if err != nil {
				return nil, err
			}
			if !tp.ID().IsZero() {
				t.Errorf("a reader of a topic without an ID sees %v", tp.ID())
			}
			return tp, tp.LockWriter()
		},
		"WriteTopic":  func(lg *log.Log) (*log.Topic, error) { return lg.WriteTopic("events") },
		"CreateTopic": func(lg *log.Log) (*log.Topic, error) { return lg.CreateTopic("events", 2) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			meta := filepath.Join(dir, "events", "topic.json")
			lg := openLog(t, dir)
			_, err := lg.CreateTopic("events", 2)
			require.NoError(t, err)
			require.NoError(t, lg.Close())
			require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"events","partitions":2}`+"\n"), 0o644))

			ro := openLog(t, dir, log.ReadOnly())
			rt, err := ro.Topic("events")
			require.NoError(t, err, "a topic.json without an ID loads")
			assert.True(t, rt.ID().IsZero(), "no ID stored: unknown")

			lg = openLog(t, dir)
			tp, err := write(lg)
			require.NoError(t, err)
			id := tp.ID()
			require.False(t, id.IsZero(), "the writer drew an ID")
			b, err := os.ReadFile(meta)
			require.NoError(t, err)
			assert.JSONEq(t, `{"version":1,"name":"events","partitions":2,"id":"`+id.String()+`"}`, string(b))
			require.NoError(t, lg.Close())

			lg = openLog(t, dir)
			tp, err = lg.WriteTopic("events")
			require.NoError(t, err)
			assert.Equal(t, id, tp.ID(), "drawn once")
		})
	}
}

// TestTopicJSONWithABadIDIsCorrupt ensures an ID that is not what the log
// writes fails the open naming topic.json and the text.
func TestTopicJSONWithABadIDIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	_, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	require.NoError(t, lg.Close())
	meta := filepath.Join(dir, "events", "topic.json")
	for _, id := range []string{"x", "AAAAAAAAAAAAAAAAAAAAAA", "ZtbcOJ8_SA-ji9PcQpfNBw=="} {
		require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"events","partitions":1,"id":"`+id+`"}`), 0o644))
		_, err := openLog(t, dir, log.ReadOnly()).Topic("events")
		require.ErrorIs(t, err, log.ErrCorruptMetadata, id)
		assert.True(t, strings.Contains(err.Error(), meta) && strings.Contains(err.Error(), id), "%v names the file and the ID", err)
	}
}
