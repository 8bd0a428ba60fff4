package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fuzzMaxInput caps the bytes a recovery target writes from its input, and
// fuzzMaxReserve the zeros it may add past them (a ModeMmap segment's
// reserved tail, sparse): a damaged length below the file's size ends inside
// it, which is the case where only a CRC tells it from a real frame.
const (
	fuzzMaxInput   = 256 << 10
	fuzzMaxReserve = 4 << 20
)

// fuzzAllocLimit is the most an Open of a fuzzed partition may allocate:
// its input is at most fuzzMaxInput+fuzzMaxReserve bytes, and a walk's
// buffers are 1 MiB each (untrusted_test.go allows 16 MiB for the same).
const fuzzAllocLimit = 16 << 20

// fuzzSegmentBytes is the segment size the recovery targets open with:
// above any file they write, so no roll happens and ModeMmap reserves
// little.
const fuzzSegmentBytes = 8 << 20

// fuzzTopicMeta is a valid topic.json for a one-partition topic "events".
const fuzzTopicMeta = `{"version":1,"name":"events","partitions":1}` + "\n"

// fuzzAllocated returns the bytes fn allocated on the heap (TotalAlloc); a
// fuzz worker runs one input at a time, and go test runs the fuzz targets'
// seeds sequentially.
func fuzzAllocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// fuzzPartitionDir makes a log folder holding topic "events" with one
// partition and returns the log folder and the partition folder.
func fuzzPartitionDir(t *testing.T) (dir, pdir string) {
	dir = t.TempDir()
	pdir = filepath.Join(dir, "events", "0")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events", topicMetaFile), []byte(fuzzTopicMeta), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pdir
}

// intactPrefix walks b as a segment of base offset base, the reference
// model of walk: it returns the byte position and the offset where its
// intact frames end.
func intactPrefix(b []byte, base int64) (end, next int64) {
	next = base
	for {
		if len(b)-int(end) < frameHeaderBytes {
			return end, next
		}
		l, crc := frameHeader(b[end:])
		need := int64(padded(frameHeaderBytes + int(l)))
		if l == 0 || need > int64(len(b))-end {
			return end, next
		}
		body := b[end+frameHeaderBytes : end+frameHeaderBytes+int64(l)]
		if crcOf(body) != crc || !checkBody(body, next) {
			return end, next
		}
		end += need
		next++
	}
}

// verifyRecords checks records read from a segment against its bytes b
// (as they were written, before any cut), from byte position pos: each
// must be the next frame there, its CRC32C must match, and its body must
// decode to the record.
func verifyRecords(t *testing.T, b []byte, pos int64, recs []Record) int64 {
	t.Helper()
	for i := range recs {
		r := &recs[i]
		if int64(len(b))-pos < frameHeaderBytes {
			t.Fatalf("record of offset %d returned past the end of the segment's bytes (%d)", r.Offset, pos)
		}
		l, crc := frameHeader(b[pos:])
		need := int64(padded(frameHeaderBytes + int(l)))
		if need > int64(len(b))-pos {
			t.Fatalf("record of offset %d returned for a frame that runs past the segment (byte %d)", r.Offset, pos)
		}
		body := b[pos+frameHeaderBytes : pos+frameHeaderBytes+int64(l)]
		if crcOf(body) != crc {
			t.Fatalf("record of offset %d returned for a frame whose CRC fails (byte %d)", r.Offset, pos)
		}
		var want Record
		if err := decodeBody(body, &want); err != nil || !sameRecord(&want, &Record{Offset: r.Offset, Epoch: r.Epoch,
			Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}) {
			t.Fatalf("record %+v returned for the frame at byte %d, which decodes to %+v (%v)", *r, pos, want, err)
		}
		pos += need
	}
	return pos
}

// readEverything reads p from its start offset to its next offset.
func readEverything(p *Partition) ([]Record, error) {
	var all []Record
	for off := p.StartOffset(); off < p.HighWatermark(); {
		recs, err := p.Read(off, 64<<10)
		all = append(all, recs...)
		if err != nil {
			return all, err
		}
		if len(recs) == 0 {
			return all, errors.New("a read below the next offset returned nothing")
		}
		off = recs[len(recs)-1].Offset + 1
	}
	return all, nil
}

