package source_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestConsumeForeverRetriesUntilTheTopicExistsThenHandlesEachRecord ensures a
// following partition source under ConsumeForever survives a failing start
// (the topic does not exist yet), re-opens after the failure, and handles
// every record once with the position saved at the high watermark.
func TestConsumeForeverRetriesUntilTheTopicExistsThenHandlesEachRecord(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			w := testutil.OpenLog(t, m.Mode)
			r, err := log.Open(w.Dir(), log.ReadOnly(), log.WithMode(m.Mode))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.Close()) })
			store, err := checkpoint.NewFileStore(t.TempDir())
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mu sync.Mutex
			handled := map[int64]int{}
			sourceErrors := 0
			failed := make(chan struct{}) // closed at the first source failure
			done := make(chan error, 1)
			go func() {
				src := source.Partition(r, "events", 0, source.FromStore(store))
				done <- stream.ConsumeForever(ctx, src, store, func(_ context.Context, rec log.Record) error {
					mu.Lock()
					defer mu.Unlock()
					handled[rec.Offset]++
					if len(handled) == 40 {
						cancel()
					}
					return nil
				},
					stream.WithBackoff(time.Millisecond, 5*time.Millisecond),
					stream.OnSourceError(func(error, int) {
						if sourceErrors == 0 {
							close(failed)
						}
						sourceErrors++
					}))
			}()

			select { // let the consumer fail on the missing topic first
			case <-failed:
			case <-ctx.Done():
				t.Fatal("the consumer never reported the missing topic as a source failure")
			}
			createTopic(t, w, "events", 1)
			appendRange(t, w, "events", 0, 25)
			appendRange(t, w, "events", 25, 40)

			require.NoError(t, <-done)
			require.ErrorIs(t, ctx.Err(), context.Canceled, "the consumer finished by handling all 40, not by timing out")
			require.Positive(t, sourceErrors, "the missing topic was a source failure, retried")
			for off := range int64(40) {
				require.Equal(t, 1, handled[off], "offset %d", off)
			}
			pos, found, err := store.Load(context.Background(), "events", 0)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(40), pos.Offset)
		})
	}
}

// TestConsumeForeverStopsOnACorruptCheckpoint ensures a corrupt store ends
// ConsumeForever with checkpoint.ErrCorrupt instead of replaying the
// partition from the beginning.
func TestConsumeForeverStopsOnACorruptCheckpoint(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 10)
	store := corruptFileStore(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := stream.ConsumeForever(ctx, source.Partition(lg, "events", 0, source.FromStore(store)), store,
		func(context.Context, log.Record) error { calls++; return nil })
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Zero(t, calls)
}

// TestConsumeForeverReturnsWhenTheLogIsClosed ensures a consumer whose log
// is closed under it stops with log.ErrClosed instead of retrying forever.
func TestConsumeForeverReturnsWhenTheLogIsClosed(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 3)
	var store checkpoint.MemoryStore
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	handled := make(chan struct{}, 3)
	done := make(chan error, 1)
	go func() {
		done <- stream.ConsumeForever(ctx, source.Partition(lg, "events", 0, source.FromStore(&store)), &store,
			func(context.Context, log.Record) error { handled <- struct{}{}; return nil },
			stream.WithBackoff(time.Millisecond, time.Millisecond))
	}()
	for range 3 {
		<-handled
	}
	require.NoError(t, lg.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, log.ErrClosed)
		require.ErrorIs(t, err, stream.ErrPermanent)
	case <-ctx.Done():
		t.Fatal("ConsumeForever kept retrying a closed log")
	}
}
