package log_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestStressEveryPartOfAPartitionAtOnceUnderTheRaceDetector drives every
// part of a partition at the same time (package doc, "Parts of a
// partition"): appenders of each ack (the group writer and its sync rounds),
// Sync callers, rolls of 4 KiB segments and their sealers, retention,
// Truncate cutting below the high watermark over and over (segment set,
// epoch cache, recovery point), in-process followers (waiters) and a
// follower in a second Log opened read-only on the same directory (the
// read-only refresher and cross-process follow). Under the race detector
// (make test) it proves the parts share no state outside their locks, and
// by finishing that the lock order holds (a cycle would hang it); after
// the run the log is reopened and every record reads back whole and its
// own. Truncations stop once the appends are done, so the end is
// deterministic: every follower catches up with the writer's high watermark.
func TestStressEveryPartOfAPartitionAtOnceUnderTheRaceDetector(t *testing.T) {
	const perAppender = 150
	acks := []log.Ack{log.AckWritten, log.AckWritten, log.AckSynced, log.AckSynced, log.AckNone}
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(4096), log.CreateIfMissing())
		require.NoError(t, err)
		tp, err := lg.CreateTopic("events", 1, log.RetentionBytes(32<<10))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		rp, err := openReadOnlyPartition(t, dir, log.WithPollInterval(5*time.Millisecond))
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		goFail := func(fn func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errs <- err
					cancel()
				}
			}()
		}
		var done atomic.Bool
		// appendsDone ends when the appends are done: the truncator waits
		// for new records under it.
		appendsDone, endAppends := context.WithCancel(ctx)
		defer endAppends()
		var appendWG sync.WaitGroup
		var truncations, deletions atomic.Int64
		for a, ack := range acks {
			appendWG.Add(1)
			goFail(func() error {
				defer appendWG.Done()
				for n := range perAppender {
					_, err := p.AppendAck(ctx, ack, log.Record{Value: stressValue(a, n)})
					if err != nil && !errors.Is(err, log.ErrTruncated) {
						return fmt.Errorf("appender %d (%v) record %d: %w", a, ack, n, err)
					}
				}
				return nil
			})
		}
		goFail(func() error { // Sync beside the sync rounds of AckSynced appends
			for !done.Load() {
				// A Sync that covered records a Truncate then cut reports
				// ErrTruncated, as such appends do.
				if err := tp.Sync(); err != nil && !errors.Is(err, log.ErrTruncated) {
					return fmt.Errorf("sync: %w", err)
				}
			}
			return nil
		})
		goFail(func() error { // retention beside appends, reads and cuts
			for !done.Load() {
				rep, err := tp.EnforceRetention(time.Now())
				if err != nil {
					return fmt.Errorf("retention: %w", err)
				}
				deletions.Add(int64(rep.DeletedSegments()))
			}
			return nil
		})
		goFail(func() error { // Truncate a few records below the end, each time the end moved on
			last := int64(0)
			for !done.Load() {
				hw := p.HighWatermark()
				if hw < last+20 {
					if err := p.Follow(hw).Wait(appendsDone); err != nil {
						return nil // the appends are done, or another goroutine failed
					}
					continue
				}
				err := p.Truncate(max(hw-3, p.StartOffset()))
				var oor *log.OffsetOutOfRangeError
				if err != nil && !errors.As(err, &oor) { // retention moved the start past the cut
					return fmt.Errorf("truncate at %d: %w", hw-3, err)
				}
				if err == nil {
					truncations.Add(1)
				}
				last = p.HighWatermark()
			}
			return nil
		})
		follow := func(name string, part *log.Partition) func() error {
			return func() error {
				r := part.Follow(0)
				for !done.Load() || r.Position() < part.HighWatermark() {
					wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
					recs, err := r.Next(wctx, 8<<10)
					wcancel()
					var oor *log.OffsetOutOfRangeError
					switch {
					case errors.As(err, &oor):
						r.SetPosition(oor.StartOffset) // lapped by retention
						continue
					case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
						continue
					case err != nil:
						return fmt.Errorf("%s at %d: %w", name, r.Position(), err)
					}
					for i, rec := range recs {
						if i > 0 && rec.Offset != recs[i-1].Offset+1 {
							return fmt.Errorf("%s: offset %d after %d in one batch", name, rec.Offset, recs[i-1].Offset)
						}
						if _, _, err := checkStressValue(rec.Value); err != nil {
							return fmt.Errorf("%s offset %d: %w", name, rec.Offset, err)
						}
					}
				}
				return nil
			}
		}
		goFail(follow("in-process follower", p))
		goFail(follow("in-process follower 2", p))
		goFail(follow("read-only follower", rp))
		go func() {
			appendWG.Wait()
			done.Store(true)
			endAppends()
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		t.Logf("%d truncations, %d segments deleted by retention", truncations.Load(), deletions.Load())
		require.NoError(t, lg.Close())

		lg2, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(4096))
		require.NoError(t, err)
		defer lg2.Close()
		tp2, err := lg2.Topic("events")
		require.NoError(t, err)
		p2, err := tp2.Partition(0)
		require.NoError(t, err)
		for _, rec := range readAll(t, p2) {
			_, _, err := checkStressValue(rec.Value)
			require.NoError(t, err, "offset %d", rec.Offset)
		}
	})
}
