package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
)

// The local snapshot cache of a KafkaSource's changelogs ([KafkaStateDir]).
//
// # What a file holds
//
// One file per (stage, source topic, source partition), at
// DIR/CHANGELOG/TOPIC-PARTITION.cache (CHANGELOG is the changelog topic,
// so the group and the stage name the folder; every part keeps Kafka's
// topic-name rule, so no path leaves DIR). It holds a snapshot of the
// state (each live key's last value) followed by batches of changes
// appended since, and says which changelog offset it reflects: every
// record of the source topic in the changelog partition below that
// offset is in it. A restore hands its changes on and reads the changelog
// only from that offset to the end, appending what it reads as a batch.
//
// # Format
//
// A file is a sequence of frames, big-endian:
//
//	frame   = bodyLen uint32 | crc32c(body) uint32 | body
//	body    = kind byte | offset int64 | payload
//	header  (kind 1, offset -1, first frame only):
//	          version byte (1) | changelog topic ID [16]byte |
//	          uvarint len | changelog topic | uvarint len | source topic |
//	          partition int32
//	entries (kind 2): (uvarint len(key) | key | uvarint len(value)+1 | value)*
//	          (len(value)+1 = 0: the key is deleted)
//
// An entries frame whose offset is -1 continues in the next frame; one
// whose offset is >= 0 ends a group (the snapshot, or one batch of
// changes) and says the file reflects the changelog below that offset
// once the group is applied. The first group is the snapshot (empty in a
// file a restore created: the whole changelog then follows as its first
// batch); the ones after it are batches appended by restores and by
// SaveChanges, and a compaction (changelogCache.compact) rewrites them
// all as one snapshot.
//
// # Damage
//
// The changelog is the truth; the cache only saves reading it. A reader
// stops at the first frame that is cut short or fails its checksum, and
// keeps the groups complete before it: each group's offset covers all
// groups before it, so any prefix of complete groups is a correct (older)
// snapshot, and the restore reads the changelog from its offset. A file
// with no complete snapshot, another header (another changelog topic, a
// recreated one with a new topic ID, another partition), an unknown
// version, or an offset beyond the changelog's end or below its start is
// ignored as a whole. A compaction's snapshot is written to a temporary
// file, fsynced, renamed over the old one and the folder fsynced; a new
// file and the batches appended are not fsynced (a crash may cut them,
// which the checksums detect, or lose the new file: a smaller cache, never
// a wrong one).

const (
	cacheVersion       = 1
	cacheKindHeader    = 1
	cacheKindEntries   = 2
	cacheFrameOverhead = 4 + 4 + 1 + 8 // bodyLen, crc, kind, offset

	// cacheChunkBytes bounds the payload of one entries frame, so that
	// writing a snapshot or a batch buffers no more than this, and damage
	// costs no more than the frame's group. 1 MiB.
	cacheChunkBytes = 1 << 20

	// cacheCompactSlackBytes is how far the batches appended after a
	// snapshot may outgrow the snapshot before a background compaction
	// rewrites the file as one new snapshot: the file stays below twice
	// the state plus 1 MiB, and each rewrite (whose cost grows with the
	// state) comes after at least as many appended bytes as the state
	// holds, so its cost per changed key stays constant.
	cacheCompactSlackBytes = 1 << 20
)

// errCacheMismatch is why a cache file for another changelog (topic or
// incarnation), source topic or partition is ignored.
var errCacheMismatch = errors.New("source: changelog cache is of another changelog or partition")

// errCacheDamaged is why a cache file that fails its checksums before a
// complete snapshot, or decodes badly, is ignored.
var errCacheDamaged = errors.New("source: changelog cache damaged")

// cacheHeader names what a cache file holds.
type cacheHeader struct {
	topicID   [16]byte // the changelog topic's ID: a recreated topic has another
	changelog string   // the changelog topic
	topic     string   // the source topic
	partition int32    // the source (and changelog) partition
}

// cachePath is the file of hdr's state under dir.
func cachePath(dir string, hdr *cacheHeader) string {
	return filepath.Join(dir, hdr.changelog, hdr.topic+"-"+strconv.Itoa(int(hdr.partition))+".cache")
}

