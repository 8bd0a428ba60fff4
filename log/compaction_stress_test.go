package log_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestCompactionBesideAppendsFollowersAndTruncateUnderTheRaceDetector runs
// cleaner passes in a loop while appenders write keyed records, a Truncate
// now and then cuts the last records, a follower of the writer's log and
// one of a read-only log on the same directory read everything, and
// retention of the compact,delete policy is checked. Afterwards every
// record served is the one appended at its offset, every key's last
// record is its last append, and both followers read without an error.
func TestCompactionBesideAppendsFollowersAndTruncateUnderTheRaceDetector(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(8 << 10), log.WithRetentionCheckInterval(0), log.WithCleanerInterval(0)}
		lg := openLog(t, dir, opts...)
		tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		ro := openLog(t, dir, log.ReadOnly(), log.WithPollInterval(time.Millisecond))
		rt, err := ro.Topic("users")
		require.NoError(t, err)
		rp, err := rt.Partition(0)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			mu      sync.RWMutex // appends (read side) against a Truncate (write side)
			wmu     sync.Mutex   // written, among appenders
			written = map[int64]string{}
			appends = strength(300, 1500, 10000)
			refused atomic.Int64
			passes  atomic.Int64
			wg      sync.WaitGroup
			awg     sync.WaitGroup // the appenders
			// firstPass is closed by the cleaner's first pass, which the
			// appenders wait for halfway: a pass runs beside the appends,
			// whatever the scheduling.
			firstPass = make(chan struct{})
			firstOnce sync.Once
		)
		// appended is cancelled once every appender is done: the truncator
		// and the cleaner stop then.
		appended, stopAll := context.WithCancel(ctx)
		defer stopAll()
		const appenders = 4
		for a := range appenders {
			awg.Go(func() {
				for i := range appends {
					if i == appends/2 {
						<-firstPass
					}
					key := fmt.Sprintf("key-%02d", (i*7+a)%40)
					val := fmt.Sprintf("%s=%d/%d", key, a, i)
					mu.RLock()
					off, err := p.Append(ctx, log.Record{Key: []byte(key), Value: []byte(val)})
					if err == nil {
						wmu.Lock()
						written[off] = val
						wmu.Unlock()
					}
					mu.RUnlock()
					if err != nil && !errors.Is(err, log.ErrTruncated) {
						t.Errorf("append: %v", err)
						return
					}
				}
			})
		}
		go func() { awg.Wait(); stopAll() }()
		wg.Go(func() { // the truncator: a Truncate after every 20 new records
			for appended.Err() == nil {
				// Wait for 20 records past the end the last Truncate left.
				if err := p.Follow(p.HighWatermark() + 20).Wait(appended); err != nil {
					return
				}
				mu.Lock()
				hw := p.HighWatermark()
				if hw > 50 {
					switch err := p.Truncate(hw - 5); {
					case errors.Is(err, log.ErrCompacted):
						refused.Add(1) // a pass relied on a record up there
					default:
						require.NoError(t, err)
						for o := hw - 5; o < hw; o++ {
							delete(written, o)
						}
					}
				}
				mu.Unlock()
			}
		})
		wg.Go(func() { // the cleaner
			for {
				_, err := tp.Compact(time.Now())
				require.NoError(t, err)
				passes.Add(1)
				firstOnce.Do(func() { close(firstPass) })
				if appended.Err() != nil {
					return
				}
			}
		})
		follow := func(name string, part *log.Partition) {
			wg.Go(func() {
				rd := part.Follow(0)
				for {
					_, err := rd.Next(ctx, 64<<10)
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("%s follower: %v", name, err)
						return
					}
				}
			})
		}
		follow("writer's log", p)
		follow("read-only log", rp)
		<-appended.Done()
		_, err = tp.Compact(time.Now())
		require.NoError(t, err)
		cancel()
		wg.Wait()
		require.Positive(t, passes.Load())

		mu.Lock()
		defer mu.Unlock()
		check := func(what string, got []log.Record) {
			last := map[string]int64{}
			for _, r := range got {
				want, ok := written[r.Offset]
				require.True(t, ok, "%s: offset %d was never appended, or was truncated", what, r.Offset)
				require.Equal(t, want, string(r.Value), "%s: offset %d", what, r.Offset)
				last[string(r.Key)] = r.Offset
			}
			wantLast := map[string]int64{}
			for o, v := range written {
				k := v[:6]
				if o > wantLast[k] || wantLast[k] == 0 {
					wantLast[k] = max(wantLast[k], o)
				}
			}
			assert.Equal(t, wantLast, last, "%s: every key's last record is its last append", what)
		}
		check("writer's log", readAll(t, p))
		check("read-only log", readAll(t, rp))
		t.Logf("%d passes, %d truncations refused, %d records appended and kept, %d served", passes.Load(), refused.Load(), len(written), len(readAll(t, p)))
	})
}
