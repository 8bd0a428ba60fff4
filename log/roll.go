package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
)

// A roll seals the active segment and starts the next one. Forcing the
// sealed segment to disk is what made a roll expensive: an msync or
// fdatasync of up to a whole segment (64 MiB by default) under the
// partition's write lock, so every appender waited for it once per segment.
// BenchmarkSegmentAppend (1,024 records per call, no sync) measured the
// appends at 0.38 to 0.65x the bare framing + pwrite loop in ModeFile with
// that sync on the append path, and at 0.95 to 1.1x without it
// (interleaved runs, 2026-12-01).
//
// So the roll does only what the next append needs (release the write path,
// shrink a mapped file to its frames, create the successor) and a sealer
// goroutine does the rest, in order: fdatasync of the sealed segment, fsync
// of the directory (the successor's name), the seal marker. The recovery
// rules hold because nothing claims durability before the sealer is done:
//
//   - The records of a sealed segment count as synced (the recovery point,
//     AckSynced, Sync) only when its sealer has finished, and every sync of
//     the active segment first waits for the sealers of the segments before
//     it (syncActive): a synced record still has every record below it on
//     disk, as before.
//   - A seal marker is written only after its segment's data is on disk, so
//     a marker still always describes bytes on disk.
//   - A process that crashes (kill -9) loses nothing: the page cache holds
//     the sealed segment's bytes. Only a power failure within a sealer's
//     sync (tens to hundreds of milliseconds after a roll) can leave a sealed
//     segment damaged, and only in records no sync had covered (records that
//     AckWritten returned, never an AckSynced one): recovery finds the damage
//     by its CRC and reports it as corruption of that segment, as it does for
//     the active segment's unsynced pages, repairable with WithRepair.

// sealJob is the sealer's work for one roll: seg was sealed, and its
// successor starts at next. Jobs of one partition finish in roll order:
// each waits for prev before it counts its records as synced.
type sealJob struct {
	seg     *segment
	next    int64 // the successor's base offset
	lowered uint64
	prev    *sealJob
	done    chan struct{} // closed when the job has finished; err is set before
	err     error
}

// wait returns once j and every job before it finished, with the first
// error among them.
func (j *sealJob) wait() error {
	<-j.done
	return j.err
}

// rolledLocked is the writer's side of a roll (segmentSet.writeFrames), with
// segMu held (lockSegment) since the roll sealed old: next, its successor,
// becomes the segment syncs use, and a sealer goroutine is started for old
// (see sealJob). Rolls are serialised by the partition lock.
func (w *groupWriter) rolledLocked(old, next *segment) {
	w.seg = next
	old.acquire() // the sealer's reference
	old.sealing.Store(true)
	j := &sealJob{seg: old, next: old.next, lowered: w.rp.lowerings(), done: make(chan struct{})}
	j.prev = w.sealing.Swap(j) // rolls are serialised by the partition lock
	w.sealers.Add(1)
	go w.seal(j)
}

// seal is a roll's sealer (see sealJob): it forces j's segment and the
// directory to disk and writes the segment's seal marker, then, once the
// jobs before it are done, counts the segment's records as synced and
// notes the recovery point. A failed sync fails the partition, as a failed
// sync of the active segment does; a failed marker only costs a walk at
// the next Open.
func (w *groupWriter) seal(j *sealJob) {
	defer w.sealers.Done()
	if h := sealerHook.Load(); h != nil {
		(*h)()
	}
	s := j.seg
	err := s.f.Sync() // data and size: ModeMmap shrank the file at the roll
	if err == nil {
		err = syncDir(w.dir) // the successor's name
	}
	if err != nil {
		err = fmt.Errorf("log: topic %s partition %d: sync %s after roll: %w", w.topic, w.id, s.path, err)
	} else {
		writeSealMarker(w.dir, s)
	}
	s.sealing.Store(false)
	_ = s.release()
	if j.prev != nil {
		if perr := j.prev.wait(); err == nil {
			err = perr
		}
	}
	j.err = err
	close(j.done)

	w.sealing.CompareAndSwap(j, nil)
	w.mu.Lock()
	switch {
	case err != nil:
		w.failLocked(err)
		w.mu.Unlock()
		return
	case w.rp.lowerings() != j.lowered:
		// A Truncate cut the log since the roll: offsets above the cut may
		// be reused, so the roll's point means nothing now.
		w.mu.Unlock()
		return
	}
	at := point{Segment: j.next, Position: 0, Offset: j.next}
	if at.Offset > w.syncedTo {
		w.setSyncedLocked(at)
	}
	w.mu.Unlock()
	w.rp.notePoint(at, j.lowered, false) // a failed save is kept for Close
}

// sealerHook, set only by tests, runs when a sealer starts.
var sealerHook atomic.Pointer[func()]

// awaitSealers waits until the sealers of every roll so far have finished,
// and returns the first error among them. The caller keeps new rolls out
// while it matters: with segMu (syncActive) or the writer role (Truncate).
func (w *groupWriter) awaitSealers() error {
	j := w.sealing.Load() // not under mu: every sync round's leader looks, and appenders contend for mu
	if j == nil {
		return nil
	}
	return j.wait()
}

// removeSealMarker removes the seal marker of the segment of base in the
// partition folder dir, if there is one.
func removeSealMarker(dir string, base int64) error {
	if err := os.Remove(filepath.Join(dir, sealedName(base))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove seal marker: %w", err)
	}
	return nil
}