// cacheContents is what readCache found in a file.
type cacheContents struct {
	frames    [][]byte // payloads of the entries frames of the complete groups, in order; alias the file's bytes
	offset    int64    // the changelog offset they reflect
	validLen  int64    // bytes up to the end of the last complete group
	snapBytes int64    // bytes up to the end of the snapshot
	entries   int64    // entries in frames, superseded ones included
}

// each calls fn with every entry of the file, oldest first (value nil for
// a deleted key), and stops at fn's first error, returning it.
func (c *cacheContents) each(fn func(key, value []byte) error) error {
	for _, p := range c.frames {
		if _, err := decodeCacheEntries(p, fn); err != nil {
			return err
		}
	}
	return nil
}

// readCache reads the cache file at path, which must have been written
// for want, up to its byte limit (all of it when limit < 0). It returns an
// error wrapping fs.ErrNotExist when there is no file, errCacheMismatch or
// errCacheDamaged when it is ignored (see the Damage section above), or
// another read error.
func readCache(path string, want *cacheHeader, limit int64) (*cacheContents, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if limit >= 0 && limit < int64(len(data)) {
		data = data[:limit]
	}
	var (
		c       = cacheContents{offset: -1}
		pos     int
		pending int // frames of the group not yet ended, at the end of c.frames
		header  bool
	)
	for {
		body, next, ok := nextCacheFrame(data, pos)
		if !ok {
			break // the end, or a frame cut short or damaged: keep what is complete
		}
		pos = next
		kind, offset, payload := body[0], int64(binary.BigEndian.Uint64(body[1:9])), body[9:]
		if !header {
			if kind != cacheKindHeader {
				return nil, fmt.Errorf("%w: %s: first frame is not a header", errCacheDamaged, path)
			}
			if err := checkCacheHeader(payload, want); err != nil {
				return nil, fmt.Errorf("%w: %s", err, path)
			}
			header = true
			continue
		}
		if kind != cacheKindEntries {
			return nil, fmt.Errorf("%w: %s: frame of kind %d at byte %d", errCacheDamaged, path, kind, pos)
		}
		// The checksum held: an entry that does not decode is a bug, not
		// damage; the file is ignored all the same.
		n, err := decodeCacheEntries(payload, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: frame ending at byte %d: %w", errCacheDamaged, path, pos, err)
		}
		c.frames = append(c.frames, payload)
		c.entries += n
		pending++
		if offset < 0 {
			continue
		}
		pending = 0
		c.offset, c.validLen = offset, int64(pos)
		if c.snapBytes == 0 {
			c.snapBytes = c.validLen
		}
	}
	if c.offset < 0 {
		return nil, fmt.Errorf("%w: %s: no complete snapshot", errCacheDamaged, path)
	}
	c.frames = c.frames[:len(c.frames)-pending]
	return &c, nil
}

// nextCacheFrame returns the body of the frame at data[pos:] and where the
// next frame starts; ok is false at the end of data or at a frame cut
// short or failing its checksum.
func nextCacheFrame(data []byte, pos int) (body []byte, next int, ok bool) {
	if len(data)-pos < 8 {
		return nil, pos, false
	}
	n := int(binary.BigEndian.Uint32(data[pos:]))
	sum := binary.BigEndian.Uint32(data[pos+4:])
	if n < 9 || n > len(data)-pos-8 {
		return nil, pos, false
	}
	body = data[pos+8 : pos+8+n : pos+8+n]
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, pos, false
	}
	return body, pos + 8 + n, true
}

// checkCacheHeader compares a header frame's payload with want.
func checkCacheHeader(p []byte, want *cacheHeader) error {
	if len(p) < 1+16 || p[0] != cacheVersion {
		return fmt.Errorf("%w: unknown version", errCacheMismatch)
	}
	var id [16]byte
	copy(id[:], p[1:17])
	p = p[17:]
	changelog, p, ok1 := cutUvarintBytes(p)
	topic, p, ok2 := cutUvarintBytes(p)
	if !ok1 || !ok2 || len(p) != 4 {
		return fmt.Errorf("%w: bad header", errCacheDamaged)
	}
	partition := int32(binary.BigEndian.Uint32(p))
	switch {
	case string(changelog) != want.changelog || string(topic) != want.topic || partition != want.partition:
		return fmt.Errorf("%w: holds %s/%s/%d", errCacheMismatch, changelog, topic, partition)
	case id != want.topicID:
		return fmt.Errorf("%w: changelog topic ID %x, the topic's is now %x (recreated)", errCacheMismatch, id, want.topicID)
	}
	return nil
}

