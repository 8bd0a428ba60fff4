package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/destel/rill"
	"github.com/reugn/go-streams/extension"
	"github.com/reugn/go-streams/flow"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The three stages of every pipeline: Map identity, Filter on a non-empty
// value, MapTo the value's length, into a sink that counts.
func identity(_ context.Context, r log.Record) (log.Record, error) { return r, nil }
func nonEmpty(_ context.Context, r log.Record) (bool, error)       { return len(r.Value) > 0, nil }
func length(_ context.Context, r log.Record) (int, error)          { return len(r.Value), nil }

// stromThree runs the three stages over src into a counting sink.Func,
// checkpointing to store when it is not nil (default policy), and returns
// the count and the sum of the lengths.
func stromThree(src stream.Source[log.Record], store checkpoint.Store) (n, sum int, err error) {
	var c counts
	err = threeStages(src, store, &c).Run(context.Background())
	return c.n, c.sum, err
}

// counts is what the three stages' sink counted: records and the sum of
// their lengths.
type counts struct{ n, sum int }

// threeStages builds the three stages over src into a sink counting into
// c, checkpointing to store when it is not nil (default policy), without
// running them.
func threeStages(src stream.Source[log.Record], store checkpoint.Store, c *counts) *stream.Stream[int] {
	s := stream.From(src).Map(identity).Filter(nonEmpty)
	out := stream.MapTo(s, length).To(sink.Func(func(_ context.Context, vs []int) error {
		c.n += len(vs)
		for _, v := range vs {
			c.sum += v
		}
		return nil
	}))
	if store != nil {
		out = out.Checkpointing(store)
	}
	return out
}

// goStreamsThree runs the same pipeline in go-streams v0.13.0 over n
// records from pool, fed one by one into a ChanSource by a goroutine, with
// every stage's parallelism 1 (the order-keeping setting), into a sink
// that counts.
func goStreamsThree(n int) (count, sum int) {
	in := make(chan any)
	go func() {
		for i := range n {
			in <- pool[i%batchSize]
		}
		close(in)
	}()
	snk := newCountSink()
	extension.NewChanSource(in).
		Via(flow.NewMap(func(r log.Record) log.Record { return r }, 1)).
		Via(flow.NewFilter(func(r log.Record) bool { return len(r.Value) > 0 }, 1)).
		Via(flow.NewMap(func(r log.Record) int { return len(r.Value) }, 1)).
		To(snk)
	return snk.n, snk.sum
}

// countSink is a go-streams Sink that counts ints.
type countSink struct {
	in     chan any
	done   chan struct{}
	n, sum int
}

func newCountSink() *countSink {
	s := &countSink{in: make(chan any), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for v := range s.in {
			s.n++
			s.sum += v.(int)
		}
	}()
	return s
}

func (s *countSink) In() chan<- any   { return s.in }
func (s *countSink) AwaitCompletion() { <-s.done }

// rillThree runs the same pipeline in rill v0.7.0 with concurrency 1 in
// every stage, over n records from pool fed through a channel.
func rillThree(n int) (count, sum int, err error) {
	in := make(chan log.Record)
	go func() {
		for i := range n {
			in <- pool[i%batchSize]
		}
		close(in)
	}()
	recs := rill.FromChan(in, nil)
	mapped := rill.Map(recs, 1, func(r log.Record) (log.Record, error) { return r, nil })
	kept := rill.Filter(mapped, 1, func(r log.Record) (bool, error) { return len(r.Value) > 0, nil })
	lens := rill.Map(kept, 1, func(r log.Record) (int, error) { return len(r.Value), nil })
	err = rill.ForEach(lens, 1, func(v int) error {
		count++
		sum += v
		return nil
	})
	return count, sum, err
}

func reportRate(b *testing.B, records int, elapsed time.Duration) {
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
}

func check(b *testing.B, got, want int) {
	b.Helper()
	if got != want {
		b.Fatalf("the sink counted %d records, want %d", got, want)
	}
}

// BenchmarkThree is issue 6's first figure: three stages from memory, 64 B
// records. One op is one record: b.N records go through one pipeline, so
// allocs/op is allocations per record (0 means none in the steady state;
// what a pipeline allocates once is divided by b.N).
func BenchmarkThree(b *testing.B) {
	b.Run("strom", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		n, _, err := stromThree(newMemSource(b.N), nil)
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		check(b, n, b.N)
		reportRate(b, b.N, elapsed)
	})
	b.Run("gostreams", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		n, _ := goStreamsThree(b.N)
		elapsed := time.Since(start)
		check(b, n, b.N)
		reportRate(b, b.N, elapsed)
	})
	b.Run("rill", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		n, _, err := rillThree(b.N)
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		check(b, n, b.N)
		reportRate(b, b.N, elapsed)
	})
}

// BenchmarkThreeFromLog is issue 6's second and third figures: the three
// stages over a replay of the fixture partition (1,048,576 records of
// 64 B) with a FileStore under the default checkpoint policy. One op is one
// whole replay. "rw" reads through the writer's log, "ro" through a second
// Log of the same directory opened with log.ReadOnly(), as a follower in
// another process would. allocs/record is allocs/op divided by the records
// of one op.
func BenchmarkThreeFromLog(b *testing.B) {
	fx := logFixture(b)
	ro, err := log.Open(fx.dir, log.ReadOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Topic(fixtureTopic); err != nil { // recovery walk outside the timer
		b.Fatal(err)
	}
	// rw and ro read with the default, safe record bytes (a new buffer per
	// batch); rw-reuse with source.ReuseBytes (one buffer, valid until the
	// next Read), which this sequential pipeline allows.
	for _, c := range []struct {
		name string
		lg   *log.Log
		opts []source.PartitionOption
	}{{"rw", fx.lg, nil}, {"ro", ro, nil}, {"rw-reuse", fx.lg, []source.PartitionOption{source.ReuseBytes()}}} {
		b.Run(c.name, func(b *testing.B) {
			store, err := checkpoint.NewFileStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			settle()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				src := source.Partition(c.lg, fixtureTopic, 0, source.Earliest, append([]source.PartitionOption{source.Replay()}, c.opts...)...)
				n, _, err := stromThree(src, store)
				if err != nil {
					b.Fatal(err)
				}
				check(b, n, logRecords)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			reportRate(b, b.N*logRecords, elapsed)
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*logRecords), "allocs/record")
			pos, ok, err := store.Load(context.Background(), fixtureTopic, 0)
			if err != nil || !ok || pos.Offset != logRecords {
				b.Fatalf("saved position %v, %v, %v; want offset %d", pos, ok, err, logRecords)
			}
		})
	}
}
