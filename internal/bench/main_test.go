package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// valueSize is the size of every record's value, as in the issue.
const valueSize = 64

// batchSize is how many records a source hands out per Read and the
// fixture's writer appends per call: the log's own batch shape.
const batchSize = 1024

// logRecords is the size of the log fixture every replay reads.
const logRecords = 1 << 20

// fixtureTopic is the fixture's one-partition topic.
const fixtureTopic = "t"

// pool is the set of distinct records the in-memory sources cycle
// through: b.N records would not fit in memory at the rates measured.
var pool = func() []log.Record {
	p := make([]log.Record, batchSize)
	for i := range p {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte('a' + (i+j)%26)
		}
		p[i] = log.Record{Value: v}
	}
	return p
}()

// memSource is a stream.Source of n records from pool, handed out in
// batches of batchSize from one reused buffer (the Source contract allows
// it), with lineage, so the pipeline tracks every record. It allocates
// nothing per Read: what the pipeline allocates shows alone in allocs/op.
type memSource struct {
	n, next int64
	buf     []stream.Element[log.Record]
}

func newMemSource(n int) *memSource {
	return &memSource{n: int64(n), buf: make([]stream.Element[log.Record], batchSize)}
}

func (s *memSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if s.next >= s.n {
		return nil, io.EOF
	}
	k := int(min(s.n-s.next, batchSize))
	out := s.buf[:k]
	for i := range out {
		off := s.next + int64(i)
		out[i] = stream.Element[log.Record]{Value: pool[off%batchSize], Topic: "mem", Partition: 0, Offset: off, Epoch: checkpoint.NoEpoch}
	}
	s.next += int64(k)
	return out, nil
}

func (s *memSource) Close() error { return nil }

// fixture is the log every replay benchmark reads: logRecords records of
// valueSize bytes in partition 0 of fixtureTopic, written once per test
// binary through the writer's (read-write) log, which stays open.
type fixture struct {
	dir string
	lg  *log.Log
}

var (
	fixOnce sync.Once
	fix     fixture
	fixErr  error
)

func logFixture(b *testing.B) fixture {
	b.Helper()
	fixOnce.Do(func() { fix, fixErr = writeFixture() })
	if fixErr != nil {
		b.Fatal(fixErr)
	}
	return fix
}

func writeFixture() (fixture, error) {
	dir, err := os.MkdirTemp("", "strom-bench-log-")
	if err != nil {
		return fixture{}, err
	}
	lg, err := log.Open(dir)
	if err != nil {
		return fixture{}, err
	}
	tp, err := lg.CreateTopic(fixtureTopic, 1)
	if err != nil {
		return fixture{}, err
	}
	p, err := tp.Partition(0)
	if err != nil {
		return fixture{}, err
	}
	for i := 0; i < logRecords; i += batchSize {
		if _, err := p.Append(context.Background(), pool...); err != nil {
			return fixture{}, fmt.Errorf("append at %d: %w", i, err)
		}
	}
	settle()
	return fixture{dir: dir, lg: lg}, nil
}

// settle writes back every dirty page of the machine (sync(2)) and
// collects the heap: called outside the timer after a benchmark builds its
// fixture, and between ops that write, so that no timed part pays for
// writing back another's pages or for collecting another's garbage. Before
// it, the first side to run after a fixture-heavy benchmark in the same
// test binary measured less than the same side alone (issue 24; the
// package doc gives the numbers).
func settle() {
	unix.Sync()
	runtime.GC()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.lg != nil {
		fix.lg.Close()
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}
