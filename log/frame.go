package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"unsafe"
)

// Frame layout constants; log/doc.go draws the bytes. Every multi-byte
// integer is little-endian.
const (
	// formatVersion is the first byte of every record body. A body that
	// starts with another value is undecodable like any malformed body, and
	// nothing names the version: recovery stops at it with the reason
	// "undecodable body or unexpected offset", Inspect reports it as
	// "undecodable body", and a read that meets it returns ErrCorrupt.
	formatVersion = 1
	// frameHeaderBytes is the length prefix (4) plus the CRC32C (4).
	frameHeaderBytes = 8
	// frameAlign is the alignment of every frame start. The length prefix is
	// published with one aligned 4-byte atomic store (mmap path), which must
	// never straddle a cache line or page; 8 keeps that true and matches
	// etcd's WAL padding.
	frameAlign = 8
	// bodyFixedBytes is version(1) + attributes(1) + reserved(2) + epoch(4)
	// + offset(8) + timestamp(8) + key length(4) + value length(4) + header
	// count(4).
	bodyFixedBytes = 36
	// minFrameBytes is the smallest frame on disk: header and fixed body
	// fields, padded. A region of n bytes holds at most n/minFrameBytes
	// frames.
	minFrameBytes = (frameHeaderBytes + bodyFixedBytes + frameAlign - 1) &^ (frameAlign - 1)
	// maxFrameBytes bounds a frame so lengths fit the uint32 prefix.
	maxFrameBytes = math.MaxInt32
)

// castagnoli is CRC32C, computed with the SSE4.2/ARMv8 instruction where the
// CPU has one (hash/crc32 picks it), which is why the frame uses it rather
// than IEEE CRC32.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is the internal cause of a frame that does not decode.
var errBadFrame = errors.New("bad frame")

func padded(n int) int { return (n + frameAlign - 1) &^ (frameAlign - 1) }

