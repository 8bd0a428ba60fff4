package source

import (
	"context"
	"sync"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultReadAheadBytes is the default of [ReadAheadBytes] and
// [KafkaReadAheadBytes]: 64 MiB, whatever the number of partitions. At the
// default [MaxBytes] (256 KiB) that is 256 batches: every partition of a
// topic of up to 128 partitions still keeps two batches ready, as all did
// before the bound. Measured on 256 partitions of 1 KiB records with the
// sink blocked (Read not called), heap after GC above the log's own:
// 161 MiB without a bound (0.63 MiB per partition), 85 MiB with this
// default (64 MiB counted; the rest is the elements' and readers'
// per-record memory, which the bound does not count).
const DefaultReadAheadBytes = 64 << 20

// ReadAheadBytes bounds the bytes of records a [TopicSource] holds read
// ahead of Read, over all its partitions together, to about n, overriding
// the default of [DefaultReadAheadBytes] (64 MiB). n <= 0 keeps the
// default.
//
// A batch counts from before its partition's goroutine reads it (each
// read reserves [MaxBytes], and gives back what the batch did not use)
// until Read hands it to the pipeline; from then on the pipeline holds it,
// and its own bounds apply. The bytes counted are those of the records'
// keys, values and headers, not Go's per-record overhead (an element is
// about 200 bytes more). A partition waiting for records (following at
// the high watermark) holds nothing.
//
// A batch larger than n is still read, alone: when nothing else is held a
// read may reserve more than n, so a small n never deadlocks. A record
// larger than MaxBytes is read whole (a batch always holds one record)
// and may take the bytes held past n by its size. Partitions wait for
// room in the order they asked, so the bound does not starve any.
func ReadAheadBytes(n int) TopicOption {
	return topicOptionFunc(func(c *topicConfig) {
		if n > 0 {
			c.readAhead = int64(n)
		}
	})
}

// budget is the byte bound shared by a TopicSource's reading goroutines:
// a weighted semaphore that serves waiters first come, first served and
// lets one request of any size through when nothing is held.
type budget struct {
	limit int64

	mu      sync.Mutex
	held    int64           // bytes reserved or read ahead, not yet handed on
	peak    int64           // the most held at once since the source was built (tests)
	waiters []*budgetWaiter // in arrival order
}

// budgetWaiter is one acquire waiting for room; ready is closed once its
// bytes are granted.
type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// fitsLocked reports whether n more bytes may be held now: under the
// limit, or alone when nothing is held.
func (b *budget) fitsLocked(n int64) bool { return b.held == 0 || b.held+n <= b.limit }

// addLocked holds n more bytes.
func (b *budget) addLocked(n int64) {
	b.held += n
	b.peak = max(b.peak, b.held)
}

// acquire waits until n bytes fit and holds them, or returns ctx.Err()
// holding nothing.
func (b *budget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitsLocked(n) {
		b.addLocked(n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.held -= n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked() // the next in line may fit now
		}
		return ctx.Err()
	}
}

// grow holds n more bytes without waiting: a batch that came out larger
// than its reservation (one record above MaxBytes) is in memory already.
func (b *budget) grow(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(n)
}

// release gives back n bytes and wakes the waiters that fit now, in order.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	b.grantLocked()
}

// grantLocked grants the waiters at the head of the line while they fit.
func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.fitsLocked(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.addLocked(w.n)
		close(w.ready)
	}
}

// reset forgets everything held: the reading goroutines have stopped and
// their read-ahead is dropped.
func (b *budget) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = 0
	b.grantLocked()
}

// stats returns the bytes held now, the most held at once and the number
// of acquires waiting for room.
func (b *budget) stats() (held, peak int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.peak, len(b.waiters)
}

// batchBytes is what a batch counts against the budget: the bytes of its
// records' keys, values and headers.
func batchBytes(elems []stream.Element[log.Record]) int64 {
	var n int64
	for i := range elems {
		r := &elems[i].Value
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}