// cutUvarintBytes splits a uvarint-length-prefixed byte string off p.
func cutUvarintBytes(p []byte) (b, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, p, false
	}
	end := k + int(n)
	return p[k:end:end], p[end:], true
}

// decodeCacheEntries calls fn (when not nil) with every entry of an
// entries payload (value nil for a deleted key) and returns how many
// there were, or fn's first error.
func decodeCacheEntries(p []byte, fn func(key, value []byte) error) (int64, error) {
	var n int64
	for len(p) > 0 {
		key, rest, ok := cutUvarintBytes(p)
		if !ok {
			return n, fmt.Errorf("entry %d: bad key length", n)
		}
		vl, k := binary.Uvarint(rest)
		if k <= 0 || vl > uint64(len(rest)-k)+1 {
			return n, fmt.Errorf("entry %d: bad value length", n)
		}
		rest = rest[k:]
		var value []byte
		if vl > 0 {
			end := int(vl - 1)
			value, rest = rest[:end:end], rest[end:]
		}
		if fn != nil {
			if err := fn(key, value); err != nil {
				return n, err
			}
		}
		p = rest
		n++
	}
	return n, nil
}

// cacheEncoder builds frames in memory.
type cacheEncoder struct {
	buf   []byte // frames done, then the frame being built
	start int    // where the frame being built starts in buf; -1 for none
}

// begin starts a frame of kind.
func (e *cacheEncoder) begin(kind byte) {
	e.start = len(e.buf)
	e.buf = append(e.buf, 0, 0, 0, 0, 0, 0, 0, 0, kind, 0, 0, 0, 0, 0, 0, 0, 0)
}

// payloadLen is the payload bytes of the frame being built.
func (e *cacheEncoder) payloadLen() int { return len(e.buf) - e.start - cacheFrameOverhead }

// end finishes the frame being built with offset.
func (e *cacheEncoder) end(offset int64) {
	binary.BigEndian.PutUint64(e.buf[e.start+9:], uint64(offset))
	body := e.buf[e.start+8:]
	binary.BigEndian.PutUint32(e.buf[e.start:], uint32(len(body)))
	binary.BigEndian.PutUint32(e.buf[e.start+4:], crc32.Checksum(body, castagnoli))
	e.start = -1
}

// header encodes the header frame of hdr.
func (e *cacheEncoder) header(hdr *cacheHeader) {
	e.begin(cacheKindHeader)
	e.buf = append(e.buf, cacheVersion)
	e.buf = append(e.buf, hdr.topicID[:]...)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(hdr.changelog)))
	e.buf = append(e.buf, hdr.changelog...)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(hdr.topic)))
	e.buf = append(e.buf, hdr.topic...)
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(hdr.partition))
	e.end(-1)
}

// entry adds an entry to the entries frame being built, beginning one if
// none is, and ending it (offset -1: the group goes on) once its payload
// reaches cacheChunkBytes.
func (e *cacheEncoder) entry(key, value []byte) {
	if e.start < 0 {
		e.begin(cacheKindEntries)
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(len(key)))
	e.buf = append(e.buf, key...)
	if value == nil {
		e.buf = append(e.buf, 0)
	} else {
		e.buf = binary.AppendUvarint(e.buf, uint64(len(value))+1)
		e.buf = append(e.buf, value...)
	}
	if e.payloadLen() >= cacheChunkBytes {
		e.end(-1)
	}
}

// endGroup ends the group of entries frames with offset (an empty frame
// when the group is empty or its last frame was full).
func (e *cacheEncoder) endGroup(offset int64) {
	if e.start < 0 {
		e.begin(cacheKindEntries)
	}
	e.end(offset)
}

// take returns the frames ended so far and removes them from the encoder,
// leaving the frame being built (whose bytes move to the front).
func (e *cacheEncoder) take() []byte {
	done := len(e.buf)
	if e.start >= 0 {
		done = e.start
	}
	out := append([]byte(nil), e.buf[:done]...)
	n := copy(e.buf, e.buf[done:])
	e.buf = e.buf[:n]
	if e.start >= 0 {
		e.start = 0
	}
	return out
}