// bodySize is the body length of r, without frame header or padding.
func bodySize(r *Record) int {
	n := bodyFixedBytes + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// frameSize is the bytes r occupies on disk: header, body and padding.
func frameSize(r *Record) int { return padded(frameHeaderBytes + bodySize(r)) }

// putLenAt writes v's length (-1 as int32 when isNil) and bytes at f[i:],
// which must have room, and returns the index after them.
func putLenAt(f []byte, i int, v []byte, isNil bool) int {
	if isNil {
		binary.LittleEndian.PutUint32(f[i:], math.MaxUint32) // -1 as int32
		return i + 4
	}
	binary.LittleEndian.PutUint32(f[i:], uint32(len(v)))
	return i + 4 + copy(f[i+4:], v)
}

// appendFrame encodes r, which gets offset off in epoch epoch, to the end of
// dst and returns the extended slice. The length prefix is written like every
// other byte; the mmap path republishes it atomically (see segment_mmap.go).
// It grows dst once by the whole frame and fills it by index: appends encode
// every record through here, and field-by-field appends cost about a fifth
// of a 1,024-record append of 64 B records (BenchmarkSegmentAppend, perf).
func appendFrame(dst []byte, r *Record, off int64, epoch int32) []byte {
	body := bodySize(r)
	start := len(dst)
	dst = slices.Grow(dst, padded(frameHeaderBytes+body))
	dst = dst[:start+padded(frameHeaderBytes+body)]
	f := dst[start:]
	le := binary.LittleEndian
	le.PutUint32(f, uint32(body))
	f[8], f[9], f[10], f[11] = formatVersion, 0, 0, 0
	le.PutUint32(f[12:], uint32(epoch))
	le.PutUint64(f[16:], uint64(off))
	le.PutUint64(f[24:], uint64(r.Timestamp))
	i := putLenAt(f, 32, r.Key, r.Key == nil)
	i = putLenAt(f, i, r.Value, r.Value == nil)
	le.PutUint32(f[i:], uint32(len(r.Headers)))
	i += 4
	for _, h := range r.Headers {
		le.PutUint32(f[i:], uint32(len(h.Key)))
		i += 4 + copy(f[i+4:], h.Key)
		i = putLenAt(f, i, h.Value, h.Value == nil)
	}
	clear(f[i:]) // the padding; a reused buffer holds old bytes there
	le.PutUint32(f[4:], crc32.Checksum(f[frameHeaderBytes:i], castagnoli))
	return dst
}

// frameHeader reads the length prefix and CRC at the start of b (which must
// hold frameHeaderBytes).
func frameHeader(b []byte) (bodyLen uint32, crc uint32) {
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
}

// decodeBody parses a body whose CRC has been verified. Key, Value and
// header values alias body; header keys are copied into strings and
// r.Headers is allocated for the record. Recovery and the scan for intact
// frames use it; reads decode a batch at a time with decodeBodyInto.
func decodeBody(body []byte, r *Record) error {
	_, err := decodeBodyInto(body, r, nil, nil)
	return err
}

// decodeBodyInto parses a body whose CRC has been verified into r, whose
// every field it sets but Topic and Partition. Key, Value and header values
// alias body. The record's headers are appended to hdrs, which is returned
// extended, and r.Headers is that appended part (capacity clipped, nil when
// the record has none): a batch carves the headers of all its records from
// one slice. Header keys are strings, made as keys says (see keyStore); a
// nil keys copies each, one allocation per header (decodeBody's callers,
// which keep no batch).
func decodeBodyInto(body []byte, r *Record, hdrs []Header, keys *keyStore) ([]Header, error) {
	if len(body) < bodyFixedBytes || !bodyVersionOK(body) {
		return hdrs, errBadFrame
	}
	r.Epoch = int32(binary.LittleEndian.Uint32(body[4:]))
	r.Offset = bodyOffset(body)
	r.Timestamp = int64(binary.LittleEndian.Uint64(body[16:]))
	rest := body[24:]
	var ok bool
	if r.Key, rest, ok = takeBytes(rest); !ok {
		return hdrs, errBadFrame
	}
	if r.Value, rest, ok = takeBytes(rest); !ok {
		return hdrs, errBadFrame
	}
	if len(rest) < 4 {
		return hdrs, errBadFrame
	}
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n)*8 > uint64(len(rest)) {
		return hdrs, errBadFrame
	}
	r.Headers = nil
	if n == 0 {
		if len(rest) != 0 {
			return hdrs, errBadFrame
		}
		return hdrs, nil
	}
	first := len(hdrs)
	hdrs = slices.Grow(hdrs, int(n))
	for range n {
		if len(rest) < 4 {
			return hdrs[:first], errBadFrame
		}
		kl := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(kl) > uint64(len(rest)) {
			return hdrs[:first], errBadFrame
		}
		var h Header
		h.Key = keys.key(rest[:kl])
		rest = rest[kl:]
		if h.Value, rest, ok = takeBytes(rest); !ok {
			return hdrs[:first], errBadFrame
		}
		hdrs = append(hdrs, h)
	}
	if len(rest) != 0 {
		return hdrs[:first], errBadFrame
	}
	r.Headers = hdrs[first:len(hdrs):len(hdrs)]
	return hdrs, nil
}

// keyStore says where the header keys a read decodes live. Go strings
// must never change, so a key aliases bytes only when nothing writes them
// again.
type keyStore struct {
	// alias makes every key alias the body it was read from: right when the
	// body is a batch's own buffer, written once and never reused.
	alias bool
	// buf, when alias is false, receives a copy of every key, which then
	// aliases it: a batch sizes it once for all its keys. An append past
	// its capacity moves on to a new array and leaves the old one, and the
	// keys in it, untouched.
	buf []byte
}

// key returns b as a string, as ks says; a nil ks copies it.
func (ks *keyStore) key(b []byte) string {
	switch {
	case ks == nil:
		return string(b)
	case len(b) == 0:
		return ""
	case ks.alias:
		return unsafe.String(&b[0], len(b))
	}
	at := len(ks.buf)
	ks.buf = append(ks.buf, b...)
	return unsafe.String(&ks.buf[at], len(b))
}

