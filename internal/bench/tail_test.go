package bench

import (
	"context"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// tailRate and tailFor are the writer's pace in BenchmarkTailFollow.
const (
	tailRate = 1000 // records per second, one per Append
	tailFor  = 3 * time.Second
)

// countingStore counts the saves that reach a store.
type countingStore struct {
	checkpoint.Store
	saves atomic.Int64
}

func (s *countingStore) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	s.saves.Add(1)
	return s.Store.Save(ctx, topic, partition, pos)
}

// BenchmarkTailFollow is issue 6's fourth figure: a writer appends one
// 64-byte record at a time at 1,000/s for 3 s while a follow-mode pipeline
// (source.Partition from a FileStore, no Replay) in a second, read-only Log
// of the same directory, as a consumer in another process would read it,
// handles them and checkpoints to that FileStore under the default policy.
// It reports checkpoint saves per second of the run and the latency from
// Append to the handler, p50 and p99 in ms (the append's wall-clock time
// travels in the value).
//
// It is wall-clock by nature: one op is one whole 3 s run whatever b.N, so
// at the default -benchtime=1s the framework stops after b.N = 1.
func BenchmarkTailFollow(b *testing.B) {
	for range b.N {
		saves, secs, lat := tailOnce(b)
		b.ReportMetric(float64(saves)/secs, "saves/s")
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond) }
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(len(lat)), "records")
	}
}

func tailOnce(b *testing.B) (saves int64, secs float64, lat []time.Duration) {
	dir := b.TempDir()
	w, err := log.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	tp, err := w.CreateTopic("tail", 1)
	if err != nil {
		b.Fatal(err)
	}
	p, err := tp.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	ro, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer ro.Close()
	fs, err := checkpoint.NewFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	store := &countingStore{Store: fs}

	var handled atomic.Int64
	lat = make([]time.Duration, 0, int(tailFor.Seconds()*tailRate)+16)
	pipe := stream.From(source.Partition(ro, "tail", 0, source.FromStore(store))).
		Tap(func(_ context.Context, r log.Record) error {
			sent := int64(binary.LittleEndian.Uint64(r.Value))
			lat = append(lat, time.Duration(time.Now().UnixNano()-sent))
			handled.Add(1)
			return nil
		}).
		Checkpointing(store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- pipe.Run(ctx) }()

	tick := time.NewTicker(time.Second / tailRate)
	defer tick.Stop()
	value := make([]byte, valueSize)
	appended := int64(0)
	for deadline := start.Add(tailFor); time.Now().Before(deadline); {
		<-tick.C
		binary.LittleEndian.PutUint64(value, uint64(time.Now().UnixNano()))
		if _, err := p.Append(context.Background(), log.Record{Value: value}); err != nil {
			b.Fatal(err)
		}
		appended++
	}
	// Let the follower catch up (at most 5 s) before stopping it.
	giveUp, poll := time.After(5*time.Second), time.NewTicker(time.Millisecond)
wait:
	for handled.Load() < appended {
		select {
		case <-giveUp:
			break wait // the check below says how many were handled
		case <-poll.C:
		}
	}
	poll.Stop()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	secs = time.Since(start).Seconds()
	if n := handled.Load(); n != appended {
		b.Fatalf("handled %d of %d records", n, appended)
	}
	pos, ok, err := fs.Load(context.Background(), "tail", 0)
	if err != nil || !ok || pos.Offset != appended {
		b.Fatalf("saved position %v, %v, %v; want offset %d", pos, ok, err, appended)
	}
	return store.saves.Load(), secs, lat
}
