package log_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/log"
)

// BenchmarkSyncedAppend measures appends with AckSynced of one 64 B record
// per call, by 1, 8 and 64 concurrent appenders sharing one partition, for
// each write path. It reports:
//
//   - records/s;
//   - x-baseline: that rate over the rate of one pwrite and fdatasync per
//     record (as BenchmarkBaselineSyncPerRecord), measured for 200 records
//     right before and 200 right after in the same directory, because this
//     disk's sync latency drifts by 2x within minutes. The target at 64
//     appenders is at least 50;
//   - syncs/op and writes/op: syncs and group writes per record;
//   - µs/sync: the mean duration of a sync;
//   - µs/round: the mean time from one sync round to the next.
func BenchmarkSyncedAppend(b *testing.B) {
	for _, mode := range modes {
		for _, appenders := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("mode=%s/appenders=%d", mode, appenders), func(b *testing.B) {
				dir := b.TempDir()
				base := syncPerRecord(b, dir, 200)
				lg, err := log.Open(dir, log.WithMode(mode))
				if err != nil {
					b.Fatal(err)
				}
				defer lg.Close()
				tp, _ := lg.CreateTopic("bench", 1)
				p, _ := tp.Partition(0)
				ctx := context.Background()
				var left atomic.Int64
				left.Store(int64(b.N))
				syncs, syncTime, writes := log.SyncCalls(p), log.SyncTime(p), log.WriteCalls(p)
				b.SetBytes(64)
				settle()
				b.ResetTimer()
				var wg sync.WaitGroup
				for range appenders {
					wg.Go(func() {
						rec := log.Record{Value: make([]byte, 64), Timestamp: 1}
						for left.Add(-1) >= 0 {
							if _, err := p.AppendAck(ctx, log.AckSynced, rec); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				elapsed := b.Elapsed()
				base += syncPerRecord(b, dir, 200)
				rate := float64(b.N) / elapsed.Seconds()
				n := float64(log.SyncCalls(p) - syncs)
				b.ReportMetric(rate, "records/s")
				b.ReportMetric(rate/(400/base.Seconds()), "x-baseline")
				b.ReportMetric(n/float64(b.N), "syncs/op")
				b.ReportMetric(float64(log.WriteCalls(p)-writes)/float64(b.N), "writes/op")
				b.ReportMetric((log.SyncTime(p)-syncTime).Seconds()*1e6/n, "µs/sync")
				b.ReportMetric(elapsed.Seconds()*1e6/n, "µs/round")
			})
		}
	}
}

// BenchmarkBaselineSyncPerRecord is what BenchmarkSyncedAppend is judged
// against: one pwrite of a framed 64 B record (length, CRC32C, body) and one
// fdatasync per record, appending to one file. It reports records/s.
func BenchmarkBaselineSyncPerRecord(b *testing.B) {
	b.SetBytes(64)
	took := syncPerRecord(b, b.TempDir(), b.N)
	b.ReportMetric(float64(b.N)/took.Seconds(), "records/s")
}

// syncPerRecord appends n framed 64 B records to a new file in dir with one
// pwrite and one fdatasync each, and returns the time it took.
func syncPerRecord(b *testing.B, dir string, n int) time.Duration {
	f, err := os.CreateTemp(dir, "baseline-*")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	table := crc32.MakeTable(crc32.Castagnoli)
	body := make([]byte, 64+32)
	frame := make([]byte, (8+len(body)+7)&^7)
	var pos int64
	start := time.Now()
	for range n {
		binary.LittleEndian.PutUint32(frame, uint32(len(body)))
		binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(body, table))
		copy(frame[8:], body)
		if _, err := f.WriteAt(frame, pos); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		pos += int64(len(frame))
	}
	return time.Since(start)
}
