package source_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// TestReplayReadingAheadReturnsEveryRecordOnceAcrossCloseResumeAndCancel
// replays 3,000 records in small batches while, between Reads chosen by a
// seed, the source is closed, resumed from a store holding the position
// after the last record returned, or read with a context already done. A
// replay reads a batch or two ahead on a goroutine of its own
// (partition_readahead.go): each of these drops what it read ahead, and the
// next Read must continue exactly after the last record returned, never
// skipping the dropped batches nor returning a record twice. The batches'
// bytes stay valid after later Reads (the default, no ReuseBytes).
func TestReplayReadingAheadReturnsEveryRecordOnceAcrossCloseResumeAndCancel(t *testing.T) {
	const n = 3000
	for seed := uint64(1); seed <= 4; seed++ {
		lg := testutil.OpenLog(t, log.ModeFile)
		_, err := lg.CreateTopic("events", 1)
		require.NoError(t, err)
		appendRange(t, lg, "events", 0, n)
		rng := rand.New(rand.NewPCG(seed, 7))
		src := source.Partition(lg, "events", 0, source.Earliest, source.Replay(), source.MaxBytes(200))
		var store checkpoint.MemoryStore
		done, cancel := context.WithCancel(context.Background())
		cancel()
		var got []log.Record
		for {
			switch rng.IntN(8) {
			case 0:
				require.NoError(t, src.Close())
			case 1:
				if len(got) > 0 {
					require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(got[len(got)-1].Offset+1)))
				}
				require.NoError(t, src.Resume(context.Background(), &store))
			case 2:
				// A batch ready or the context's error: both are Read's.
				batch, err := src.Read(done)
				if err == nil {
					for _, e := range batch {
						got = append(got, e.Value)
					}
				} else if !errors.Is(err, io.EOF) {
					require.ErrorIs(t, err, context.Canceled)
				}
			}
			batch, err := src.Read(context.Background())
			for _, e := range batch {
				got = append(got, e.Value)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.Equal(t, got[len(got)-1].Offset+1, src.Position())
		}
		require.Equal(t, n, len(got), "records returned, seed %d", seed)
		for i, r := range got {
			require.Equal(t, int64(i), r.Offset, "seed %d", seed)
			require.Equal(t, value(int64(i)), string(r.Value), "the bytes of a batch stay valid after later Reads")
		}
		require.NoError(t, src.Close())
	}
}