// FuzzRecoverSegment writes valid frames (0 to 3), then the fuzzed bytes,
// then up to 4 MiB of zeros (sparse: a ModeMmap segment's reserved tail) as
// the only segment of a partition without a recovery point, and opens it
// for writing in ModeFile and ModeMmap. It ensures that Open never panics,
// allocates under 16 MiB whatever the lengths in the file say, and either
// fails with ErrCorrupt or opens exactly the intact frames from the start
// (the reference walk, intactPrefix), reporting a cut when it cut a
// non-zero byte; that every record read back is a frame of the file whose
// CRC32C matches; and that an open that failed with ErrCorrupt succeeds
// WithRepair, with the same records.
func FuzzRecoverSegment(f *testing.F) {
	valid := fuzzFrames(0, 4)
	f.Add(uint8(0), []byte{}, uint32(0))
	f.Add(uint8(0), valid, uint32(0))
	f.Add(uint8(2), valid[:len(valid)-5], uint32(0))  // torn tail
	f.Add(uint8(1), valid[:len(valid)-5], uint32(64)) // torn, zeros behind
	f.Add(uint8(3), fuzzFrames(5, 2), uint32(1<<20))  // offsets jump: intact frames behind a bad one
	f.Add(uint8(3), fuzzFrames(3, 2), uint32(0))      // valid continuation
	f.Add(uint8(2), []byte{1, 2, 3}, uint32(0))
	f.Add(uint8(2), append(make([]byte, 8), fuzzFrames(2, 1)...), uint32(0)) // zero length, intact frame behind
	f.Add(uint8(2), append(make([]byte, 8), 0xff, 1, 2), uint32(100))        // zero length, non-zero bytes behind
	flipped := fuzzFrames(1, 3)
	flipped[20] ^= 1
	f.Add(uint8(1), flipped, uint32(0)) // CRC mismatch, intact frames behind
	for _, n := range fuzzBigLengths {
		for _, behind := range []int{0, 3} {
			b := fuzzFrames(1, 1+behind)
			binary.LittleEndian.PutUint32(b, n)
			f.Add(uint8(1), b, uint32(fuzzMaxReserve))
		}
	}
	f.Fuzz(func(t *testing.T, nvalid uint8, tail []byte, reserve uint32) {
		if len(tail) > fuzzMaxInput {
			return
		}
		b := append(fuzzFrames(0, int(nvalid%4)), tail...)
		size := int64(len(b)) + int64(reserve%(fuzzMaxReserve+1))
		// The file is b and zeros to size: a frame's padding, or all of
		// it, may lie in the zeros.
		file := append(bytes.Clone(b), make([]byte, size-int64(len(b)))...)
		end, next := intactPrefix(file, 0)
		for _, mode := range []Mode{ModeFile, ModeMmap} {
			dir, pdir := fuzzPartitionDir(t)
			path := filepath.Join(pdir, segmentName(0))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			opts := []Option{WithMode(mode), WithSegmentBytes(fuzzSegmentBytes)}
			var lg *Log
			var p *Partition
			var err error
			alloc := fuzzAllocated(func() {
				lg, p, err = fuzzOpen(dir, opts...)
			})
			if alloc > fuzzAllocLimit {
				t.Errorf("%v: Open allocated %d bytes for a segment of %d", mode, alloc, size)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%v: Open failed with %v, not ErrCorrupt", mode, err)
				}
				if lg, p, err = fuzzOpen(dir, append(opts, WithRepair())...); err != nil {
					t.Fatalf("%v: Open WithRepair after %v: %v", mode, ErrCorrupt, err)
				}
			} else if rep := p.Recovery(); len(bytes.TrimRight(file[end:], "\x00")) != 0 && rep.Segment != path {
				t.Errorf("%v: Open cut the non-zero bytes behind byte %d without reporting it (%+v)", mode, end, rep)
			}
			if p.HighWatermark() != next {
				lg.Close()
				t.Fatalf("%v: Open kept offsets [0, %d), the intact frames are [0, %d)", mode, p.HighWatermark(), next)
			}
			recs, rerr := readEverything(p)
			lg.Close()
			if rerr != nil {
				t.Fatalf("%v: read of an opened partition: %v", mode, rerr)
			}
			if int64(len(recs)) != next {
				t.Fatalf("%v: read %d records, want %d", mode, len(recs), next)
			}
			for i := range recs {
				if recs[i].Offset != int64(i) {
					t.Fatalf("%v: record %d has offset %d", mode, i, recs[i].Offset)
				}
			}
			verifyRecords(t, file, 0, recs)
		}
	})
}

