package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// recoverTailLocked decides what ends the last segment s of a partition
// opened for writing, where the walk stopped for why (s is nil when the
// partition has no segment). One arm per outcome:
//
//   - the end of the log: a clean end of file, or the zero tail of a
//     reserved segment, with nothing intact behind it, at or above the
//     recovery point. Nothing to do.
//   - a torn tail: a bad frame with nothing intact behind it, at or above
//     the recovery point; the remains of a write that a crash cut short.
//     Reported in r.report; the writer's open then cuts it
//     (cutTailLocked, from Partition.becomeWriterLocked).
//   - corruption: a bad frame or a zero length followed by an intact frame
//     of the expected offset or a later one (records behind the damage
//     would be dropped), or any end below the recovery point (records known
//     to be on disk are gone). A *CorruptError, or with WithRepair, a cut
//     at the damage like a torn tail, reported with the records dropped.
func (r *recovery) recoverTailLocked(s *segment, why stopReason) error {
	rp := *r.rp
	if s == nil {
		if rp.Offset == 0 {
			return nil
		}
		reason := fmt.Sprintf("no segment, but the recovery point says offsets below %d are on disk", rp.Offset)
		return r.tailCorruptLocked(r.segs.path(rp.Segment), 0, 0, reason, rp.Offset)
	}
	var reason string
	var dropped int64
	if why != stopEOF {
		at, off, found, err := s.findFrameAfter(s.size, s.next)
		if err != nil {
			return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
		}
		if found {
			reason = fmt.Sprintf("%s, followed by an intact frame of offset %d at byte %d", why, off, at)
			t := &segment{base: s.base, path: s.path, f: s.f, size: at, next: off, indexedAt: -1, gaps: s.gaps}
			_, r.segs.walkBuf, _ = t.walk(r.segs.walkBuf, 1<<30)
			dropped = t.next - s.next
		}
	}
	if rp.Offset > s.next {
		below := belowRecoveryPoint(rp)
		if reason == "" {
			reason = why.String() + "; " + below
		} else {
			reason += "; and " + below
		}
		dropped = max(dropped, rp.Offset-s.next)
	}
	if reason == "" {
		torn := why.String()
		if why == stopZero {
			// A zero length prefix ends the log only when nothing but
			// zeros follows it (a reserved segment's tail). Non-zero
			// bytes behind it are the body of an append whose length a
			// crash never stored (ModeMmap writes the body first), or
			// damage with nothing intact behind it: a torn tail like any
			// other, cut and reported, never cut silently.
			nonZero, err := zeroStopTorn(s)
			if err != nil {
				return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
			}
			if !nonZero {
				return nil
			}
			torn = stopZero.String() + " followed by non-zero bytes"
		} else if why.intact() {
			return nil
		}
		*r.report = RecoveryReport{Segment: s.path, Reason: torn}
		return nil
	}
	return r.tailCorruptLocked(s.path, s.size, s.next, reason, dropped)
}

// belowRecoveryPoint says that a partition ends below its recovery point
// rp, in the words of every *CorruptError that finds it.
func belowRecoveryPoint(rp point) string {
	return fmt.Sprintf("the log ends below the recovery point (offset %d, segment %d, byte %d), which was on disk",
		rp.Offset, rp.Segment, rp.Position)
}

// tailCorruptLocked fails with a *CorruptError at byte pos (offset off) of
// the last segment, or with WithRepair lowers the recovery point there and
// reports the cut, which the writer's open then makes (cutTailLocked).
func (r *recovery) tailCorruptLocked(path string, pos, off int64, reason string, dropped int64) error {
	if !r.cfg.repair {
		return &CorruptError{Topic: r.topic, Partition: r.id, Segment: path, Position: pos, Offset: off, Reason: reason}
	}
	base := off
	if r.segs.len() > 0 {
		base = r.segs.active().base
	}
	if err := r.repairPointLocked(point{Segment: base, Position: pos, Offset: off}); err != nil {
		return err
	}
	*r.report = RecoveryReport{Segment: path, Reason: reason, DroppedRecords: dropped}
	return nil
}

// zeroStopTorn reports whether the file of s, whose walk stopped at a zero
// length prefix at s.size, holds a non-zero byte past it. Holes are skipped
// unread and the rest is read from its end (lastNonZero), so it costs the
// zeros a ModeMmap writer wrote ahead of its frames, not the reservation.
func zeroStopTorn(s *segment) (bool, error) {
	fi, err := s.f.Stat()
	if err != nil {
		return false, err
	}
	nz, err := lastNonZero(s.f, s.size, fi.Size())
	if err != nil {
		return false, fmt.Errorf("read segment %s past byte %d: %w", s.path, s.size, err)
	}
	return nz > s.size, nil
}

