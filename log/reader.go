package log

import (
	"context"
	"errors"
	"io"
)

// Reader reads a partition sequentially from a position. A Reader is not
// safe for concurrent use; open one per goroutine.
type Reader struct {
	p     *Partition
	pos   int64
	end   int64 // replay: the high watermark when the replay began; follow: -1
	epoch int32 // epoch of the last record returned; -1 before the first
}

// Replay returns a Reader from offset from up to the high watermark as it
// is now; records appended later are not returned and Next returns io.EOF
// at that end. A from above the high watermark makes Next return
// ErrOffsetOutOfRange.
func (p *Partition) Replay(from int64) *Reader {
	return &Reader{p: p, pos: from, end: p.NextOffset(), epoch: -1}
}

// Follow returns a Reader from offset from that never ends: at the high
// watermark Next waits for new records, woken at once by an append in this
// process, by inotify for one in another (see the package doc, "Readers"),
// and in any case within the poll interval (WithPollInterval, 100 ms by
// default).
func (p *Partition) Follow(from int64) *Reader {
	return &Reader{p: p, pos: from, end: -1, epoch: -1}
}

// Position returns the offset of the next record Next will return.
func (r *Reader) Position() int64 { return r.pos }

// Next returns the next batch of records, at most maxBytes of frames after
// the first (maxBytes <= 0 means 1 MiB). A replay returns io.EOF at its end;
// a follow waits. Errors: ctx.Err() when ctx ends while waiting,
// *OffsetOutOfRangeError when the position is no longer stored (retention,
// truncation), I/O and corruption errors naming the segment.
func (r *Reader) Next(ctx context.Context, maxBytes int) ([]Record, error) {
	for {
		if r.end >= 0 && r.pos > r.end {
			// Only a replay asked to start above the high watermark gets here.
			return nil, &OffsetOutOfRangeError{Topic: r.p.topic, Partition: r.p.id, Offset: r.pos,
				StartOffset: r.p.StartOffset(), NextOffset: r.end}
		}
		if r.end >= 0 && r.pos == r.end {
			return nil, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The writer may have truncated (or lost in a crash, and reopened)
		// records this reader already returned; their offsets are reused in
		// a later epoch. Step back to where that epoch began, so the new
		// records are read. The epochs come from the last refresh (every
		// Read of a read-only partition refreshes), so a Read that finds the
		// log now ends below the position, after the refresh that saw the
		// new epoch, steps back once more and reads again.
		r.pos = r.p.stepBack(r.pos, r.epoch)
		recs, err := r.p.Read(r.pos, maxBytes)
		if err != nil {
			if back := r.p.stepBack(r.pos, r.epoch); back != r.pos && errors.Is(err, ErrOffsetOutOfRange) {
				r.pos = back
				continue
			}
			return nil, err
		}
		if r.end >= 0 {
			for i, rec := range recs {
				if rec.Offset >= r.end {
					recs = recs[:i]
					break
				}
			}
		}
		if len(recs) > 0 {
			last := recs[len(recs)-1]
			r.pos, r.epoch = last.Offset+1, last.Epoch
			return recs, nil
		}
		if r.end >= 0 {
			return nil, io.EOF // truncated below the end the replay started with
		}
		if err := r.p.wait(ctx, r.pos); err != nil {
			return nil, err
		}
	}
}

// SetPosition moves the reader to offset: the next Next reads from there. A
// replay keeps the end it started with. Nothing is checked until Next reads:
// an offset outside the partition's range is an *OffsetOutOfRangeError then.
func (r *Reader) SetPosition(offset int64) { r.pos = offset }
