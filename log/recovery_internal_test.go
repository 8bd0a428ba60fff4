package log

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recoveryTestDir writes n records to partition 0 of topic "events" through
// a log in a temporary folder, closes it and returns the partition folder.
func recoveryTestDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	lg, err := Open(dir, WithMode(ModeFile))
	require.NoError(t, err)
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for range n {
		_, err := p.Append(context.Background(), Record{Value: []byte("value-0000")})
		require.NoError(t, err)
	}
	require.NoError(t, lg.Close())
	return filepath.Join(dir, "events", "0")
}

// recoveryOver returns a writer's recovery of the partition folder pdir over
// a segment set of its own, with cfg, the loaded point rp and report: no
// Partition.
func recoveryOver(pdir string, cfg *config, rp *point, report *RecoveryReport) *recovery {
	ss := &segmentSet{dir: pdir, topic: "events", mode: cfg.mode, capacity: cfg.segmentBytes}
	return &recovery{segs: ss, cfg: cfg, dir: pdir, topic: "events", writer: true,
		rp: rp, epoch: -1, report: report}
}

// TestRecoveryCutsATornTailAndReportsItWithoutAPartition runs the recovery
// type on its own, over a segment set in a temporary folder: it reports a
// torn tail (a frame header whose length runs past the end of the file, and
// some of its body) in the RecoveryReport it was given, and cutTailLocked
// cuts exactly those bytes from the file, which keeps its records.
func TestRecoveryCutsATornTailAndReportsItWithoutAPartition(t *testing.T) {
	pdir := recoveryTestDir(t, 3)
	path := segmentPath(pdir, 0)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	clean := fi.Size()

	torn := make([]byte, frameHeaderBytes+20)
	binary.LittleEndian.PutUint32(torn, 1000) // a body of 1000 bytes, 20 of them written
	for i := frameHeaderBytes; i < len(torn); i++ {
		torn[i] = 0xa5
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(torn)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	cfg := defaultConfig()
	cfg.mode = ModeFile
	var rp point
	var report RecoveryReport
	r := recoveryOver(pdir, &cfg, &rp, &report)
	defer r.segs.closeAll()
	bases, err := listSegments(pdir)
	require.NoError(t, err)
	require.NoError(t, r.recoverLocked(bases))
	require.Equal(t, 1, r.segs.len())
	assert.Equal(t, int64(3), r.segs.active().next, "the records before the torn tail are kept")
	assert.Equal(t, clean, r.segs.active().size)
	assert.Equal(t, path, report.Segment)
	assert.Equal(t, stopTorn.String(), report.Reason)

	require.NoError(t, r.cutTailLocked())
	assert.Equal(t, int64(len(torn)), report.TruncatedBytes)
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, clean, fi.Size(), "the torn bytes are cut from the file")
}

// TestRecoveryRepairLowersTheLoadedPointItWasGiven: a partition that ends
// below its recovery point is corruption; with WithRepair the recovery
// lowers the point to where the log ends, in the file and in the loaded
// point its caller handed it (the partition's recoveryPoints.loaded, which
// the writer starts from), and reports the records the point claimed.
// Without WithRepair it is a *CorruptError and the point is left as it was.
func TestRecoveryRepairLowersTheLoadedPointItWasGiven(t *testing.T) {
	pdir := recoveryTestDir(t, 3)
	fi, err := os.Stat(segmentPath(pdir, 0))
	require.NoError(t, err)
	above := point{Segment: 0, Position: fi.Size() + 400, Offset: 8}
	require.NoError(t, saveRecoveryPoint(pdir, above))
	bases, err := listSegments(pdir)
	require.NoError(t, err)

	cfg := defaultConfig()
	cfg.mode = ModeFile
	rp, report := above, RecoveryReport{}
	r := recoveryOver(pdir, &cfg, &rp, &report)
	err = r.recoverLocked(bases)
	r.segs.closeAll()
	var ce *CorruptError
	require.True(t, errors.As(err, &ce), "without repair: %v", err)
	assert.Equal(t, above, rp, "no repair, no change to the point")

	cfg.repair = true
	rp, report = above, RecoveryReport{}
	r = recoveryOver(pdir, &cfg, &rp, &report)
	defer r.segs.closeAll()
	require.NoError(t, r.recoverLocked(bases))
	end := point{Segment: 0, Position: fi.Size(), Offset: 3}
	assert.Equal(t, end, rp, "the caller's loaded point is lowered to the end")
	onDisk, err := loadRecoveryPoint(pdir)
	require.NoError(t, err)
	assert.Equal(t, end, onDisk)
	assert.Equal(t, int64(5), report.DroppedRecords)
	assert.Equal(t, segmentPath(pdir, 0), report.Segment)
}
