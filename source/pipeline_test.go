package source_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestPipelineHandlesEachRecordOnceAcrossRuns ensures the design's headline
// pipeline, run, extended and run again over a FileStore, handles every record
// exactly once (no crash in between) and leaves the saved position at the high
// watermark.
func TestPipelineHandlesEachRecordOnceAcrossRuns(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp := createTopic(t, lg, "events", 1)
			p, err := tp.Partition(0)
			require.NoError(t, err)
			store, err := checkpoint.NewFileStore(t.TempDir())
			require.NoError(t, err)

			var mu sync.Mutex
			handled := map[int64]int{}
			run := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				src := source.Partition(lg, "events", 0, source.FromStore(store), source.Replay(), source.MaxBytes(300))
				err := stream.From(src).
					Map(func(_ context.Context, r log.Record) (log.Record, error) {
						mu.Lock()
						defer mu.Unlock()
						handled[r.Offset]++
						if got := string(r.Value); got != value(r.Offset) {
							return r, fmt.Errorf("offset %d: value %q, want %q", r.Offset, got, value(r.Offset))
						}
						return r, nil
					}).
					Checkpointing(store).
					Run(ctx)
				require.NoError(t, err)
			}
			position := func() int64 {
				pos, found, err := store.Load(context.Background(), "events", 0)
				require.NoError(t, err)
				require.True(t, found)
				return pos.Offset
			}

			appendRange(t, lg, "events", 0, 100)
			run()
			require.Equal(t, int64(100), position())
			require.Len(t, handled, 100)

			appendRange(t, lg, "events", 100, 150)
			run()
			require.Equal(t, p.HighWatermark(), position())
			require.Equal(t, int64(150), position())

			run() // nothing new: nothing handled again
			require.Len(t, handled, 150)
			for off := range int64(150) {
				require.Equal(t, 1, handled[off], "offset %d handled once", off)
			}
		})
	}
}

// TestLinesPipelineCheckpointsTheNextLine ensures a checkpointed pipeline
// over a file saves the index of the line after the last, and a resumed
// source then has nothing left to hand out.
func TestLinesPipelineCheckpointsTheNextLine(t *testing.T) {
	path := filepath.Join(loghub.Dir(t), "HDFS_2k.log")
	var store checkpoint.MemoryStore
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	count := 0
	err := stream.From(source.Lines(path)).
		Tap(func(context.Context, string) error { count++; return nil }).
		Checkpointing(&store).
		Run(ctx)
	require.NoError(t, err)
	require.Equal(t, 2000, count)
	pos, found, err := store.Load(ctx, "HDFS_2k.log", 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(2000), pos.Offset)

	again := source.Lines(path)
	require.NoError(t, again.Resume(ctx, &store))
	require.Empty(t, readUntilEOF[string](t, again))
}
