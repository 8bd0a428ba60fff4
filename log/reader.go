package log

import (
	"context"
	"errors"
	"io"
)

// Reader reads a partition sequentially from a position. A Reader is not
// safe for concurrent use; open one per goroutine.
type Reader struct {
	p      *Partition
	pos    int64
	end    int64 // replay: the high watermark when the replay began; follow: -1, or as SetEnd set it
	follow bool  // waits at the high watermark below end, and returns io.EOF only at end
	epoch  int32 // epoch of the last record returned; -1 before the first
	rb     readBuf
}

// Replay returns a Reader from offset from up to the high watermark as it
// is now; records appended later are not returned and Next returns io.EOF
// at that end. A from above the high watermark makes Next return
// ErrOffsetOutOfRange.
func (p *Partition) Replay(from int64) *Reader {
	return &Reader{p: p, pos: from, end: p.HighWatermark(), epoch: -1}
}

// Follow returns a Reader from offset from that never ends: at the high
// watermark Next waits for new records, woken at once by an append in this
// process, by inotify for one in another (see the package doc, "Readers"),
// and in any case within the poll interval (WithPollInterval, 100 ms by
// default).
func (p *Partition) Follow(from int64) *Reader {
	return &Reader{p: p, pos: from, end: -1, epoch: -1, follow: true}
}

// Position returns the offset of the next record Next will return.
func (r *Reader) Position() int64 { return r.pos }

// Next returns the next batch of records, at most maxBytes of frames after
// the first (maxBytes <= 0 means 1 MiB). A replay returns io.EOF at its end;
// a follow waits. Errors: ctx.Err() when ctx ends while waiting,
// *OffsetOutOfRangeError when the position is no longer stored (retention,
// truncation), I/O and corruption errors naming the segment.
//
// Next is NextInto(ctx, nil, maxBytes): a new []Record per batch. The
// records' bytes stay valid after later calls unless SetReuseBytes(true)
// was called.
func (r *Reader) Next(ctx context.Context, maxBytes int) ([]Record, error) {
	recs, err := r.NextInto(ctx, nil, maxBytes)
	if len(recs) == 0 {
		recs = nil
	}
	return recs, err
}

// NextInto is Next appending the batch to dst: it returns dst extended by
// the batch's records, so the batch is the result from len(dst) on, and a
// caller that passes the previous result re-sliced to zero,
//
//	recs, err = r.NextInto(ctx, recs[:0], 1<<20)
//
// reuses its []Record across calls: once its capacity has grown to a
// batch's record count, a batch costs no allocation for the records
// themselves. dst's elements from len(dst) on are overwritten (every field);
// those below are left alone. With an error (io.EOF included) it returns
// dst, nothing appended (its spare capacity may have been written).
//
// Bytes: by default each batch's Key, Value and header bytes (keys and
// values) alias one buffer allocated for that batch, of the size of its
// frames (not maxBytes: a short batch gets a short buffer), and its headers
// one []Header slice for all its records; they stay valid after later calls,
// so records may be kept, queued or handed to other goroutines. No
// allocation is made per record. With SetReuseBytes(true) they alias the
// Reader's own buffer instead and are valid only until the next call.
func (r *Reader) NextInto(ctx context.Context, dst []Record, maxBytes int) ([]Record, error) {
	n0 := len(dst)
	for {
		if r.end >= 0 && r.pos > r.end {
			// Only a replay asked to start above the high watermark gets here.
			return dst, &OffsetOutOfRangeError{Topic: r.p.topic, Partition: r.p.id, Offset: r.pos,
				StartOffset: r.p.StartOffset(), NextOffset: r.end}
		}
		if r.end >= 0 && r.pos == r.end {
			return dst, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return dst, err
		}
		// The writer may have truncated (or lost in a crash, and reopened)
		// records this reader already returned; their offsets are reused in
		// a later epoch. Step back to where that epoch began, so the new
		// records are read. The epochs come from the last refresh (every
		// Read of a read-only partition refreshes), so a Read that finds the
		// log now ends below the position, after the refresh that saw the
		// new epoch, steps back once more and reads again.
		r.pos = r.p.stepBack(r.pos, r.epoch)
		var rb *readBuf
		if r.rb.reuse {
			rb = &r.rb
		}
		recs, err := r.p.readInto(dst, r.pos, maxBytes, rb)
		if err != nil {
			if back := r.p.stepBack(r.pos, r.epoch); back != r.pos && errors.Is(err, ErrOffsetOutOfRange) {
				r.pos = back
				continue
			}
			return dst, err
		}
		if r.end >= 0 {
			for i := n0; i < len(recs); i++ {
				if recs[i].Offset >= r.end {
					clear(recs[i:])
					recs = recs[:i]
					break
				}
			}
		}
		if len(recs) > n0 {
			last := recs[len(recs)-1]
			r.pos, r.epoch = last.Offset+1, last.Epoch
			return recs, nil
		}
		if r.end >= 0 && !r.follow {
			return dst, io.EOF // truncated below the end the replay started with
		}
		if err := r.p.wait(ctx, r.pos); err != nil {
			return dst, err
		}
	}
}

