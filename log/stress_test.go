package log_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// stressValue is the value of appender a's record n: a, n, a CRC32C of
// both, then filler of a length that varies with n, so a follower can tell
// a record's bytes are its own and whole.
func stressValue(a, n int) []byte {
	v := make([]byte, 12+n%200)
	binary.LittleEndian.PutUint32(v, uint32(a))
	binary.LittleEndian.PutUint32(v[4:], uint32(n))
	binary.LittleEndian.PutUint32(v[8:], crc32.Checksum(v[:8], crc32.MakeTable(crc32.Castagnoli)))
	for i := 12; i < len(v); i++ {
		v[i] = byte(a + n + i)
	}
	return v
}

func checkStressValue(v []byte) (a, n int, err error) {
	if len(v) < 12 {
		return 0, 0, fmt.Errorf("value of %d bytes", len(v))
	}
	a, n = int(binary.LittleEndian.Uint32(v)), int(binary.LittleEndian.Uint32(v[4:]))
	if want := stressValue(a, n); string(want) != string(v) {
		return a, n, fmt.Errorf("value of appender %d record %d is not its own", a, n)
	}
	return a, n, nil
}

// TestStressAppendersFollowersAndRetentionUnderTheRaceDetector runs, on one
// partition with 4 KiB segments, 8 goroutines appending (one record per
// call, and groups), 4 followers reading from the log start, and retention
// deleting all but the newest 32 KiB, all at once, in both write paths. It
// proves, with the race detector in make test: every append succeeds with
// consecutive offsets; a follower reads offsets in order and every record's
// bytes are its own (a read in a segment retention deleted under it
// finishes with the right bytes); a follower that falls below the log start
// gets ErrOffsetOutOfRange and goes on from the new start; each appender's
// records appear in the log in the order it appended them; and after the
// run every record still held reads back whole.
func TestStressAppendersFollowersAndRetentionUnderTheRaceDetector(t *testing.T) {
	const appenders, followers, perAppender = 8, 4, 400
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(4096))
		tp, err := lg.CreateTopic("events", 1, log.RetentionBytes(32<<10))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		var done atomic.Bool
		var deleted atomic.Int64
		// firstDeletion is closed by retention's first deletion. Appender 0
		// waits for it halfway, so a deletion always lands while records are
		// appended and followed: without it a fast run could finish its
		// appends before the retention goroutine's first pass, which then
		// never ran (done already set) and deleted nothing.
		firstDeletion := make(chan struct{})
		var firstDeletionOnce sync.Once
		gctx, gcancel := context.WithCancel(ctx)
		defer gcancel()
		var wg sync.WaitGroup
		errs := make(chan error, appenders+followers+1)
		goFail := func(fn func() error) { // the first error cancels the rest
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errs <- err
					gcancel()
				}
			}()
		}
		var appendWG sync.WaitGroup
		for a := range appenders {
			appendWG.Add(1)
			goFail(func() error {
				defer appendWG.Done()
				waited := a != 0
				for n := 0; n < perAppender; {
					if !waited && n >= perAppender/2 {
						waited = true
						select {
						case <-firstDeletion:
						case <-gctx.Done():
							return gctx.Err()
						}
					}
					k := 1
					if n%10 == 9 {
						k = min(5, perAppender-n)
					}
					recs := make([]log.Record, k)
					for i := range recs {
						recs[i].Value = stressValue(a, n+i)
					}
					if _, err := p.Append(gctx, recs...); err != nil {
						return fmt.Errorf("appender %d record %d: %w", a, n, err)
					}
					n += k
				}
				return nil
			})
		}
		goFail(func() error {
			for !done.Load() {
				rep, err := tp.EnforceRetention(time.Now())
				if err != nil {
					return err
				}
				if deleted.Add(int64(rep.DeletedSegments())) > 0 {
					firstDeletionOnce.Do(func() { close(firstDeletion) })
				}
			}
			return nil
		})
		for f := range followers {
			goFail(func() error {
				r := p.Follow(0)
				last := make([]int, appenders)
				for i := range last {
					last[i] = -1
				}
				want := int64(0)
				for !done.Load() || r.Position() < p.HighWatermark() {
					wctx, wcancel := context.WithTimeout(gctx, 20*time.Millisecond)
					recs, err := r.Next(wctx, 8<<10)
					wcancel()
					var oor *log.OffsetOutOfRangeError
					switch {
					case errors.As(err, &oor):
						r.SetPosition(oor.StartOffset) // lapped by retention
						want = oor.StartOffset
						for i := range last { // what it read last is gone: start the order checks again
							last[i] = -1
						}
						continue
					case errors.Is(err, context.DeadlineExceeded) && gctx.Err() == nil:
						continue
					case err != nil:
						return fmt.Errorf("follower %d at %d: %w", f, r.Position(), err)
					}
					for _, rec := range recs {
						if rec.Offset != want {
							return fmt.Errorf("follower %d got offset %d, want %d", f, rec.Offset, want)
						}
						want++
						a, n, err := checkStressValue(rec.Value)
						if err != nil {
							return fmt.Errorf("follower %d offset %d: %w", f, rec.Offset, err)
						}
						if last[a] >= 0 && n <= last[a] {
							return fmt.Errorf("follower %d offset %d: appender %d record %d after its record %d", f, rec.Offset, a, n, last[a])
						}
						last[a] = n
					}
				}
				return nil
			})
		}
		go func() {
			appendWG.Wait()
			done.Store(true)
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, appenders*perAppender, p.HighWatermark())
		require.Positive(t, deleted.Load(), "retention deleted segments under the readers")
		for _, rec := range readAll(t, p) {
			_, _, err := checkStressValue(rec.Value)
			require.NoError(t, err, "offset %d", rec.Offset)
		}
	})
}
