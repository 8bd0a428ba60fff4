package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// TestALateRecordThatStoppedRunStopsItAgainAfterARestart runs a Window and
// a JoinWindow over log topics with a FileStore, appends a record too late
// for them, and runs them again, twice: each run stops at the late record
// (the default policy), and so does the next, until the pipeline is told
// what to do with it. The stage had marked the record as read before it
// failed, and the final save of the failed run wrote that mark with the
// state: the restart took the record for one the state already held and
// dropped it, unseen, and the run after the failure ended without error
// (found by a new user's trial). A stage whose push failed is no longer
// saved: the last checkpoint stands.
func TestALateRecordThatStoppedRunStopsItAgainAfterARestart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixMilli() }
	appendAt := func(t *testing.T, lg *log.Log, topic string, secs ...int) {
		tp, err := lg.Topic(topic)
		require.NoError(t, err)
		for _, s := range secs {
			_, _, err := tp.Append(context.Background(), log.Record{Key: []byte("u1"), Value: []byte("v"), Timestamp: at(s)})
			require.NoError(t, err)
		}
	}
	key := func(r log.Record) string { return string(r.Key) }
	pipelines := map[string]func(lg *log.Log, store *checkpoint.FileStore) *stream.Stream[int64]{
		"window": func(lg *log.Log, store *checkpoint.FileStore) *stream.Stream[int64] {
			in := stream.KeyBy(stream.From(source.Partition(lg, "clicks", 0, source.FromStore(store), source.Replay())), key)
			w := stream.Window(in, stream.Tumbling(time.Minute), stream.Count[log.Record](), stream.Name("counts"))
			return stream.MapTo(w, func(_ context.Context, r stream.WindowResult[string, int64]) (int64, error) { return r.Value, nil })
		},
		"joinwindow": func(lg *log.Log, store *checkpoint.FileStore) *stream.Stream[int64] {
			l := stream.KeyBy(stream.From(source.Partition(lg, "clicks", 0, source.FromStore(store), source.Replay())), key)
			r := stream.KeyBy(stream.From(source.Partition(lg, "users", 0, source.FromStore(store), source.Replay())), key)
			return stream.JoinWindow(l, r, 5*time.Second, func(a, b log.Record) int64 { return a.Offset }, stream.Name("pairs"))
		},
	}
	for name, build := range pipelines {
		t.Run(name, func(t *testing.T) {
			lg, err := log.Open(t.TempDir())
			require.NoError(t, err)
			defer lg.Close()
			for _, topic := range []string{"clicks", "users"} {
				_, err := lg.CreateTopic(topic, 1)
				require.NoError(t, err)
				appendAt(t, lg, topic, 10, 20, 70, 400)
			}
			dir := t.TempDir()
			run := func() error {
				store, err := checkpoint.NewFileStore(dir)
				require.NoError(t, err)
				return build(lg, store).To(streamtest.Collect[int64]()).Checkpointing(store).Run(context.Background())
			}
			require.NoError(t, run())
			appendAt(t, lg, "clicks", 15) // 6 minutes behind the watermark
			require.ErrorIs(t, run(), stream.ErrLateRecord, "the late record stops the run")
			for range 2 {
				require.ErrorIs(t, run(), stream.ErrLateRecord, "the late record stops the run after a restart too, never dropped unseen")
			}
		})
	}
}
