package log_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/log"
)

// BenchmarkCompaction measures the cleaner (issue 21).
//
// clean: one pass over a partition of 200,000 records of 64 B over 10,000
// keys (every key written 20 times) in 1 MiB segments, each op on a fresh
// copy; MB/s is of the sealed segments the pass reads.
//
// append/cleaner=off and =on: appends of 64-record batches of 64 B keyed
// records to a compacted topic in 256 KiB segments, without the cleaner and
// with passes running back to back beside them (Topic.Compact in a loop,
// far more often than the background cleaner's 15 s); records/s of the
// appends.
//
// append/turns is the table's ratio of the two (make bench runs it with
// -benchtime 1x: one op is the whole run): a warm-up turn of each, then
// 10 pairs of turns in this process, the order swapped every pair, each
// turn 224,000 records (3,500 batches, about 200 ms) into a fresh log with
// the cleaner off or on, the machine synced and the heap collected before
// it; records/s and base-records/s are the median rates with the cleaner
// on and off, x-turns the median of their ratios pair by pair. Issue 24:
// one process a side, a round at a time, the ratio of a round moved from
// 0.47x to 1.33x within one run (sd 30%); a pair of 200 ms turns shares the
// machine's moment.
func BenchmarkCompaction(b *testing.B) {
	b.Run("clean", func(b *testing.B) {
		fixture := b.TempDir()
		lg, err := log.Open(fixture, log.WithSegmentBytes(1<<20), log.WithCleanerInterval(0), log.WithRetentionCheckInterval(0))
		if err != nil {
			b.Fatal(err)
		}
		tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
		if err != nil {
			b.Fatal(err)
		}
		p, _ := tp.Partition(0)
		recs := make([]log.Record, 1000)
		for i := 0; i < 200_000; i += len(recs) {
			for j := range recs {
				recs[j] = log.Record{Key: fmt.Appendf(nil, "key-%05d", (i+j)%10_000), Value: make([]byte, 64), Timestamp: 1}
			}
			if _, err := p.Append(context.Background(), recs...); err != nil {
				b.Fatal(err)
			}
		}
		infos, _ := p.Segments()
		var sealed int64
		for _, in := range infos[:len(infos)-1] {
			sealed += in.Bytes
		}
		lg.Close()
		b.SetBytes(sealed)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
			if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
				b.Fatal(err)
			}
			lg, err := log.Open(dir, log.WithCleanerInterval(0), log.WithRetentionCheckInterval(0))
			if err != nil {
				b.Fatal(err)
			}
			tp, err := lg.WriteTopic("users")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			rep, err := tp.Compact(time.Now())
			b.StopTimer()
			if err != nil || len(rep.Partitions) != 1 || rep.Partitions[0].Segments == 0 {
				b.Fatalf("pass: %+v, %v", rep, err)
			}
			lg.Close()
			b.StartTimer()
		}
	})
	b.Run("append/turns", func(b *testing.B) {
		var on, off, ratios []float64
		turn := func(cleaner bool) float64 {
			unix.Sync()
			runtime.GC()
			dir := b.TempDir()
			n, elapsed, _ := compactedAppends(b, dir, cleaner, 3500, func() {})
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			return float64(n) / elapsed.Seconds()
		}
		turn(true)
		turn(false)
		for i := range 10 {
			var x, y float64
			if i%2 == 0 {
				x, y = turn(true), turn(false)
			} else {
				y, x = turn(false), turn(true)
			}
			on, off, ratios = append(on, x), append(off, y), append(ratios, x/y)
		}
		b.ReportMetric(medianOf(on), "records/s")
		b.ReportMetric(medianOf(off), "base-records/s")
		b.ReportMetric(medianOf(ratios), "x-turns")
	})
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("append/cleaner=%s", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			b.SetBytes(64 * 64)
			n, elapsed, passes := compactedAppends(b, b.TempDir(), on, b.N, b.ResetTimer)
			b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
			if on {
				b.ReportMetric(float64(passes), "passes")
			}
		})
	}
}

// compactedAppends appends batches of 64 keyed records of 64 B (1,000
// keys) to a compacted topic of 256 KiB segments in a new log in dir, with
// Topic.Compact passes back to back beside the appends when cleaner is
// set, and returns the records appended, the time they took from start
// (called once the log is open) and the passes that ran.
func compactedAppends(b *testing.B, dir string, cleaner bool, batches int, start func()) (int, time.Duration, int64) {
	b.Helper()
	lg, err := log.Open(dir, log.WithSegmentBytes(256<<10), log.WithCleanerInterval(0), log.WithRetentionCheckInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	if err != nil {
		b.Fatal(err)
	}
	p, _ := tp.Partition(0)
	batch := make([]log.Record, 64)
	for j := range batch {
		batch[j] = log.Record{Key: fmt.Appendf(nil, "key-%05d", j*37%1000), Value: make([]byte, 64), Timestamp: 1}
	}
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		passes atomic.Int64
	)
	if cleaner {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := tp.Compact(time.Now()); err != nil {
					b.Error(err)
					return
				}
				passes.Add(1)
			}
		})
	}
	start()
	t0 := time.Now()
	for range batches {
		if _, err := p.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	stop.Store(true)
	wg.Wait()
	return batches * len(batch), elapsed, passes.Load()
}

// medianOf returns the middle value of xs (the mean of the middle two for
// an even count); xs is not modified.
func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