// fuzzOpen opens the log in dir and partition 0 of its topic "events" for
// writing; on error the log is closed.
func fuzzOpen(dir string, opts ...Option) (*Log, *Partition, error) {
	lg, err := Open(dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	tp, err := lg.WriteTopic("events")
	if err != nil {
		lg.Close()
		return nil, nil, err
	}
	p, err := tp.Partition(0)
	if err != nil {
		lg.Close()
		return nil, nil, err
	}
	return lg, p, nil
}

// sealedSegmentBytes makes b, fuzzed bytes, a sealed segment whose marker
// Open trusts: padded to 8 bytes, and ending with a frame whose header the
// marker can record (b's own, when stepping its length prefixes from the
// start lands on its end and b can hold a record; otherwise a header of a
// 36-byte body and zeros appended). The segment is never shorter than
// minFrameBytes, so a marker can count at least one record in it. It returns the segment and the last frame's position.
func sealedSegmentBytes(b []byte) ([]byte, int64) {
	b = append(b, make([]byte, padded(len(b))-len(b))...)
	for at := 0; len(b)-at >= frameHeaderBytes; {
		l, _ := frameHeader(b[at:])
		n := padded(frameHeaderBytes + int(l))
		if l == 0 || n > len(b)-at {
			break
		}
		if at+n == len(b) && len(b) >= minFrameBytes {
			return b, int64(at)
		}
		at += n
	}
	last := int64(len(b))
	b = binary.LittleEndian.AppendUint32(b, bodyFixedBytes)
	b = binary.LittleEndian.AppendUint32(b, 0xdeadbeef)
	return append(b, make([]byte, padded(frameHeaderBytes+bodyFixedBytes)-frameHeaderBytes)...), last
}

// FuzzSealedSegmentIndex writes fuzzed bytes as a sealed segment under a
// seal marker Open trusts (its size, last frame header and a record count
// the size allows), followed by a segment of one valid frame at the
// marker's next offset. It ensures that Open succeeds without walking the
// sealed segment, and that the lazy index build on its first read never
// panics: when the bytes are exactly the marker's frames, every record is
// read back and verifies; otherwise reading the partition from its start
// fails with ErrCorrupt before the marker's next offset, and every record
// returned before that verifies.
func FuzzSealedSegmentIndex(f *testing.F) {
	f.Add(fuzzFrames(0, 4), uint32(3))
	f.Add(fuzzFrames(0, 4), uint32(2))
	f.Add(fuzzFrames(0, 40), uint32(39))
	f.Add(fuzzFrames(1, 4), uint32(3))
	b := fuzzFrames(0, 4)
	b[30] ^= 0x10
	f.Add(b, uint32(3))
	f.Add([]byte{}, uint32(0))
	for _, n := range fuzzBigLengths {
		b := fuzzFrames(0, 4)
		binary.LittleEndian.PutUint32(b[56:], n)
		f.Add(b, uint32(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, count uint32) {
		if len(data) > fuzzMaxInput {
			return
		}
		seg, lastPos := sealedSegmentBytes(bytes.Clone(data))
		size := int64(len(seg))
		next := 1 + int64(count)%(size/minFrameBytes)
		dir, pdir := fuzzPartitionDir(t)
		m := sealMarker{base: 0, next: next, size: size, lastPos: lastPos,
			lastHeader: binary.LittleEndian.Uint64(seg[lastPos:])}
		files := map[string][]byte{
			segmentName(0):    seg,
			sealedName(0):     m.encode(),
			segmentName(next): appendFrame(nil, &Record{Value: []byte("after")}, next, 0),
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(pdir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		lg, p, err := fuzzOpen(dir, WithSegmentBytes(fuzzSegmentBytes))
		if err != nil {
			t.Fatalf("Open of a partition whose sealed segment has a matching marker: %v", err)
		}
		defer lg.Close()
		if p.segs.at(0).indexBuilt() {
			t.Fatalf("the marker was not trusted")
		}
		end, intact := intactPrefix(seg, 0)
		consistent := end == size && intact == next
		var recs []Record
		off := int64(0)
		for off < p.HighWatermark() {
			got, err := p.Read(off, 1<<10)
			recs = append(recs, got...)
			if err != nil {
				if consistent || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("read at offset %d (marker consistent with the frames: %v): %v", off, consistent, err)
				}
				break
			}
			if len(got) == 0 {
				t.Fatalf("read at offset %d below the next offset %d returned nothing", off, p.HighWatermark())
			}
			off = got[len(got)-1].Offset + 1
		}
		for i := range recs {
			if recs[i].Offset != int64(i) {
				t.Fatalf("record %d has offset %d", i, recs[i].Offset)
			}
		}
		if consistent {
			if off != next+1 {
				t.Fatalf("read up to offset %d, want %d", off, next+1)
			}
			verifyRecords(t, seg, 0, recs[:next])
			return
		}
		if off > next {
			t.Fatalf("a segment whose frames disagree with its marker (intact to byte %d offset %d, marker byte %d offset %d) read past it",
				end, intact, size, next)
		}
		verifyRecords(t, seg, 0, recs)
	})
}