// Wait blocks until Next has something to return without waiting: a
// record at the position, or the end (io.EOF) of a replay or of a
// follow with an end (SetEnd). It reads nothing. A replay never waits.
// It returns ctx.Err() when ctx ends first, and nil otherwise; any
// failure (a closed partition, a position out of range) is left for Next
// to report. A caller that must reserve memory for a batch before reading
// it (source.TopicSource, which bounds the bytes it reads ahead) waits
// here holding none.
func (r *Reader) Wait(ctx context.Context) error {
	if !r.follow || (r.end >= 0 && r.pos >= r.end) {
		return nil
	}
	if err := r.p.wait(ctx, r.p.stepBack(r.pos, r.epoch)); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// SetReuseBytes chooses where the bytes of the records NextInto and Next
// return live. false, the default, gives every batch a buffer of its own:
// records stay valid for as long as anyone keeps them. true makes the Reader
// read every batch into one buffer of its own, reused by the next call, so a
// batch costs no allocation at all once the buffer and the caller's []Record
// have grown: the records' Key, Value and header values (and the headers
// slices) are then valid only until the next NextInto or Next, which
// overwrites them. Header keys stay valid (they are copied into a buffer of
// the batch).
//
// Reuse is unsafe for a pipeline that keeps records past the next read: an
// asynchronous or parallel stage, a batch or window operator, anything that
// queues records or hands them to another goroutine. Use it only where each
// batch is fully handled, or copied, before the next read.
func (r *Reader) SetReuseBytes(reuse bool) { r.rb.reuse = reuse }

// SetEnd makes Next end at offset end: records at or above it are not
// returned, and once the position reaches end Next returns io.EOF, as a
// replay does at the high watermark it began with; a position above end is
// an *OffsetOutOfRangeError there. Below end a Follow reader still waits
// at the high watermark for new records; a replay stops at the smaller of
// its end and the high watermark. end -1 removes the end (a replay's too):
// Next then waits at the high watermark, as a Follow reader does.
//
// The end is not checked against the partition. source.ReadCommitted sets
// it to the committed end of a topic written exactly once (Kafka's last
// stable offset), and moves it as transactions commit.
func (r *Reader) SetEnd(end int64) { r.end = end }

// SetPosition moves the reader to offset: the next Next reads from there. A
// replay keeps the end it started with. Nothing is checked until Next reads:
// an offset outside the partition's range is an *OffsetOutOfRangeError then.
// The epoch check (KIP-320, see Next) starts over from the next record
// returned: the epoch of the last record returned says nothing about a
// position the caller chose, and stepping back from it again below the log
// start made every Next fail with ErrOffsetOutOfRange
// (TestReaderSetPositionAfterAStepBackBelowTheLogStartReadsFromThere). A
// caller resuming a saved position validates it with ResumeOffset first.
func (r *Reader) SetPosition(offset int64) { r.pos, r.epoch = offset, -1 }
