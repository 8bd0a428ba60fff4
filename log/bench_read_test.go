package log_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/strom-dev/strom/log"
)

// replayRecords and replayValueBytes are the data of the replay benchmarks:
// 200k records of 64-byte values in one partition (17.6 MiB of frames).
const (
	replayRecords    = 200_000
	replayValueBytes = 64
)

// writeReplayData creates topic "bench" of one partition in dir holding
// replayRecords records and returns the writer's log, still open.
func writeReplayData(b *testing.B, dir string) *log.Log {
	b.Helper()
	lg, err := log.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	tp, err := lg.CreateTopic("bench", 1)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := tp.Partition(0)
	recs := make([]log.Record, 1000)
	for i := range recs {
		recs[i] = log.Record{Value: make([]byte, replayValueBytes), Timestamp: 1}
	}
	for range replayRecords / len(recs) {
		if _, err := p.Append(context.Background(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	return lg
}

// replay reads p from 0 to its end in 1 MiB batches, b.N times, and reports
// records/s.
func replay(b *testing.B, p *log.Partition) {
	b.Helper()
	ctx := context.Background()
	b.SetBytes(replayRecords * replayValueBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := p.Replay(0)
		n := 0
		for {
			recs, err := r.Next(ctx, 1<<20)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(recs)
		}
		if n != replayRecords {
			b.Fatalf("replayed %d records, want %d", n, replayRecords)
		}
	}
	b.ReportMetric(float64(b.N)*replayRecords/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkReplayReadWrite replays 200k records of 64 B from offset 0 to the
// end in 1 MiB batches through the writer's own log. It reports records/s;
// BenchmarkReplayReadOnly is the same through a second, read-only Log.
func BenchmarkReplayReadWrite(b *testing.B) {
	lg := writeReplayData(b, b.TempDir())
	defer lg.Close()
	tp, _ := lg.Topic("bench")
	p, _ := tp.Partition(0)
	replay(b, p)
}

// BenchmarkReplayReadOnly is BenchmarkReplayReadWrite through a log opened
// ReadOnly on the same directory while the writer's log stays open, as a
// consumer in another process reads: every Read first refreshes (looks at
// the epoch file and for new frames).
func BenchmarkReplayReadOnly(b *testing.B) {
	dir := b.TempDir()
	lg := writeReplayData(b, dir)
	defer lg.Close()
	ro, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer ro.Close()
	tp, err := ro.Topic("bench")
	if err != nil {
		b.Fatal(err)
	}
	p, _ := tp.Partition(0)
	replay(b, p)
}