// bodyHeaders returns the header count of a body and the bytes of its
// header keys, reading only the length fields (bounds-checked, so any body
// is safe to look at); ok is false when the lengths run past the body.
// decodeBodyInto checks the rest. A read counts a batch's headers with it
// before decoding, to allocate their slice once.
func bodyHeaders(body []byte) (n int, keyBytes int, ok bool) {
	end := int64(len(body))
	if end < bodyFixedBytes {
		return 0, 0, false
	}
	kl := int64(int32(binary.LittleEndian.Uint32(body[24:])))
	at := 28 + max(kl, 0)
	if kl < -1 || at+4 > end {
		return 0, 0, false
	}
	vl := int64(int32(binary.LittleEndian.Uint32(body[at:])))
	at += 4 + max(vl, 0)
	if vl < -1 || at+4 > end {
		return 0, 0, false
	}
	c := int64(binary.LittleEndian.Uint32(body[at:]))
	at += 4
	if c == 0 {
		return 0, 0, true
	}
	if c*8 > end-at {
		return 0, 0, false
	}
	for range c {
		if at+4 > end {
			return 0, 0, false
		}
		hk := int64(binary.LittleEndian.Uint32(body[at:]))
		keyBytes += int(min(hk, end))
		at += 4 + hk
		if at+4 > end {
			return 0, 0, false
		}
		hl := int64(int32(binary.LittleEndian.Uint32(body[at:])))
		at += 4 + max(hl, 0)
		if hl < -1 || at > end {
			return 0, 0, false
		}
	}
	return int(c), keyBytes, true
}

// takeBytes reads an int32 length (-1 = nil) and that many bytes.
func takeBytes(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := int32(binary.LittleEndian.Uint32(b))
	b = b[4:]
	switch {
	case n == -1:
		return nil, b, true
	case n < 0 || int(n) > len(b):
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// checkBody reports whether body, whose CRC has been verified, is a record
// body of this format version holding offset off that decodeBody would
// accept. It decodes nothing: recovery calls it once per frame of the log,
// where building a Record measured 25% of the walk at 64 B records
// (BenchmarkRecovery, 2026-11-30). The common record, without headers, is
// checked in straight-line code. It must accept exactly what decodeBody
// accepts.
func checkBody(body []byte, off int64) bool {
	if len(body) < bodyFixedBytes || !bodyVersionOK(body) ||
		bodyOffset(body) != off {
		return false
	}
	// Without headers the body ends with a zero header count right after
	// the value: checking that needs the key length (fixed place) and the
	// value length (after the key) only.
	end := int64(len(body))
	kl := int64(int32(binary.LittleEndian.Uint32(body[24:])))
	if kl < -1 || 36+max(kl, 0) > end {
		return false
	}
	at := 28 + max(kl, 0)
	vl := int64(int32(binary.LittleEndian.Uint32(body[at:])))
	if vl < -1 || at+8+max(vl, 0) > end {
		return false
	}
	at += 4 + max(vl, 0)
	if at+4 == end && binary.LittleEndian.Uint32(body[end-4:]) == 0 {
		return true
	}
	n := int64(binary.LittleEndian.Uint32(body[at:]))
	at += 4
	if n*8 > end-at {
		return false
	}
	for range n {
		if at+4 > end {
			return false
		}
		at += 4 + int64(binary.LittleEndian.Uint32(body[at:]))
		if at+4 > end {
			return false
		}
		hl := int64(int32(binary.LittleEndian.Uint32(body[at:])))
		at += 4 + max(hl, 0)
		if hl < -1 || at > end {
			return false
		}
	}
	return at == end
}

// bodyVersionOK reports whether a body of at least bodyFixedBytes starts
// with this format version and zero attributes and reserved bytes, as
// appendFrame writes it. A body that sets either was not written by this
// version (a later one may give them a meaning, compression for one), so
// it is undecodable rather than read as if they were zero.
func bodyVersionOK(body []byte) bool {
	return binary.LittleEndian.Uint32(body) == formatVersion
}

// bodyOffset returns the offset a body claims (byte 8, see doc.go); the body
// need not be verified, only at least bodyFixedBytes long.
func bodyOffset(body []byte) int64 { return int64(binary.LittleEndian.Uint64(body[8:])) }

// bodyTimestamp returns the timestamp of a verified body (byte 16, see
// doc.go).
func bodyTimestamp(body []byte) int64 { return int64(binary.LittleEndian.Uint64(body[16:])) }
