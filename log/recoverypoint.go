package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// recoveryPointFile is a partition's recovery point: the end of the part
// of the log known to be on stable storage. Every record below it was
// covered by a completed sync (or a roll, which syncs the sealed segment),
// so recovery treats a bad frame below it as corruption, never as a torn
// tail. It is JSON, one line:
//
//	{"version":1,"segment":4096,"position":81920,"offset":5120}
//
// segment is the base offset of the segment holding the position, position
// the byte position in that segment where the synced frames end, offset the
// offset of the first record not known to be synced. A missing file means
// offset 0 (nothing is known to be synced).
const recoveryPointFile = "recovery-point.json"

// recoveryPointMaxBytes bounds what loadRecoveryPoint reads: the largest
// point written is about 120 bytes.
const recoveryPointMaxBytes = 4 << 10

// recoveryPointEvery bounds how often a partition rewrites its recovery
// point after syncs: once a second. Each save costs a temporary file, two
// fsyncs and a rename (about three sync latencies), so saving after every
// sync would triple the cost of AckSynced; at once a second it is nothing
// per append, and the point lags the synced end by at most a second of
// appends (a bad frame in that second, with nothing intact after it, is
// taken for a torn tail). A roll counts as a sync under the same limit;
// Close always saves it.
const recoveryPointEvery = time.Second

// point is a position in a partition: the byte position in a segment and
// the offset of the frame that starts there (or would).
type point struct {
	Segment  int64 `json:"segment"`  // base offset of the segment
	Position int64 `json:"position"` // byte position in that segment
	Offset   int64 `json:"offset"`   // offset of the record at Position
}

type recoveryPointV1 struct {
	Version int `json:"version"`
	point
}

// recoveryPoints is a partition's bookkeeping of its recovery point file.
// Its mu is taken after Partition.mu and after the writer's locks are
// released (notePoint), never the other way round.
type recoveryPoints struct {
	dir     string // the partition folder, where the file is
	mu      sync.Mutex
	loaded  point     // what the file said when the partition was opened
	saved   point     // what the file says now
	want    point     // the newest point known durable; saved lags it
	savedAt time.Time // when saved was written
	err     error     // the first failed save, returned by Close
	// lowered counts lowerPoint calls. A point taken before a Truncate must
	// not be saved after it, so notePoint takes the count read with the
	// point and drops the point when it has moved.
	lowered atomic.Uint64
}

// loadRecoveryPoint reads the recovery point of the partition folder dir.
// A missing file is the zero point. A file that does not parse is
// ErrCorrupt naming it.
func loadRecoveryPoint(dir string) (point, error) {
	path := filepath.Join(dir, recoveryPointFile)
	// The file is one short JSON line: a larger one is read no further
	// than recoveryPointMaxBytes and is corrupt.
	b, err := readRegularFile(path, recoveryPointMaxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return point{}, nil
	}
	if errors.Is(err, errFileTooLarge) {
		return point{}, fmt.Errorf("%w: recovery point file %s does not parse: %w", ErrCorrupt, path, err)
	}
	if err != nil {
		return point{}, fmt.Errorf("log: read recovery point: %w", err)
	}
	var rp recoveryPointV1
	dec := json.NewDecoder(bytes.NewReader(b))
	err = dec.Decode(&rp)
	if err == nil && len(bytes.TrimSpace(b[dec.InputOffset():])) != 0 {
		// The file is one JSON object, as saveRecoveryPoint writes it:
		// anything after it was not written by us.
		err = errors.New("unexpected bytes after the JSON object")
	}
	if err != nil || rp.Version != 1 ||
		rp.Segment < 0 || rp.Position < 0 || rp.Offset < rp.Segment {
		return point{}, fmt.Errorf("%w: recovery point file %s does not parse (%v): %q", ErrCorrupt, path, err, b)
	}
	return rp.point, nil
}

// saveRecoveryPoint replaces the recovery point file of dir with pt: a
// temporary file, fsync, rename over the old one, fsync of the folder, so
// a crash leaves the old point or the new one, never a torn file.
func saveRecoveryPoint(dir string, pt point) error {
	b, _ := json.Marshal(recoveryPointV1{Version: 1, point: pt})
	if err := replaceFile(dir, recoveryPointFile, append(b, '\n')); err != nil {
		return fmt.Errorf("log: save recovery point in %s: %w", dir, err)
	}
	return nil
}

// notePoint records that everything below pt is on stable storage and
// saves it when the last save is recoveryPointEvery old, or at once when
// force is set. A save already running elsewhere makes a non-forced call
// return at once; its point is saved next time. It must be called only
// after the sync that covers pt has completed, with the value of
// rp.lowered read when pt was (under the writer's mutex): a point from
// before a Truncate is dropped.
func (rp *recoveryPoints) notePoint(pt point, lowered uint64, force bool) error {
	if force {
		rp.mu.Lock()
	} else if !rp.mu.TryLock() {
		return nil
	}
	defer rp.mu.Unlock()
	if lowered == rp.lowered.Load() && pt.Offset > rp.want.Offset {
		rp.want = pt
	}
	if rp.want == rp.saved || !force && time.Since(rp.savedAt) < recoveryPointEvery {
		return nil
	}
	err := saveRecoveryPoint(rp.dir, rp.want)
	if err != nil {
		if rp.err == nil {
			rp.err = err
		}
		return err
	}
	rp.saved, rp.savedAt = rp.want, time.Now()
	return nil
}

// lowerPoint makes the recovery point no higher than pt, saving it at once
// when it was: Truncate and repair call it before they cut, so the point
// never claims records that are gone.
func (rp *recoveryPoints) lowerPoint(pt point) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.lowered.Add(1)
	if rp.want.Offset > pt.Offset {
		rp.want = pt
	}
	if rp.saved.Offset <= pt.Offset {
		return nil
	}
	if err := saveRecoveryPoint(rp.dir, pt); err != nil {
		return err
	}
	rp.saved, rp.savedAt = pt, time.Now()
	return nil
}

// begin makes the point read at the open (loaded) the saved and the wanted
// one, for a writer starting at it, and returns it.
func (rp *recoveryPoints) begin() point {
	rp.saved, rp.want = rp.loaded, rp.loaded
	return rp.loaded
}

// lowerings returns how many times lowerPoint was called: a point read
// with one count is dropped by notePoint once the count has moved.
func (rp *recoveryPoints) lowerings() uint64 { return rp.lowered.Load() }

// saveErr returns the first failed save, which Close returns.
func (rp *recoveryPoints) saveErr() error { return rp.err }
