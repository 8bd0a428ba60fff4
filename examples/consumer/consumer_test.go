package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// TestParseFlagsDefaults ensures the documented defaults, the derived name, and the required
// flags.
func TestParseFlagsDefaults(t *testing.T) {
	for _, k := range []string{"STROM_DIR", "STROM_STATE", "STROM_NAME", "STROM_DELAY", "STROM_PARTITION"} {
		t.Setenv(k, "")
	}
	cfg, err := parseFlags([]string{"--dir", "d", "--state", "s", "--partition", "2"})
	require.NoError(t, err)
	assert.Equal(t, "consumer-2", cfg.name)
	assert.Equal(t, "events", cfg.topic)
	assert.Equal(t, "127.0.0.1:7071", cfg.addr)
	assert.Equal(t, 2*time.Millisecond, cfg.delay)
	assert.Equal(t, 16<<10, cfg.batchBytes)

	_, err = parseFlags([]string{"--dir", "d"})
	assert.ErrorContains(t, err, "--state")
	_, err = parseFlags([]string{"--state", "s"})
	assert.ErrorContains(t, err, "--dir")
	_, err = parseFlags([]string{"--dir", "d", "--state", "s", "--partition", "-1"})
	assert.ErrorContains(t, err, "--partition")
	t.Setenv("STROM_DELAY", "soon")
	_, err = parseFlags([]string{"--dir", "d", "--state", "s"})
	assert.ErrorContains(t, err, "STROM_DELAY")
}

// TestHandleWritesOneJSONLinePerRecord ensures --out gets the record before handle returns,
// with a null key for a nil key and an empty string for an empty one.
func TestHandleWritesOneJSONLinePerRecord(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	c := &consumer{cfg: config{name: "c"}, out: f}
	require.NoError(t, c.handle(context.Background(), log.Record{Partition: 1, Offset: 7, Key: nil, Value: []byte("a \"b\"\r")}))
	require.NoError(t, c.handle(context.Background(), log.Record{Partition: 1, Offset: 8, Key: []byte{}, Value: []byte("")}))

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	require.Len(t, lines, 2)
	var r service.OutLine
	require.NoError(t, json.Unmarshal(lines[0], &r))
	assert.Equal(t, service.OutLine{Partition: 1, Offset: 7, Key: nil, Value: "a \"b\"\r"}, r)
	assert.Contains(t, string(lines[0]), `"key":null`)
	require.NoError(t, json.Unmarshal(lines[1], &r))
	require.NotNil(t, r.Key)
	assert.Equal(t, "", *r.Key)

	st := c.stats()
	assert.EqualValues(t, 2, st.Handled)
	require.NotNil(t, st.LastRecord)
	assert.EqualValues(t, 8, st.LastRecord.Offset)
}

// TestHandleStopsOnCancel ensures a cancelled context ends the delay with its error, so the
// record is not counted (and its position not saved).
func TestHandleStopsOnCancel(t *testing.T) {
	c := &consumer{cfg: config{delay: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.handle(ctx, log.Record{}), context.Canceled)
	assert.Zero(t, c.stats().Handled)
}

// TestStatsBeforeTheTopicExists ensures position, lag and resumedFrom are null until there is
// something to report, and that lag follows the high watermark once the topic exists.
func TestStatsBeforeTheTopicExists(t *testing.T) {
	dir := t.TempDir()
	ro, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	c := &consumer{cfg: config{name: "c", topic: "events", partition: 0}, lg: ro}
	st := c.stats()
	assert.Nil(t, st.Position)
	assert.Nil(t, st.Lag)
	assert.Nil(t, st.ResumedFrom)
	assert.Nil(t, st.LastRecord)

	rw, err := log.Open(dir)
	require.NoError(t, err)
	defer rw.Close()
	topic, err := rw.CreateTopic("events", 1)
	require.NoError(t, err)
	part, err := topic.Partition(0)
	require.NoError(t, err)
	_, err = part.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}, log.Record{Value: []byte("c")})
	require.NoError(t, err)

	st = c.stats()
	require.NotNil(t, st.Lag)
	assert.EqualValues(t, 3, *st.Lag, "nothing saved: lag counts from the log start")
	c.checkpointed("events", 0, checkpoint.At(2))
	st = c.stats()
	require.NotNil(t, st.Position)
	assert.EqualValues(t, 2, *st.Position)
	assert.EqualValues(t, 1, *st.Lag)
}

