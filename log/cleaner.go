package log

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The cleaner's passes are described in the package doc, "Compaction".

const (
	cleanedSuffix = ".cleaned"
	// cleanerCheckpointFile holds where the cleaner's last pass of a
	// partition stopped mapping: the start of the dirty section.
	cleanerCheckpointFile = "cleaner-checkpoint"
	// cleanerMapBytes bounds the memory of a pass's key map: about the
	// key's bytes plus 64 per key (a Go map entry of a string and an
	// int64). 64 MiB maps about a million keys of 16 bytes.
	cleanerMapBytes = 64 << 20
	// defaultTombstoneRetention is how long a tombstone outlives the first
	// pass that kept it: Kafka's delete.retention.ms default, 24 hours.
	defaultTombstoneRetention = 24 * time.Hour
)

// DefaultCleanerInterval is how often a writable Log looks for compacted
// topics to clean: 15 seconds, Kafka's log.cleaner.backoff.ms.
const DefaultCleanerInterval = 15 * time.Second

// minCleanableDirtyRatio is the share of a partition's sealed bytes above
// the cleaner checkpoint from which the background cleaner runs a pass:
// Kafka's min.cleanable.dirty.ratio default.
const minCleanableDirtyRatio = 0.5

// WithCleanerInterval sets how often a writable Log runs a cleaner pass
// over the partitions of the compacted topics it writes whose dirty ratio
// (sealed bytes not yet mapped by a pass, over all sealed bytes) is at
// least 0.5, Kafka's min.cleanable.dirty.ratio, in a background goroutine
// that Close stops. The default is DefaultCleanerInterval (15 seconds);
// 0 disables the background cleaner (Topic.Compact still runs a pass on
// demand), and a negative interval fails Open. As in Kafka, a tombstone
// past its retention goes at the next pass over its segment, which the
// background cleaner runs only once new records made the partition dirty.
func WithCleanerInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.cleanerInterval = d })
}

// WithCleanerObserver sets fn to receive the report of every background
// cleaner pass over a topic that rewrote a segment or failed (errors of
// the background cleaner have nowhere else to go). fn runs on the
// cleaner's goroutine, one topic after another, and must not block; it
// must not call Close. By default there is none.
func WithCleanerObserver(fn func(CompactionReport, error)) Option {
	return optionFunc(func(c *config) { c.cleanerObserver = fn })
}

// compactDirty runs a cleaner pass over every compacted topic this
// process writes, on its partitions dirty enough (minCleanableDirtyRatio),
// and hands what each did to the observer.
func (l *Log) compactDirty(now time.Time, stop <-chan struct{}) {
	l.eachWrittenTopic(stop, func(t *Topic) {
		if !t.CleanupPolicy().Compacts() {
			return
		}
		rep, err := t.compact(now, minCleanableDirtyRatio)
		if obs := l.cfg.cleanerObserver; obs != nil && (err != nil || len(rep.Partitions) > 0) {
			obs(rep, err)
		}
	})
}

// PartitionCompaction is what one cleaner pass did to a partition.
type PartitionCompaction struct {
	Partition int32
	// DirtyFrom and CleanedTo are the offsets of the section the pass
	// mapped, [DirtyFrom, CleanedTo): the records whose keys it looked up.
	// CleanedTo is where the next pass starts mapping.
	DirtyFrom, CleanedTo int64
	Segments             int   // segments rewritten
	BytesBefore          int64 // bytes of those segments before the pass
	BytesAfter           int64 // and after
	RecordsRemoved       int64 // records removed, tombstones included
	TombstonesRemoved    int64
}

// CompactionReport is what Topic.Compact did, per partition.
type CompactionReport struct {
	Topic      string
	Partitions []PartitionCompaction
}

// cleanerHook, set only by tests, runs before each file operation of a
// pass with its name ("create", "write", "fsync", "flag", "unmark",
// "rename", "syncdir", "marker", "checkpoint"); a crash test kills the
// process there.
var cleanerHook atomic.Pointer[func(op string)]

func cleanerStep(op string) {
	if h := cleanerHook.Load(); h != nil {
		(*h)(op)
	}
}

