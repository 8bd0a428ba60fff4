package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// recreated is a log directory whose topic "events" was consumed to offset
// savedAt with a FileStore checkpoint, then deleted (its folder removed,
// the log closed: the log has no delete) and created again with more
// records than that.
type recreated struct {
	lg           *log.Log // open on the directory, the topic created again
	store        *checkpoint.FileStore
	oldID, newID log.TopicID
}

const (
	savedAt      = 10 // the position saved against the first topic
	recreatedLen = 15 // records of the topic created again: more than savedAt
)

// newRecreated builds a recreated.
func newRecreated(t *testing.T) recreated {
	t.Helper()
	dir := t.TempDir()
	store, err := checkpoint.NewFileStore(filepath.Join(t.TempDir(), "checkpoints"))
	require.NoError(t, err)
	lg, err := log.Open(dir)
	require.NoError(t, err)
	old := createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, savedAt)
	got := consume(t, source.Partition(lg, "events", 0, source.FromStore(store), source.Replay()), store)
	require.Len(t, got, savedAt)
	pos, found, err := store.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, checkpoint.Position{Offset: savedAt, Epoch: 0, TopicID: old.ID()}, pos, "the position carries the topic ID")
	oldID := old.ID()
	require.NoError(t, lg.Close())

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "events")))
	lg, err = log.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	tp := createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, recreatedLen)
	require.NotEqual(t, oldID, tp.ID())
	return recreated{lg: lg, store: store, oldID: oldID, newID: tp.ID()}
}

// consume runs src through a checkpointing pipeline to its end and returns
// the offsets it handled, in order.
func consume(t *testing.T, src stream.Source[log.Record], store checkpoint.Store) []int64 {
	t.Helper()
	offs, err := tryConsume(src, store)
	require.NoError(t, err)
	return offs
}

func tryConsume(src stream.Source[log.Record], store checkpoint.Store) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var offs []int64
	err := stream.From(src).
		Tap(func(_ context.Context, r log.Record) error {
			mu.Lock()
			defer mu.Unlock()
			offs = append(offs, r.Offset)
			return nil
		}).
		Checkpointing(store).
		Run(ctx)
	return offs, err
}

func offsets(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestResumeOnATopicCreatedAgainResetsToEarliestInsteadOfSkipping ensures a
// position saved against a topic that was deleted and created again (with
// more records than the position) is not trusted: with the default policy
// the consumer reads the new topic from its first record, reports the
// reset (naming both topic IDs), and saves positions of the new topic; a
// PartitionSource (FromStore and Resume) and a TopicSource alike.
func TestResumeOnATopicCreatedAgainResetsToEarliestInsteadOfSkipping(t *testing.T) {
	for name, build := range map[string]func(lg *log.Log, store checkpoint.Store, onReset func(source.Reset)) stream.Source[log.Record]{
		"Partition FromStore": func(lg *log.Log, store checkpoint.Store, onReset func(source.Reset)) stream.Source[log.Record] {
			return source.Partition(lg, "events", 0, source.FromStore(store), source.Replay(), source.OnReset(onReset))
		},
		"Partition Resume": func(lg *log.Log, store checkpoint.Store, onReset func(source.Reset)) stream.Source[log.Record] {
			src := source.Partition(lg, "events", 0, source.Earliest, source.Replay(), source.OnReset(onReset))
			require.NoError(t, src.Resume(context.Background(), store))
			return src
		},
		"Topic": func(lg *log.Log, store checkpoint.Store, onReset func(source.Reset)) stream.Source[log.Record] {
			return source.Topic(lg, "events", source.FromStore(store), source.Replay(), source.OnReset(onReset))
		},
	} {
		t.Run(name, func(t *testing.T) {
			rc := newRecreated(t)
			var resets []source.Reset
			got := consume(t, build(rc.lg, rc.store, func(r source.Reset) { resets = append(resets, r) }), rc.store)
			require.Equal(t, offsets(0, recreatedLen), got, "every record of the new topic, none skipped")
			require.Len(t, resets, 1)
			r := resets[0]
			require.NotNil(t, r.Recreated, "the reset says the topic was created again")
			assert.Equal(t, source.ResetEarliest, r.Policy)
			assert.Equal(t, int64(savedAt), r.From)
			assert.Equal(t, int64(0), r.To)
			assert.Equal(t, int64(0), r.Skipped())
			assert.Equal(t, rc.oldID, r.Recreated.Position.TopicID)
			assert.Equal(t, rc.newID, r.Recreated.TopicID)

			pos, _, err := rc.store.Load(context.Background(), "events", 0)
			require.NoError(t, err)
			assert.Equal(t, checkpoint.Position{Offset: recreatedLen, Epoch: 0, TopicID: rc.newID}, pos)
		})
	}
}

// TestResumeOnATopicCreatedAgainFailsUnderResetError ensures that with
// ResetError the consumer reads nothing and fails with an error that is
// ErrTopicRecreated, names the topic, the partition and both topic IDs, and
// is permanent (ConsumeForever does not retry it); the saved position is
// left as it was.
func TestResumeOnATopicCreatedAgainFailsUnderResetError(t *testing.T) {
	rc := newRecreated(t)
	src := source.Partition(rc.lg, "events", 0, source.FromStore(rc.store), source.Replay(), source.OnOutOfRange(source.ResetError))
	got, err := tryConsume(src, rc.store)
	require.Empty(t, got)
	require.ErrorIs(t, err, source.ErrTopicRecreated)
	var pe *source.PartitionError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, stream.ErrPermanent)
	for _, want := range []string{"topic events partition 0", "position 10", rc.oldID.String(), rc.newID.String()} {
		assert.Contains(t, err.Error(), want)
	}
	var rec *source.TopicRecreatedError
	require.True(t, errors.As(err, &rec))
	assert.Equal(t, rc.oldID, rec.Position.TopicID)
	assert.Equal(t, rc.newID, rec.TopicID)
	pos, _, lerr := rc.store.Load(context.Background(), "events", 0)
	require.NoError(t, lerr)
	assert.Equal(t, rc.oldID, pos.TopicID, "nothing saved over the old position")
}

// TestResumeFromAPositionWithoutTopicIDTrustsIt ensures a position file of
// a version before topic IDs (version 1, no "topicId") is trusted as it
// was: the consumer resumes at its offset, and the next save adds the
// topic's ID.
func TestResumeFromAPositionWithoutTopicIDTrustsIt(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.NewFileStore(filepath.Join(t.TempDir(), "checkpoints"))
	require.NoError(t, err)
	lg, err := log.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	tp := createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 15)
	path, err := store.Path("events", 0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"topic":"events","partition":0,"position":4,"epoch":0}`+"\n"), 0o600))

	var resets []source.Reset
	got := consume(t, source.Partition(lg, "events", 0, source.FromStore(store), source.Replay(),
		source.OnReset(func(r source.Reset) { resets = append(resets, r) })), store)
	require.Equal(t, offsets(4, 15), got)
	require.Empty(t, resets)
	pos, _, err := store.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	assert.Equal(t, checkpoint.Position{Offset: 15, Epoch: 0, TopicID: tp.ID()}, pos)
}