// TestOpenOutCutsAPartialLastLine ensures the --out file loses what a kill
// left of a cut Write, a last line without its newline, and keeps every
// whole line; a file of whole lines, an empty file and one partial line
// alone come out as they should.
func TestOpenOutCutsAPartialLastLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"partial", "{\"offset\":1}\n{\"offset\":2}\n{\"offs", "{\"offset\":1}\n{\"offset\":2}\n"},
		{"whole", "{\"offset\":1}\n", "{\"offset\":1}\n"},
		{"empty", "", ""},
		{"only partial", "{\"off", ""},
		{"long partial", "a\n" + strings.Repeat("x", 200<<10), "a\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(c.in), 0o644))
			f, err := openOut(path)
			require.NoError(t, err)
			_, err = f.Write([]byte("next\n"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, c.want+"next\n", string(got))
		})
	}
}

// TestRunOnAMissingDirExitsAtOnceAndCreatesNothing ensures a consumer given a --dir that does
// not exist (a typo) returns at startup with an error naming the path and the publisher,
// matching log.ErrNoLog, instead of retrying an unknown topic forever, and creates neither the
// log directory nor its --state folder.
func TestRunOnAMissingDirExitsAtOnceAndCreatesNothing(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "mistyped")
	state := filepath.Join(tmp, "state")
	cfg := config{dir: dir, topic: "events", state: state, addr: "127.0.0.1:0", name: "c",
		delay: time.Millisecond, batchBytes: 16 << 10}
	done := make(chan error, 1)
	go func() { done <- run(cfg) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run has not returned 10s after starting on a missing --dir: it is waiting on it")
	}
	require.ErrorIs(t, err, log.ErrNoLog)
	assert.ErrorContains(t, err, dir)
	assert.ErrorContains(t, err, "start the publisher first")
	for _, p := range []string{dir, state} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s created", p)
	}
}

// TestResumedFromIsWhereAResetOfARecreatedTopicResumed ensures a consumer whose saved position
// (offset 100) belongs to a topic since deleted and created again reports the offset it really
// resumed at, 0, in resumedFrom and position, not the saved one: the source (topic IDs,
// source.OnReset with Reset.Recreated) reads the new topic from its start.
func TestResumedFromIsWhereAResetOfARecreatedTopicResumed(t *testing.T) {
	dir := t.TempDir()
	rw, err := log.Open(dir)
	require.NoError(t, err)
	old, err := rw.CreateTopic("events", 1)
	require.NoError(t, err)
	oldID := old.ID()
	require.NoError(t, rw.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "events"))) // deleted (the log has no delete)
	rw, err = log.Open(dir)
	require.NoError(t, err)
	defer rw.Close()
	topic, err := rw.CreateTopic("events", 1) // and created again, with 3 records
	require.NoError(t, err)
	require.NotEqual(t, oldID, topic.ID())
	part, err := topic.Partition(0)
	require.NoError(t, err)
	_, err = part.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}, log.Record{Value: []byte("c")})
	require.NoError(t, err)

	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.Position{Offset: 100, TopicID: oldID}))
	ro, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	c := &consumer{cfg: config{name: "c", topic: "events", partition: 0, batchBytes: 16 << 10}, lg: ro}
	c.resume(100) // as run does with the loaded position

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- stream.ConsumeForever(ctx, c.source(store), store, c.handle, stream.OnCheckpoint(c.checkpointed))
	}()
	require.Eventually(t, func() bool { return c.stats().Handled == 3 }, 10*time.Second, time.Millisecond,
		"the new topic's 3 records handled")
	cancel()
	if err := <-done; err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}
	st := c.stats()
	require.EqualValues(t, 3, st.Handled, "the new topic's records, from offset 0")
	require.NotNil(t, st.ResumedFrom)
	assert.EqualValues(t, 0, *st.ResumedFrom, "resumed at the new topic's start, not the saved 100")
	require.NotNil(t, st.Position)
	assert.LessOrEqual(t, *st.Position, int64(3), "a position of the new topic")
	require.NotNil(t, st.Lag)
	assert.GreaterOrEqual(t, *st.Lag, int64(0))
}