// Compact runs one cleaner pass over each partition of a compacted topic
// (see "Compaction" in the package doc) as of now, which decides which
// tombstones are old enough to go. On a topic that is not compacted it
// does nothing. Like every write it first takes the topic's writer lock.
// A partition that fails does not stop the others; the report holds what
// was done and the error joins the failures. Errors: ErrReadOnly,
// ErrLocked, ErrClosed, I/O errors naming the partition and file.
func (t *Topic) Compact(now time.Time) (CompactionReport, error) {
	if err := t.LockWriter(); err != nil {
		return CompactionReport{Topic: t.name}, fmt.Errorf("log: compact topic %s: %w", t.name, err)
	}
	return t.compact(now, 0)
}

// compact runs a pass over each partition whose dirty ratio is at least
// minRatio (0: every partition).
func (t *Topic) compact(now time.Time, minRatio float64) (CompactionReport, error) {
	rep := CompactionReport{Topic: t.name}
	if !t.CleanupPolicy().Compacts() {
		return rep, nil
	}
	var errs []error
	for _, p := range t.partitions {
		pc, err := p.cl.pass(now, t.TombstoneRetention(), minRatio)
		if pc.Segments > 0 || pc.CleanedTo > pc.DirtyFrom {
			rep.Partitions = append(rep.Partitions, pc)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("log: compact topic %s partition %d: %w", t.name, p.id, err))
		}
	}
	return rep, errors.Join(errs...)
}

// sealedSnapshot returns the partition's sealed segments whose sealers
// have finished, each with a reference for the caller to release, and the
// truncation generation, under the partition lock.
func (p *Partition) sealedSnapshot() ([]*segment, uint64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed.Load() {
		return nil, 0, ErrClosed
	}
	var segs []*segment
	for _, s := range p.segs.all()[:p.segs.len()-1] {
		if s.sealing.Load() {
			break
		}
		s.acquire()
		segs = append(segs, s)
	}
	return segs, p.cuts.Load(), nil
}

// cleaner is a partition's side of compaction: its passes (see
// "Compaction" above). It reaches the segment set through cleanerTarget,
// which takes the partition lock around the snapshot and the swap.
type cleaner struct {
	dir      string // the partition folder
	id       int32
	interval int // bytes between index entries of a cleaned segment (WithIndexIntervalBytes)
	// passMu is the partition's retention.mu: one pass, retention check or
	// Truncate at a time.
	passMu       *sync.Mutex
	awaitSealers func() error // the group writer's (roll.go)
	target       cleanerTarget
}

// cleanerTarget is what a pass needs of its partition, each under the
// partition lock.
type cleanerTarget interface {
	// sealedSnapshot returns the sealed segments whose sealers finished,
	// each referenced, and the truncation generation.
	sealedSnapshot() ([]*segment, uint64, error)
	// swapSegment puts a cleaned copy in its segment's place (see
	// Partition.swapSegment) and reports whether it did.
	swapSegment(old, ns *segment, gen uint64, cleaned string) (bool, error)
}