// repairPointLocked lowers the recovery point to end, where a repair cuts,
// before the cut is made: the point must never claim records that are
// gone.
func (r *recovery) repairPointLocked(end point) error {
	if r.rp.Offset <= end.Offset {
		return nil
	}
	if err := saveRecoveryPoint(r.dir, end); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
	}
	*r.rp = end
	return nil
}

// zeroBlock is what findFrameAfter compares blocks of the file with.
var zeroBlock [4096]byte

// findFrameAfter looks in s's file past the bad frame at byte position from
// for a frame that verifies (length, CRC32C, body) and holds offset off or
// a later one, at every 8-byte aligned position to the end of the file.
// Regions the file system reports as holes (SEEK_DATA; a reserved segment's
// unwritten tail) are skipped unread. A cheap look at the body's version
// and offset fields comes before the CRC, so garbage costs one header read
// per position.
func (s *segment) findFrameAfter(from, off int64) (at, found int64, ok bool, err error) {
	fi, err := s.f.Stat()
	if err != nil {
		return 0, 0, false, err
	}
	size := fi.Size()
	// No frame is shorter than minFrame, so no offset after the bad frame
	// can exceed off by more than (size-from)/minFrame.
	const minFrame = frameHeaderBytes + bodyFixedBytes
	maxOff := off + (size-from)/minFrame + 1
	buf := make([]byte, walkBufferBytes)
	var piece []byte // crcAt's buffer for bodies past the chunk, made on first use
	var rec Record
	for q := from + frameAlign; q+minFrame <= size; {
		d, err := unix.Seek(int(s.f.Fd()), q, unix.SEEK_DATA)
		switch {
		case errors.Is(err, unix.ENXIO):
			return 0, 0, false, nil // nothing but a hole from q to the end
		case err == nil && d > q:
			q = (d + frameAlign - 1) &^ (frameAlign - 1)
			continue
		}
		n, err := s.f.ReadAt(buf, q)
		if err != nil && err != io.EOF {
			return 0, 0, false, fmt.Errorf("read segment %s at byte %d: %w", s.path, q, err)
		}
		chunk := buf[:n]
		i := 0
		for ; i+minFrame <= len(chunk); i += frameAlign {
			if i%len(zeroBlock) == 0 && i+len(zeroBlock) <= len(chunk) && bytes.Equal(chunk[i:i+len(zeroBlock)], zeroBlock[:]) {
				// No frame starts in a block of zeros (its length prefix
				// would be zero): a reserved segment's tail is skipped at
				// the speed of a compare, not a header look per position.
				i += len(zeroBlock) - frameAlign
				continue
			}
			bodyLen, crc := frameHeader(chunk[i:])
			body := chunk[i+frameHeaderBytes:]
			if bodyLen < bodyFixedBytes || int64(bodyLen) > size-(q+int64(i))-frameHeaderBytes || body[0] != formatVersion {
				continue
			}
			o := bodyOffset(body)
			if o < off || o > maxOff {
				continue
			}
			if i+frameHeaderBytes+int(bodyLen) <= len(chunk) {
				body = body[:bodyLen]
				if crcOf(body) != crc {
					continue
				}
			} else {
				// The length is untrusted: the body it claims is checked
				// against its CRC32C in pieces before a buffer of its
				// size is made.
				if piece == nil {
					piece = make([]byte, 64<<10)
				}
				at := q + int64(i) + frameHeaderBytes
				if sum, err := s.crcAt(at, int64(bodyLen), piece); err != nil || sum != crc {
					if err != nil {
						return 0, 0, false, err
					}
					continue
				}
				body = make([]byte, bodyLen)
				if _, err := s.f.ReadAt(body, at); err != nil {
					return 0, 0, false, fmt.Errorf("read segment %s at byte %d: %w", s.path, q+int64(i), err)
				}
				if crcOf(body) != crc {
					continue // changed since: not a frame to trust
				}
			}
			if decodeBody(body, &rec) == nil && rec.Offset == o {
				return q + int64(i), o, true, nil
			}
		}
		if n < len(buf) {
			return 0, 0, false, nil // the end of the file
		}
		q += int64(i)
	}
	return 0, 0, false, nil
}
