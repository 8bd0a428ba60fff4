package bench

import (
	"context"
	"fmt"
	"io"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// statefulKeys is how many keys the stateful benchmarks spread records over.
const statefulKeys = 1000

// windowSize is the tumbling window of BenchmarkWindow; windowMillis is the
// number of records in one window, one record per millisecond of event time.
const (
	windowSize   = time.Minute
	windowMillis = int64(windowSize / time.Millisecond)
)

// stateRecords is the fixed run that measures the state bytes per key: two
// windows, so the first has fired and been dropped and the state holds
// the second one of every key.
const stateRecords = 2 * windowMillis

// eventBase is the event time of the first record (ms), on a minute, so
// that every window holds windowMillis records.
var eventBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// keyedPool holds one record of valueSize bytes per key: its value starts
// with the key as four ASCII digits ("0042"), then filler.
var keyedPool = func() []log.Record {
	p := make([]log.Record, statefulKeys)
	for k := range p {
		v := make([]byte, valueSize)
		copy(v, fmt.Sprintf("%04d ", k))
		for j := 5; j < len(v); j++ {
			v[j] = byte('a' + (k+j)%26)
		}
		p[k] = log.Record{Value: v}
	}
	return p
}()

// recordKey reads the key back from a record's first four bytes, without
// allocating.
func recordKey(r log.Record) int {
	v := r.Value
	return int(v[0]-'0')*1000 + int(v[1]-'0')*100 + int(v[2]-'0')*10 + int(v[3]-'0')
}

// eventSource is a stream.Source of n records, record i being keyedPool[i
// mod 1,000] (key i mod 1,000) with the Timestamp eventBase + i ms: one
// record per millisecond of event time, in order. Like memSource it hands
// out batches of batchSize from one reused buffer, with lineage, and
// allocates nothing per Read.
type eventSource struct {
	n, next int64
	buf     []stream.Element[log.Record]
}

func newEventSource(n int64) *eventSource {
	return &eventSource{n: n, buf: make([]stream.Element[log.Record], batchSize)}
}

func (s *eventSource) Read(context.Context) ([]stream.Element[log.Record], error) {
	if s.next >= s.n {
		return nil, io.EOF
	}
	k := int(min(s.n-s.next, batchSize))
	out := s.buf[:k]
	for i := range out {
		off := s.next + int64(i)
		out[i] = stream.Element[log.Record]{Value: keyedPool[off%statefulKeys], Topic: "mem", Partition: 0, Offset: off,
			Epoch: checkpoint.NoEpoch, Timestamp: eventBase + off}
	}
	s.next += int64(k)
	return out, nil
}

func (s *eventSource) Close() error { return nil }

// stromWindow counts the records of src per key in tumbling windows of one
// minute of event time (the default: Element.Timestamp), into a sink that
// counts the results and adds their counts up, checkpointing to store
// with opts when store is not nil.
func stromWindow(src stream.Source[log.Record], store checkpoint.Store, opts ...stream.CheckpointOption) (results int, sum int64, err error) {
	k := stream.KeyBy(stream.From(src), recordKey)
	out := stream.Window(k, stream.Tumbling(windowSize), stream.Count[log.Record]()).
		To(sink.Func(func(_ context.Context, rs []stream.WindowResult[int, int64]) error {
			results += len(rs)
			for i := range rs {
				sum += rs[i].Value
			}
			return nil
		}))
	if store != nil {
		out = out.Checkpointing(store, opts...)
	}
	err = out.Run(context.Background())
	return results, sum, err
}

// stromCount counts the records of src per key with Aggregate, into a sink
// that keeps each key's latest count (last[key]), checkpointing to store
// when it is not nil (default policy). updates is the number of KV the
// sink got: one per record.
func stromCount(src stream.Source[log.Record], store checkpoint.Store) (updates int, last []int64, err error) {
	last = make([]int64, statefulKeys)
	k := stream.KeyBy(stream.From(src), recordKey)
	out := stream.Aggregate(k, stream.Count[log.Record]()).
		To(sink.Func(func(_ context.Context, kvs []stream.KV[int, int64]) error {
			updates += len(kvs)
			for i := range kvs {
				last[kvs[i].Key] = kvs[i].Value
			}
			return nil
		}))
	if store != nil {
		out = out.Checkpointing(store)
	}
	err = out.Run(context.Background())
	return updates, last, err
}

// wantWindows is how many results stromWindow emits for n records: one per
// key and minute with records (each window fires once, Final).
func wantWindows(n int64) int {
	w := 0
	for start := int64(0); start < n; start += windowMillis {
		w += int(min(n-start, windowMillis, statefulKeys))
	}
	return w
}

// checkWindows fails b unless the window results of n records add up.
func checkWindows(b testing.TB, n int64, results int, sum int64) {
	b.Helper()
	if results != wantWindows(n) || sum != n {
		b.Fatalf("the sink got %d window results counting %d records; want %d counting %d", results, sum, wantWindows(n), n)
	}
}

// storeKind makes the checkpoint store of a benchmark case.
type storeKind func(b *testing.B) checkpoint.StateStore

func memoryStore(*testing.B) checkpoint.StateStore { return &checkpoint.MemoryStore{} }

func fileStore(b *testing.B) checkpoint.StateStore {
	s, err := checkpoint.NewFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// stateSaveCounter counts the state snapshots saved through it.
type stateSaveCounter struct {
	checkpoint.StateStore
	saves atomic.Int64
}

func (s *stateSaveCounter) SaveState(ctx context.Context, name string, state []byte) error {
	s.saves.Add(1)
	return s.StateStore.SaveState(ctx, name, state)
}

// timed runs fn, one op per record of b.N, reports records/s,
// allocs/record (allocs/op unrounded) and, with a store, the state
// snapshots saved per second (saves/s), and returns how long fn took.
func timed(b *testing.B, store *stateSaveCounter, fn func() error) time.Duration {
	b.Helper()
	var ms0, ms1 goruntime.MemStats
	b.ReportAllocs()
	goruntime.ReadMemStats(&ms0)
	start := time.Now()
	err := fn()
	elapsed := time.Since(start)
	b.StopTimer()
	goruntime.ReadMemStats(&ms1)
	if err != nil {
		b.Fatal(err)
	}
	reportRate(b, b.N, elapsed)
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/record")
	if store != nil {
		b.ReportMetric(float64(store.saves.Load())/elapsed.Seconds(), "saves/s")
	}
	return elapsed
}

// reportSaveCost runs without, the same pipeline over the same b.N records
// without a store, right after the case that took with, untimed, and
// reports without-ns/record and save-ns/record: (with - without) / b.N,
// the cost of saving state per record. Measured side by side, because
// the load of this shared machine swings between sub-benchmarks.
func reportSaveCost(b *testing.B, with time.Duration, without func() error) {
	b.Helper()
	start := time.Now()
	if err := without(); err != nil {
		b.Fatal(err)
	}
	wo := time.Since(start)
	b.ReportMetric(float64(wo.Nanoseconds())/float64(b.N), "without-ns/record")
	b.ReportMetric(float64((with-wo).Nanoseconds())/float64(b.N), "save-ns/record")
}

// stateBytesPerKey runs run over stateRecords records with a MemoryStore
// (default policy) and returns the size of the snapshot saved under name
// last, divided by the keys open in it: the 1,000 keys of the second
// window, every key's first having fired and been dropped (the snapshot's
// fixed part, the marks and the watermark, is shared among them).
func stateBytesPerKey(b *testing.B, name string, run func(stream.Source[log.Record], checkpoint.Store) error) (perKey float64, size int) {
	b.Helper()
	var store checkpoint.MemoryStore
	if err := run(newEventSource(stateRecords), &store); err != nil {
		b.Fatal(err)
	}
	data, ok, err := store.LoadState(context.Background(), name)
	if err != nil || !ok || len(data) == 0 {
		b.Fatalf("state %q after the run: %d bytes, found %v, %v", name, len(data), ok, err)
	}
	return float64(len(data)) / statefulKeys, len(data)
}

// BenchmarkWindow is issue 9's windowed figure: a tumbling-window count of
// 64 B records over 1,000 keys (key i mod 1,000) in 1-minute windows of
// event time (record i at base + i ms, so 60,000 records a window, 60 per
// key), from memory into a sink that counts the results; beside it,
// "stateless", the three stateless stages of BenchmarkThree over the same
// source in the same run, the baseline of the table's ratio. One op is one
// record (b.N records through one pipeline), so ns/op and allocs/op are
// per record.
//
// The tumbling cases differ only in checkpointing: "none" (state in
// memory only), "memory" and "file" (a MemoryStore, a FileStore in
// b.TempDir(), default policy: a snapshot every 200ms), and
// "memory-each-batch" and "file-each-batch" (CheckpointEachBatch: a
// snapshot of the 1,000 open windows and a position save after every
// source batch of 1,024 records, the worst case). Each case with a store
// also runs the pipeline without one over the same records right after,
// untimed, and reports save-ns/record, the cost of saving state: (with -
// without) / records, beside without-ns/record; and saves/s, the state
// snapshots saved per second. "memory" also reports state-B/key: the size
// of the snapshot after a fixed run of two windows, divided by the 1,000
// keys open in it.
func BenchmarkWindow(b *testing.B) {
	b.Run("stateless", func(b *testing.B) {
		var n int
		timed(b, nil, func() (err error) {
			n, _, err = stromThree(newEventSource(int64(b.N)), nil)
			return err
		})
		check(b, n, b.N)
	})
	each := []stream.CheckpointOption{stream.CheckpointEachBatch()}
	for _, c := range []struct {
		name  string
		store storeKind
		opts  []stream.CheckpointOption
	}{
		{"none", nil, nil},
		{"memory", memoryStore, nil},
		{"file", fileStore, nil},
		{"memory-each-batch", memoryStore, each},
		{"file-each-batch", fileStore, each},
	} {
		b.Run("tumbling/"+c.name, func(b *testing.B) {
			var cs *stateSaveCounter
			var store checkpoint.Store // a nil interface without a store
			if c.store != nil {
				cs = &stateSaveCounter{StateStore: c.store(b)}
				store = cs
			}
			var results int
			var sum int64
			with := timed(b, cs, func() (err error) {
				results, sum, err = stromWindow(newEventSource(int64(b.N)), store, c.opts...)
				return err
			})
			checkWindows(b, int64(b.N), results, sum)
			if cs != nil {
				reportSaveCost(b, with, func() error {
					results, sum, err := stromWindow(newEventSource(int64(b.N)), nil)
					checkWindows(b, int64(b.N), results, sum)
					return err
				})
				if data, ok, err := cs.LoadState(context.Background(), stream.StageWindow); err != nil || !ok || len(data) == 0 {
					b.Fatalf("no window state saved: %d bytes, found %v, %v", len(data), ok, err)
				}
			}
			if c.name == "memory" {
				perKey, size := stateBytesPerKey(b, stream.StageWindow, func(src stream.Source[log.Record], st checkpoint.Store) error {
					results, sum, err := stromWindow(src, st)
					checkWindows(b, stateRecords, results, sum)
					return err
				})
				b.ReportMetric(perKey, "state-B/key")
				b.ReportMetric(float64(size), "state-B")
			}
		})
	}
}

// BenchmarkAggregate is issue 9's keyed figure: Aggregate with Count over
// the records of BenchmarkWindow (1,000 keys, 64 B), emitting each key's
// new count per record into a sink that keeps the latest; "none" keeps the
// counts in memory only, "memory" checkpoints them to a MemoryStore
// (default policy) and reports save-ns/record, saves/s and state-B/key as
// BenchmarkWindow/tumbling/memory does (the snapshot after 120,000 records
// over the 1,000 keys). One op is one record. Its baseline in the table is
// BenchmarkWindow/stateless.
func BenchmarkAggregate(b *testing.B) {
	for _, c := range []struct {
		name  string
		store storeKind
	}{{"none", nil}, {"memory", memoryStore}} {
		b.Run("count/"+c.name, func(b *testing.B) {
			var cs *stateSaveCounter
			var store checkpoint.Store
			if c.store != nil {
				cs = &stateSaveCounter{StateStore: c.store(b)}
				store = cs
			}
			var updates int
			var last []int64
			with := timed(b, cs, func() (err error) {
				updates, last, err = stromCount(newEventSource(int64(b.N)), store)
				return err
			})
			checkCounts(b, int64(b.N), updates, last)
			if cs != nil {
				reportSaveCost(b, with, func() error {
					updates, last, err := stromCount(newEventSource(int64(b.N)), nil)
					checkCounts(b, int64(b.N), updates, last)
					return err
				})
			}
			if c.name == "memory" {
				perKey, size := stateBytesPerKey(b, stream.StageAggregate, func(src stream.Source[log.Record], st checkpoint.Store) error {
					updates, last, err := stromCount(src, st)
					checkCounts(b, stateRecords, updates, last)
					return err
				})
				b.ReportMetric(perKey, "state-B/key")
				b.ReportMetric(float64(size), "state-B")
			}
		})
	}
}

// checkCounts fails b unless Aggregate's output over n records is one
// update per record and every key's latest count is its share of n.
func checkCounts(b testing.TB, n int64, updates int, last []int64) {
	b.Helper()
	if int64(updates) != n {
		b.Fatalf("the sink got %d updates, want one per record (%d)", updates, n)
	}
	for k, got := range last {
		want := n / statefulKeys
		if int64(k) < n%statefulKeys {
			want++
		}
		if got != want {
			b.Fatalf("key %d counted %d records, want %d", k, got, want)
		}
	}
}

// TestStatefulBenchPipelinesCountEveryRecordOnce ensures the pipelines of
// BenchmarkWindow and BenchmarkAggregate do the work the figures claim:
// every record counted once, in one window result per key and minute, with
// and without a store, and that the key read back from a record is the one
// rendered into it.
func TestStatefulBenchPipelinesCountEveryRecordOnce(t *testing.T) {
	for k, r := range keyedPool {
		if recordKey(r) != k || len(r.Value) != valueSize {
			t.Fatalf("record of key %d reads back as key %d, %d bytes", k, recordKey(r), len(r.Value))
		}
	}
	const n = windowMillis + 1500 // a second window of 1,500 records: every key twice in it
	for _, persist := range []bool{false, true} {
		var wstore, astore checkpoint.Store
		if persist {
			wstore, astore = &checkpoint.MemoryStore{}, &checkpoint.MemoryStore{}
		}
		results, sum, err := stromWindow(newEventSource(n), wstore, stream.CheckpointEachBatch())
		if err != nil {
			t.Fatal(err)
		}
		checkWindows(t, n, results, sum)
		updates, last, err := stromCount(newEventSource(n), astore)
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, n, updates, last)
	}
	if wantWindows(n) != 2*statefulKeys {
		t.Fatalf("wantWindows(%d) = %d, want %d", n, wantWindows(n), 2*statefulKeys)
	}
	if wantWindows(3) != 3 || wantWindows(2*windowMillis+1) != 2*statefulKeys+1 {
		t.Fatalf("wantWindows(3) = %d, wantWindows(2 windows + 1) = %d", wantWindows(3), wantWindows(2*windowMillis+1))
	}
}