// pass is one cleaner pass over the partition (Topic.Compact), skipped
// when its dirty ratio is below minRatio. It holds passMu, so retention
// deletes nothing and no Truncate cuts meanwhile.
func (c *cleaner) pass(now time.Time, tombstoneRetention time.Duration, minRatio float64) (PartitionCompaction, error) {
	rep := PartitionCompaction{Partition: c.id}
	c.passMu.Lock()
	defer c.passMu.Unlock()
	_ = c.awaitSealers() // a failed sealer failed the partition: its appends report it
	segs, gen, err := c.target.sealedSnapshot()
	if err != nil {
		return rep, err
	}
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()
	if len(segs) == 0 {
		return rep, nil
	}
	dirty, err := loadCleanerCheckpoint(c.dir)
	if err != nil {
		return rep, err
	}
	rep.DirtyFrom = max(dirty, segs[0].base)
	if minRatio > 0 {
		var dirtyBytes, total int64
		for _, s := range segs {
			total += s.size
			if s.next > rep.DirtyFrom {
				dirtyBytes += s.size
			}
		}
		if total == 0 || float64(dirtyBytes) < minRatio*float64(total) {
			rep.CleanedTo = rep.DirtyFrom
			return rep, nil
		}
	}

	// 1. Map the dirty section, whole segments within the budget.
	latest := make(map[string]int64)
	budget := int64(cleanerMapBytes)
	mapped := 0 // segments [0, mapped) are below the end of the mapped section
	dirtyMapped := 0
	rep.CleanedTo = rep.DirtyFrom
	for i, s := range segs {
		if s.next <= rep.DirtyFrom {
			mapped = i + 1
			continue
		}
		if budget <= 0 && dirtyMapped > 0 {
			break
		}
		err := s.eachFrame(func(off int64, frame, body []byte) error {
			if off < rep.DirtyFrom {
				return nil
			}
			if key, _, ok := bodyKey(body); ok {
				if _, seen := latest[string(key)]; !seen {
					budget -= int64(len(key)) + 64
				}
				latest[string(key)] = off
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		mapped, dirtyMapped = i+1, dirtyMapped+1
		rep.CleanedTo = s.next
	}
	// With nothing new since the last pass the map is empty, and a pass
	// only removes tombstones whose retention has passed.

	// 2 and 3. Clean and swap each segment below the end of the section.
	for _, s := range segs[:mapped] {
		removeTombstones := s.tombAt > 0 && now.UnixMilli()-s.tombAt > tombstoneRetention.Milliseconds()
		if len(latest) == 0 && !removeTombstones {
			continue // nothing in it can go
		}
		done, err := c.cleanSegment(s, gen, latest, now, removeTombstones, &rep)
		if err != nil {
			return rep, err
		}
		if !done {
			return rep, nil // a Truncate or a close got in: the next pass starts over
		}
	}

	// 4. The next pass maps from where this one stopped.
	if rep.CleanedTo == dirty {
		return rep, nil // mapped nothing new: the checkpoint stands
	}
	cleanerStep("checkpoint")
	if err := replaceFile(c.dir, cleanerCheckpointFile, encodeCleanerCheckpoint(rep.CleanedTo)); err != nil {
		return rep, fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return rep, nil
}

// cleanSegment rewrites s without the records the pass removes and swaps
// the copy in (steps 2 and 3 of a pass). It reports false when the swap
// did not happen because the partition changed under it (a Truncate, a
// close): the pass stops.
func (c *cleaner) cleanSegment(s *segment, gen uint64, latest map[string]int64, now time.Time, removeTombstones bool, rep *PartitionCompaction) (bool, error) {
	mappedTo := rep.CleanedTo
	var kept []byte
	removed, tombstones, keptTombstones := int64(0), int64(0), int64(0)
	err := s.eachFrame(func(off int64, frame, body []byte) error {
		key, tomb, ok := bodyKey(body)
		switch {
		case !ok:
			// A record without a key (appended before the topic was
			// compacted) has nothing newer to lose to: kept.
		case latest[string(key)] > off:
			removed++
			if tomb {
				tombstones++
			}
			return nil
		case tomb && removeTombstones:
			removed++
			tombstones++
			return nil
		case tomb:
			keptTombstones++
		}
		kept = append(kept, frame...)
		return nil
	})
	if err != nil {
		return false, err
	}
	// The tombstones' clock starts at the first pass that keeps them and
	// is never restarted (the flag carries it across rewrites).
	tombAt := int64(0)
	if keptTombstones > 0 {
		tombAt = cmp.Or(s.tombAt, now.UnixMilli())
	}
	if removed == 0 {
		if tombAt != s.tombAt {
			// Nothing to rewrite, but the clock must start now: the flag
			// alone (it allows gaps the segment does not have).
			cleanerStep("flag")
			if err := writeCompactedFlag(c.dir, s.base, s.next, s.mapped, tombAt); err != nil {
				return false, err
			}
			s.tombAt = tombAt // read by passes only, under passMu
		}
		return true, nil
	}
	cleaned := filepath.Join(c.dir, segmentName(s.base)+cleanedSuffix)
	if err := writeCleaned(cleaned, kept); err != nil {
		return false, err
	}
	cleanerStep("flag")
	if err := writeCompactedFlag(c.dir, s.base, s.next, max(mappedTo, s.mapped), tombAt); err != nil {
		os.Remove(cleaned)
		return false, err
	}
	// The copy, opened and walked before the lock: appends wait for none of it.
	ns, err := openCleaned(c.dir, cleaned, s)
	if err != nil {
		os.Remove(cleaned)
		return false, err
	}
	ns.walkFrames(nil, c.interval, nil)
	if ns.next != s.next {
		ns.close()
		os.Remove(cleaned)
		return false, fmt.Errorf("segment %s: cleaned copy ends at offset %d, want %d", s.path, ns.next, s.next)
	}
	swapped, err := c.target.swapSegment(s, ns, gen, cleaned)
	if !swapped || err != nil {
		ns.close()
		os.Remove(cleaned)
		return false, err
	}
	cleanerStep("syncdir")
	if err := syncDir(c.dir); err != nil {
		return false, err
	}
	cleanerStep("marker")
	writeSealMarker(c.dir, ns)
	rep.Segments++
	rep.BytesBefore += s.size
	rep.BytesAfter += ns.size
	rep.RecordsRemoved += removed
	rep.TombstonesRemoved += tombstones
	return true, nil
}

// swapSegment puts ns, the cleaned copy of old at path cleaned, in old's
// place, under the partition lock: unless a Truncate ran since the pass's
// snapshot (gen) or old left the set, it removes old's seal marker and
// renames the copy over old's file. Holding the lock across the rename
// keeps a Truncate or a close from deleting the file in between.
func (p *Partition) swapSegment(old, ns *segment, gen uint64, cleaned string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || p.cuts.Load() != gen {
		return false, nil
	}
	i := p.segs.find(old.base)
	if i < 0 || i >= p.segs.len()-1 || p.segs.at(i) != old {
		return false, nil
	}
	cleanerStep("unmark")
	if err := removeSealMarker(p.dir, old.base); err != nil {
		return false, err
	}
	cleanerStep("rename")
	if err := os.Rename(cleaned, old.path); err != nil {
		return false, fmt.Errorf("swap cleaned segment: %w", err)
	}
	ns.path = old.path
	p.segs.list[i] = ns
	old.close() // reads in flight finish on the old file
	return true, nil
}

// writeCleaned writes the kept frames to path and forces them to disk.
func writeCleaned(path string, frames []byte) error {
	cleanerStep("create")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create cleaned segment: %w", err)
	}
	cleanerStep("write")
	_, err = f.Write(frames)
	if err == nil {
		cleanerStep("fsync")
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write cleaned segment %s: %w", path, err)
	}
	return nil
}

// openCleaned opens the cleaned copy of s at path as a segment of s's base
// offset, with the compacted flag just written.
func openCleaned(dir, path string, s *segment) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	ns := &segment{base: s.base, path: path, f: f, next: s.base, indexedAt: -1}
	ns.refs.Store(1)
	if err := ns.loadCompacted(dir); err != nil {
		f.Close()
		return nil, err
	}
	return ns, nil
}

// eachFrame calls fn with the offset, the whole frame (header, body and
// zero padding, as written) and the body of every frame of s, a sealed
// segment, in order, through the walk that verifies frames (walkFrames, on
// a copy of s). The slices are reused for the next frame. Frames that no
// longer verify up to s.size are a *CorruptError: the file changed since
// it was walked.
func (s *segment) eachFrame(fn func(off int64, frame, body []byte) error) error {
	w := &segment{base: s.base, path: s.path, f: s.f, next: s.base, indexedAt: -1, gaps: s.gaps, ends: s.ends}
	var (
		frame []byte
		ferr  error
	)
	why, _, err := w.walkFrames(nil, math.MaxInt, func(_ int64, crc uint32, body []byte) bool {
		frame = binary.LittleEndian.AppendUint32(frame[:0], uint32(len(body)))
		frame = binary.LittleEndian.AppendUint32(frame, crc)
		frame = append(frame, body...)
		frame = append(frame, zeroPad[:padded(len(frame))-len(frame)]...)
		ferr = fn(bodyOffset(body), frame, body)
		return ferr == nil && w.size < s.size
	})
	switch {
	case err != nil:
		return err
	case ferr != nil:
		return ferr
	case w.size != s.size || why != stopEOF && why != stopHalted:
		return &CorruptError{Segment: s.path, Position: w.size, Offset: w.next, Reason: "frame changed after it was verified"}
	}
	return nil
}

// zeroPad is the padding a frame ends with (frameAlign).
var zeroPad [frameAlign]byte

// bodyKey returns the key of a verified frame body, whether its value is
// nil (a tombstone), and false for a record without a key.
func bodyKey(body []byte) (key []byte, tombstone, ok bool) {
	kl := int64(int32(binary.LittleEndian.Uint32(body[24:])))
	at := 28 + max(kl, 0)
	vl := int32(binary.LittleEndian.Uint32(body[at:]))
	if kl < 0 {
		return nil, vl < 0, false
	}
	return body[28:at], vl < 0, true
}

func encodeCleanerCheckpoint(off int64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(off))
	return binary.LittleEndian.AppendUint32(b, crcOf(b))
}

// loadCleanerCheckpoint returns where the last pass stopped mapping, 0
// when no pass finished. A checkpoint that does not decode maps from the
// start again: a pass over everything is slower, never wrong.
func loadCleanerCheckpoint(dir string) (int64, error) {
	b, err := readRegularFile(filepath.Join(dir, cleanerCheckpointFile), 12)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	if len(b) != 12 || binary.LittleEndian.Uint32(b[8:]) != crcOf(b[:8]) {
		return 0, nil
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// isCleanerLeftover reports whether name is a cleaned copy a pass left
// behind (a crash before its rename).
func isCleanerLeftover(name string) bool { return strings.HasSuffix(name, cleanedSuffix) }

// CleanerState is where compaction stands on one partition of a compacted
// topic (Topic.CleanerStates), read from its files, so a read-only log (a
// CLI beside the writer) sees the writer's cleaner.
type CleanerState struct {
	Partition int32
	// CleanedTo is the cleaner checkpoint: the offset where the next pass
	// starts mapping keys, 0 before the first pass.
	CleanedTo int64
	// LastPass is when the last pass finished (its checkpoint's
	// modification time); zero before the first.
	LastPass time.Time
	// SealedBytes is the size of the sealed segments, the ones a pass
	// cleans; DirtyBytes of those at or above CleanedTo. A background pass
	// runs from a dirty ratio of 0.5 (DirtyRatio).
	SealedBytes, DirtyBytes int64
	// CompactedSegments counts the segments a pass has rewritten.
	CompactedSegments int
}

// DirtyRatio returns DirtyBytes over SealedBytes, 0 without sealed bytes.
func (s CleanerState) DirtyRatio() float64 {
	if s.SealedBytes == 0 {
		return 0
	}
	return float64(s.DirtyBytes) / float64(s.SealedBytes)
}

// CleanerStates returns the cleaner's state of every partition, in
// partition order. Errors: those of Partition.Segments, and a cleaner
// checkpoint that cannot be read, naming the partition.
func (t *Topic) CleanerStates() ([]CleanerState, error) {
	out := make([]CleanerState, 0, len(t.partitions))
	for _, p := range t.partitions {
		segs, err := p.Segments()
		if err != nil {
			return out, err
		}
		st := CleanerState{Partition: p.id}
		if st.CleanedTo, err = loadCleanerCheckpoint(p.dir); err != nil {
			return out, fmt.Errorf("log: topic %s partition %d: %w", t.name, p.id, err)
		}
		if fi, err := os.Stat(filepath.Join(p.dir, cleanerCheckpointFile)); err == nil {
			st.LastPass = fi.ModTime()
		}
		for _, s := range segs {
			if !s.Sealed {
				continue
			}
			st.SealedBytes += s.Bytes
			if s.NextOffset > st.CleanedTo {
				st.DirtyBytes += s.Bytes
			}
			if s.Compacted {
				st.CompactedSegments++
			}
		}
		out = append(out, st)
	}
	return out, nil
}
