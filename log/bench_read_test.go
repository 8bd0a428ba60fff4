package log_test

import (
	"context"
	"errors"
	"fmt"
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

// BenchmarkReaderNextInto measures one 1 MiB batch of 64-byte records
// (about 9,300 of them) per op through a Reader of the writer's log, in
// three ways: Next (a new []Record per batch), NextInto reusing the caller's
// []Record (the default bytes: one buffer per batch, valid after later
// calls), and NextInto with SetReuseBytes (the Reader's buffer, valid until
// the next call). headers=2 gives every record two headers. allocs/op is per
// batch and stays O(1), not O(records); records/s is reported too.
func BenchmarkReaderNextInto(b *testing.B) {
	for _, headers := range []int{0, 2} {
		dir := b.TempDir()
		lg, err := log.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		tp, _ := lg.CreateTopic("bench", 1)
		p, _ := tp.Partition(0)
		recs := make([]log.Record, 1000)
		for i := range recs {
			recs[i] = log.Record{Value: make([]byte, replayValueBytes), Timestamp: 1}
			for h := range headers {
				recs[i].Headers = append(recs[i].Headers, log.Header{Key: fmt.Sprintf("h%d", h), Value: []byte("v")})
			}
		}
		for range 50 {
			if _, err := p.Append(context.Background(), recs...); err != nil {
				b.Fatal(err)
			}
		}
		for _, way := range []string{"Next", "NextInto", "NextInto-reuse"} {
			b.Run(fmt.Sprintf("headers=%d/%s", headers, way), func(b *testing.B) {
				ctx := context.Background()
				r := p.Replay(0)
				r.SetReuseBytes(way == "NextInto-reuse")
				var batch []log.Record
				n := 0
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					var err error
					if way == "Next" {
						batch, err = r.Next(ctx, 1<<20)
					} else {
						batch, err = r.NextInto(ctx, batch[:0], 1<<20)
					}
					if errors.Is(err, io.EOF) {
						r.SetPosition(0)
						batch, err = r.NextInto(ctx, batch[:0], 1<<20)
					}
					if err != nil {
						b.Fatal(err)
					}
					n += len(batch)
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(n)/float64(b.N), "records/op")
			})
		}
		lg.Close()
	}
}
