package bench

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The partition and handler of BenchmarkFirstCheckpoint (issue 17): 2,000
// records of 100 B are about one default source batch (256 KiB, some
// 1,800 records as framed), and 2 ms a record is a database write or an
// HTTP call.
const (
	firstRecords    = 2000
	firstValueBytes = 100
	firstWork       = 2 * time.Millisecond
)

// firstSaveStore is a checkpoint.Store that notes when it is first asked to
// save a position above 0, and that position.
type firstSaveStore struct {
	checkpoint.Store
	at   atomic.Int64 // UnixNano of that Save; 0 before it
	pos  atomic.Int64
	seen chan struct{} // closed at that Save
}

func (s *firstSaveStore) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	if pos.Offset > 0 && s.at.CompareAndSwap(0, time.Now().UnixNano()) {
		s.pos.Store(pos.Offset)
		close(s.seen)
	}
	return s.Store.Save(ctx, topic, partition, pos)
}

// BenchmarkFirstCheckpoint is issue 17's time to the first checkpoint:
// stream.ConsumeForever with default options over source.Partition with
// default options (follow, 256 KiB batches) from an empty FileStore, with
// a handler that takes 2 ms a record, over a partition of 2,000 records
// of 100 B. It reports the wall time from the first handler call to the
// first Save of a position above 0 (ms-to-first-checkpoint, the mean over
// the ops) and that position (first-position). A pipeline that saves only
// whole source batches saves the first after the whole batch, about 4 s;
// issue 17's target is below 500 ms.
//
// One op is one consumer from an empty store, stopped once it saved, the
// handler skipping its sleep once the context is cancelled so that the
// op does not wait for the rest of the batch.
func BenchmarkFirstCheckpoint(b *testing.B) {
	lg, err := log.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	t, err := lg.CreateTopic("first", 1)
	if err != nil {
		b.Fatal(err)
	}
	part, err := t.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]log.Record, firstRecords)
	for i := range recs {
		v := "r." + strconv.Itoa(i) + " "
		recs[i] = log.Record{Value: []byte(v + strings.Repeat("x", firstValueBytes-len(v)))}
	}
	if _, err := part.Append(context.Background(), recs...); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var total time.Duration
	var positions int64
	for range b.N {
		d, pos := firstCheckpointOnce(b, lg)
		total += d
		positions += pos
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(time.Millisecond), "ms-to-first-checkpoint")
	b.ReportMetric(float64(positions)/float64(b.N), "first-position")
}

// firstCheckpointOnce runs one consumer of partition 0 of "first" from an
// empty FileStore until its first Save of a position above 0, and returns
// the time from its first handler call to that Save, and the position.
func firstCheckpointOnce(b *testing.B, lg *log.Log) (time.Duration, int64) {
	fs, err := checkpoint.NewFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	store := &firstSaveStore{Store: fs, seen: make(chan struct{})}
	var first atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		src := source.Partition(lg, "first", 0, source.FromStore(store))
		ran <- stream.ConsumeForever(ctx, src, store, func(ctx context.Context, _ log.Record) error {
			if first.Load() == 0 {
				first.CompareAndSwap(0, time.Now().UnixNano())
			}
			sleepCtx(ctx, firstWork)
			return nil
		})
	}()
	select {
	case <-store.seen:
	case err := <-ran:
		b.Fatalf("ConsumeForever returned before its first checkpoint: %v", err)
	case <-time.After(time.Minute):
		b.Fatal("no position above 0 saved within a minute")
	}
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return time.Duration(store.at.Load() - first.Load()), store.pos.Load()
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
