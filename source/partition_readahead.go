package source

import (
	"context"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// A PartitionSource built by [Partition] with [Replay] reads ahead: a
// goroutine of its own reads and decodes the next batches from the log
// (pread, CRC32C check, frame decoding, the elements) while the pipeline
// handles the one Read returned. A pipeline of sequential stages runs on
// the goroutine that calls Read, so without it the reading and the stages
// took turns on one core: with it, BenchmarkThreeFromLog (internal/bench)
// replays 23-25% more records a second on 2 cores (6.6M -> 8.2M records/s,
// ahead of the same pipeline with ReuseBytes, which cannot read ahead). It costs two batches of
// memory more (at most three are alive: the one the pipeline holds, the one
// read ahead, the one being read) and a goroutine while the partition is
// open. It is off for [ReuseBytes] (one buffer, valid until the next Read:
// nothing can be read before that), for [ReadCommitted] (which moves the
// reader's end between batches as commits arrive) and for the partitions
// of a [TopicSource], which reads ahead its own way. A follower does not
// read ahead yet: a batch read ahead would be returned after retention or
// a truncation passed it (as a Kafka consumer's prefetched fetch is), where
// its Read applies the OnOutOfRange policy at once, as the reset tests
// check.

// fetched is a batch read ahead: its elements, the reader's position after
// it, and the error the read ended with (a batch with an error is the
// last its goroutine sends).
type fetched struct {
	elems []stream.Element[log.Record]
	next  int64
	err   error
}

// readAhead is the goroutine reading ahead of Read and what it hands over.
type readAhead struct {
	ch     chan fetched // capacity 1: the batch read ahead
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
	// from is the reader's position after the last batch Read took (where
	// the goroutine started before that): where stopReadAhead puts the
	// reader back, so that a batch read ahead and dropped is read again.
	from int64
	// The goroutine's buffers, used in turn: when it writes buffer k, Read
	// has taken batch k-1 from ch, so the pipeline is done with k-2 (a
	// Source's batch is the pipeline's only until its next Read).
	recs  [3][]log.Record
	elems [3][]stream.Element[log.Record]
}

// readsAhead reports whether Read takes its batches from a goroutine
// reading ahead (see above).
func (s *PartitionSource) readsAhead() bool {
	return s.cfg.replay && s.reuse && !s.cfg.reuseBytes && !s.cfg.readCommitted
}

// fetch returns the next batch from the goroutine reading ahead, starting
// one if none runs (the reader is open): its elements, and the error it
// ended with, when it did. The reader's position after the batch is in
// s.fetchedTo. A done ctx returns ctx.Err() and stops the goroutine, as a
// Read without one leaves nothing waiting: the next Read looks at the
// partition afresh (a follower whose position a truncation passed gets
// ErrOffsetOutOfRange, which a wait for appends would never see).
func (s *PartitionSource) fetch(ctx context.Context) ([]stream.Element[log.Record], error) {
	if s.ahead == nil {
		// Its own context, which keeps ctx's values: Close, Resume and a
		// Read whose ctx ends stop it.
		actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		a := &readAhead{ch: make(chan fetched, 1), cancel: cancel, done: make(chan struct{}), from: s.reader.Position()}
		s.ahead = a
		go s.pump(actx, a, s.reader)
	}
	a := s.ahead
	select {
	case f := <-a.ch:
		a.from = f.next
		if f.err != nil {
			s.stopReadAhead() // it returned after sending its error
		}
		s.fetchedTo = f.next
		return f.elems, f.err
	case <-ctx.Done():
		s.stopReadAhead()
		return nil, ctx.Err()
	}
}

// pump reads batches from r into a's buffers in turn and hands them over
// until a read fails (io.EOF at the end of a replay included) or ctx ends.
// It alone touches r until it returns.
func (s *PartitionSource) pump(ctx context.Context, a *readAhead, r *log.Reader) {
	defer close(a.done)
	for k := 0; ; k = (k + 1) % len(a.recs) {
		recs, err := r.NextInto(ctx, a.recs[k][:0], s.cfg.maxBytes)
		a.recs[k] = recs
		f := fetched{next: r.Position(), err: err}
		if len(recs) > 0 {
			f.elems = s.fill(a.elems[k], recs)
			a.elems[k] = f.elems
		}
		select {
		case a.ch <- f:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// stopReadAhead ends the goroutine reading ahead, if one runs, and waits
// until it has returned, so that the reader is the caller's again, put
// back after the last batch Read took: a batch read ahead and not taken is
// read again.
func (s *PartitionSource) stopReadAhead() {
	a := s.ahead
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	s.ahead = nil
	if s.reader != nil && s.reader.Position() != a.from {
		// A batch was read and dropped. (Only then: SetPosition starts the
		// reader's epoch check over, KIP-320's, from the next record.)
		s.reader.SetPosition(a.from)
	}
}
