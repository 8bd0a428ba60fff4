package source

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// offset is in it. A restore loads it and reads the changelog only from
// that offset to the end.
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
// once the group is applied. The first group is the snapshot; the ones
// after it are batches appended by SaveChanges.
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
// version, or an offset beyond the changelog's end is ignored as a whole.
// Snapshots are written to a temporary file, fsynced, renamed over the
// old one and the folder fsynced; appended batches are not fsynced (a
// crash may cut them, which the checksums detect).

const (
	cacheVersion       = 1
	cacheKindHeader    = 1
	cacheKindEntries   = 2
	cacheFrameOverhead = 4 + 4 + 1 + 8 // bodyLen, crc, kind, offset

	// cacheChunkBytes bounds the payload of one entries frame, so that a
	// bit flipped in a large snapshot is found without buffering more
	// than this to write it. 1 MiB.
	cacheChunkBytes = 1 << 20

	// cacheCompactSlackBytes is how far the batches appended after a
	// snapshot may outgrow the snapshot before SaveChanges rewrites the
	// file as one new snapshot: the file stays below twice the state plus
	// 1 MiB, and each rewrite (whose cost grows with the state) comes
	// after at least as many appended bytes as the state holds, so its
	// cost per changed key stays constant.
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
	state     *changelogState
	offset    int64 // the changelog offset the state reflects
	validLen  int64 // bytes up to the end of the last complete group
	snapBytes int64 // bytes up to the end of the snapshot
	entries   int64 // entries decoded, superseded ones included
}

// readCache reads the cache file at path, which must have been written
// for want. It returns an error wrapping fs.ErrNotExist when there is no
// file, errCacheMismatch or errCacheDamaged when it is ignored (see the
// Damage section above), or another read error.
func readCache(path string, want *cacheHeader) (*cacheContents, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		c       = cacheContents{offset: -1}
		pos     int
		pending [][]byte // payloads of the entries frames of the group not yet ended
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
		pending = append(pending, payload)
		if offset < 0 {
			continue
		}
		if c.state == nil {
			c.state = newChangelogState(len(data) / 40) // about a 16 B key and value with their lengths
		}
		for _, p := range pending {
			n, err := decodeCacheEntries(p, c.state.put)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", errCacheDamaged, path, err)
			}
			c.entries += n
		}
		pending = pending[:0]
		c.offset, c.validLen = offset, int64(pos)
		if c.snapBytes == 0 {
			c.snapBytes = c.validLen
		}
	}
	if c.state == nil {
		return nil, fmt.Errorf("%w: %s: no complete snapshot", errCacheDamaged, path)
	}
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

// decodeCacheEntries calls put with every entry of an entries payload
// (value nil for a deleted key) and returns how many there were.
func decodeCacheEntries(p []byte, put func(key, value []byte)) (int64, error) {
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
		put(key, value)
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

// writeCacheSnapshot writes state, reflecting the changelog below offset,
// as a new cache file at path: to a temporary file in the same folder,
// fsynced, renamed over path, and the folder fsynced. It returns the file,
// open and positioned at its end for the batches SaveChanges appends, and
// its size.
func writeCacheSnapshot(path string, hdr *cacheHeader, state *changelogState, offset int64) (*os.File, int64, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, 0, err
	}
	tmp := f.Name()
	fail := func(err error) (*os.File, int64, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, 0, fmt.Errorf("source: write changelog cache %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 2*cacheChunkBytes)
	var size int64
	e := cacheEncoder{start: -1}
	flush := func() error {
		b := e.take()
		size += int64(len(b))
		_, err := w.Write(b)
		return err
	}
	e.header(hdr)
	var werr error
	if state != nil {
		_ = state.each(func(key, value []byte) error {
			e.entry(key, value)
			if e.start < 0 { // a frame ended
				werr = flush()
			}
			return werr
		})
	}
	if werr != nil {
		return fail(werr)
	}
	e.endGroup(offset)
	if err := flush(); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("source: write changelog cache %s: %w", path, err)
	}
	return f, size, nil
}

// removeCacheTemps removes the temporary files a writeCacheSnapshot of
// path left when its process died before the rename.
func removeCacheTemps(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".tmp-"
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// syncDir fsyncs the folder dir, making the creations, renames and
// removals of entries in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close() // the fsync error is the one to report
		return err
	}
	return d.Close()
}

// errCacheClosed is returned by appendBatch on a cache closed meanwhile.
var errCacheClosed = errors.New("source: changelog cache closed")

// changelogCache is a cache file open for the batches SaveChanges appends,
// from the restore that brought it up to date until the partition leaves
// this member's assignment, a write fails, or the source closes.
type changelogCache struct {
	hdr   cacheHeader
	path  string
	owner *kafkaPart // the assignment the restore ran for (nil: the source was not in its group)

	mu        sync.Mutex // guards what follows
	f         *os.File   // positioned at the end; nil once closed
	size      int64      // bytes of the file
	snapBytes int64      // bytes of its header and snapshot
	offset    int64      // the changelog offset the file reflects
}

// appendCacheTail opens the file of cc at path for appending, cuts what
// follows its last complete group (a batch a crash cut short), and appends
// tail as one batch reflecting the changelog below end.
func appendCacheTail(path string, hdr *cacheHeader, cc *cacheContents, tail []stateEntry, end int64) (*changelogCache, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(cc.validLen); err != nil {
		_ = f.Close()
		return nil, err
	}
	if _, err := f.Seek(cc.validLen, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	h := &changelogCache{hdr: *hdr, path: path, f: f, size: cc.validLen, snapBytes: cc.snapBytes, offset: cc.offset}
	if end > cc.offset || len(tail) > 0 {
		if _, err := h.appendBatch(tail, end); err != nil {
			h.close(false)
			return nil, err
		}
	}
	return h, nil
}

// appendBatch appends entries (a nil value deletes its key) as one batch
// reflecting the changelog below end, without fsync. Once the batches
// outgrow the snapshot by cacheCompactSlackBytes it rewrites the file as
// one snapshot, and reports it in compacted. After an error the caller
// must close the cache: the file may end in a partial batch, which the
// next restore cuts.
func (h *changelogCache) appendBatch(entries []stateEntry, end int64) (compacted bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return false, errCacheClosed
	}
	e := cacheEncoder{start: -1}
	for _, en := range entries {
		e.entry(en.key, en.value)
	}
	e.endGroup(end)
	b := e.take()
	if _, err := h.f.Write(b); err != nil {
		return false, fmt.Errorf("source: append to changelog cache %s: %w", h.path, err)
	}
	h.size += int64(len(b))
	h.offset = end
	if h.size-h.snapBytes <= h.snapBytes+cacheCompactSlackBytes {
		return false, nil
	}
	return true, h.rewriteLocked()
}

// rewriteLocked rewrites the file as one snapshot of what it holds.
func (h *changelogCache) rewriteLocked() error {
	cc, err := readCache(h.path, &h.hdr)
	if err != nil {
		return err
	}
	if cc.offset != h.offset {
		return fmt.Errorf("%w: %s reads back at offset %d, %d written", errCacheDamaged, h.path, cc.offset, h.offset)
	}
	f, size, err := writeCacheSnapshot(h.path, &h.hdr, cc.state, cc.offset)
	if err != nil {
		return err
	}
	_ = h.f.Close()
	h.f, h.size, h.snapBytes = f, size, size
	return nil
}

// close closes the file, fsyncing it first when sync is true.
func (h *changelogCache) close(sync bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return
	}
	if sync {
		_ = h.f.Sync()
	}
	_ = h.f.Close()
	h.f = nil
}
