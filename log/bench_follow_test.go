package log_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strom-dev/strom/log"
)

// BenchmarkFollowLatency measures, for each write mode, the delay from an
// Append in a child process (the test binary re-executed) to Next returning
// the record in this process, which follows it through a log opened
// read-only with polling off, so every wake-up comes from inotify (and, in
// ModeMmap, the writer's signal). The child appends one record every
// millisecond, so the follower is asleep at each append. It reports the
// median and 99th percentile in microseconds (p50-us, p99-us) over
// max(b.N, 100) records; ns/op is the pacing, not a cost.
func BenchmarkFollowLatency(b *testing.B) {
	for _, mode := range modes {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			lat := followChild(b, mode, max(b.N, 100), time.Millisecond, log.WithPollInterval(noPoll))
			us := func(q float64) float64 {
				return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Microsecond)
			}
			b.ReportMetric(us(0.50), "p50-us")
			b.ReportMetric(us(0.99), "p99-us")
		})
	}
}

// BenchmarkAppendWhileFollowed is BenchmarkSegmentAppend (64 B values, one
// record per call, no sync) with a follower of the partition waiting in a
// second, read-only Log of the same directory, as a follower in another
// process would: in ModeMmap every append it is waiting for costs the
// writer a signal (a pwrite of the waiters file). It reports records/s.
func BenchmarkAppendWhileFollowed(b *testing.B) {
	for _, mode := range modes {
		b.Run(fmt.Sprintf("mode=%s/value=64B/batch=1", mode), func(b *testing.B) {
			dir := b.TempDir()
			lg, err := log.Open(dir, log.WithMode(mode))
			if err != nil {
				b.Fatal(err)
			}
			defer lg.Close()
			tp, _ := lg.CreateTopic("bench", 1)
			p, _ := tp.Partition(0)
			ro, err := log.Open(dir, log.ReadOnly(), log.WithPollInterval(noPoll))
			if err != nil {
				b.Fatal(err)
			}
			defer ro.Close()
			rtp, err := ro.Topic("bench")
			if err != nil {
				b.Fatal(err)
			}
			rp, _ := rtp.Partition(0)
			ctx, cancel := context.WithCancel(context.Background())
			followed := make(chan int64)
			go func() {
				r := rp.Follow(0)
				n := int64(0)
				defer func() { followed <- n }()
				for {
					recs, err := r.Next(ctx, 1<<20)
					if err != nil {
						return
					}
					n += int64(len(recs))
				}
			}()
			rec := log.Record{Value: make([]byte, 64), Timestamp: 1}
			b.SetBytes(64)
			b.ResetTimer()
			for range b.N {
				if _, err := p.Append(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			cancel()
			<-followed
		})
	}
}
