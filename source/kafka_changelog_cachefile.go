package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// errCacheClosed is returned by appendBatch on a cache closed meanwhile.
var errCacheClosed = errors.New("source: changelog cache closed")

// changelogCache is one cache file open for writing (the format is in
// kafka_changelog_cache.go): a restore appends the changelog's tail it
// reads to it, then SaveChanges the batches it saves, until the partition
// leaves this member's assignment, a write fails, or the source closes.
// Once the batches outgrow the snapshot a background compaction rewrites
// the file as one snapshot.
type changelogCache struct {
	hdr   cacheHeader
	path  string
	owner *kafkaPart // the assignment the restore ran for (nil: the source was not in its group)

	// The restore's tail, encoded as it is read; used by one goroutine
	// before the cache is registered for SaveChanges.
	enc  cacheEncoder
	werr error // the first write error of the restore's tail

	mu         sync.Mutex // guards what follows
	f          *os.File   // positioned at the end; nil once closed
	size       int64      // bytes of the file
	snapBytes  int64      // bytes of its header and snapshot
	offset     int64      // the changelog offset the file reflects
	compacting bool       // a compaction runs or is about to
}

// openCacheForRestore opens the cache file at path to append a restore's
// tail to it. With cc (what readCache found there) it cuts what follows
// the last complete group (a batch a crash cut short); without it, it
// creates the file, or empties one that was ignored, with an empty
// snapshot reflecting the changelog below start. Neither is fsynced: a
// file cut short by a crash is a smaller cache, never a wrong one.
func openCacheForRestore(path string, hdr *cacheHeader, cc *cacheContents, start int64) (*changelogCache, error) {
	h := &changelogCache{hdr: *hdr, path: path, enc: cacheEncoder{start: -1}}
	if cc != nil {
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
		h.f, h.size, h.snapBytes, h.offset = f, cc.validLen, cc.snapBytes, cc.offset
		return h, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	e := cacheEncoder{start: -1}
	e.header(hdr)
	e.endGroup(start)
	b := e.take()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	h.f, h.size, h.snapBytes, h.offset = f, int64(len(b)), int64(len(b)), start
	return h, nil
}

// stream adds one change of the restore's tail, writing each frame once it
// is full. A write error is kept for finish.
func (h *changelogCache) stream(key, value []byte) {
	if h.werr != nil {
		return
	}
	h.enc.entry(key, value)
	if h.enc.start < 0 { // a frame ended
		h.writeRestored(h.enc.take())
	}
}

func (h *changelogCache) writeRestored(b []byte) {
	if _, err := h.f.Write(b); err != nil {
		h.werr = fmt.Errorf("source: append to changelog cache %s: %w", h.path, err)
		return
	}
	h.size += int64(len(b))
}

// finish ends the restore's tail as one batch reflecting the changelog
// below end, and reports whether the file now wants a compaction.
func (h *changelogCache) finish(end int64) (compact bool, err error) {
	switch {
	case h.werr != nil:
	case end > h.offset || h.enc.start >= 0:
		h.enc.endGroup(end)
		h.writeRestored(h.enc.take())
	default:
		// Nothing new: the file is up to date as of now, which its
		// modification time must say (cacheOutlivedTombstones).
		now := time.Now()
		if err := os.Chtimes(h.path, now, now); err != nil {
			h.werr = err
		}
	}
	h.enc = cacheEncoder{}
	if h.werr != nil {
		return false, h.werr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.offset = end
	return h.wantsCompactionLocked(), nil
}

// appendBatch appends entries (a nil value deletes its key) as one batch
// reflecting the changelog below end, without fsync, and reports whether
// the file now wants a compaction. After an error the caller must close
// the cache: the file may end in a partial batch, which the next restore
// cuts.
func (h *changelogCache) appendBatch(entries []stateEntry, end int64) (compact bool, err error) {
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
	return h.wantsCompactionLocked(), nil
}

// wantsCompactionLocked reports whether the batches outgrew the snapshot
// by cacheCompactSlackBytes and no compaction runs yet, and if so marks
// one as running.
func (h *changelogCache) wantsCompactionLocked() bool {
	if h.compacting || h.f == nil || h.size-h.snapBytes <= h.snapBytes+cacheCompactSlackBytes {
		return false
	}
	h.compacting = true
	return true
}

// compact rewrites the file as one snapshot of what it holds: it reads the
// file as it is now, keeps each key's last value, writes them to a
// temporary file and fsyncs it; then, holding the cache, copies the
// batches appended meanwhile after it, fsyncs, renames it over the file
// and fsyncs the folder. Saves wait only for that last step. It gives up,
// leaving the file as it was, when ctx ends or the cache is closed.
func (h *changelogCache) compact(ctx context.Context) (err error) {
	defer func() {
		h.mu.Lock()
		h.compacting = false
		h.mu.Unlock()
	}()
	h.mu.Lock()
	upTo, offset, closed := h.size, h.offset, h.f == nil
	h.mu.Unlock()
	if closed {
		return nil
	}
	cc, err := readCache(h.path, &h.hdr, upTo)
	if err != nil {
		return err
	}
	if cc.offset != offset || cc.validLen != upTo {
		return fmt.Errorf("%w: %s reads back at offset %d and byte %d, wrote %d and %d", errCacheDamaged, h.path, cc.offset, cc.validLen, offset, upTo)
	}
	state := newChangelogState(int(cc.entries))
	n := 0
	if err := cc.each(func(key, value []byte) error {
		if n++; n%(1<<16) == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		state.put(key, value)
		return nil
	}); err != nil {
		return err
	}
	f, snap, err := writeCacheSnapshot(ctx, h.path, &h.hdr, state, offset)
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return fail(nil)
	}
	copied := h.size - upTo
	if copied > 0 {
		src, err := os.Open(h.path)
		if err != nil {
			return fail(err)
		}
		_, err = io.Copy(f, io.NewSectionReader(src, upTo, copied))
		_ = src.Close()
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return fail(fmt.Errorf("source: compact changelog cache %s: %w", h.path, err))
		}
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fail(fmt.Errorf("source: compact changelog cache %s: %w", h.path, err))
	}
	_ = h.f.Close()
	h.f, h.snapBytes, h.size = f, snap, snap+copied
	if err := syncDir(filepath.Dir(h.path)); err != nil {
		return fmt.Errorf("source: compact changelog cache %s: %w", h.path, err)
	}
	return nil
}

// writeCacheSnapshot writes state, reflecting the changelog below offset,
// as a new cache file: a temporary file in path's folder, fsynced, which
// the caller renames over path. It returns the file, open and positioned
// at its end, and its size.
func writeCacheSnapshot(ctx context.Context, path string, hdr *cacheHeader, state *changelogState, offset int64) (*os.File, int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, 0, fmt.Errorf("source: write changelog cache %s: %w", path, err)
	}
	fail := func(err error) (*os.File, int64, error) {
		_ = f.Close()
		_ = os.Remove(f.Name())
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
	if err := state.each(func(key, value []byte) error {
		e.entry(key, value)
		if e.start >= 0 { // the frame goes on
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return flush()
	}); err != nil {
		return fail(err)
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
	return f, size, nil
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

// removeCacheTemps removes the temporary files a compaction of path left
// when its process died before the rename.
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
