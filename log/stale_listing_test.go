package log_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// missOnce returns a listSegments hook that drops the second segment from
// the first listing with at least three, as a directory read that a
// writer's roll ran into can (it saw a later segment and missed this one),
// and counts the listings it spoiled.
func missOnce(spoiled *atomic.Int32) func([]int64) []int64 {
	return func(bases []int64) []int64 {
		if len(bases) < 3 || !spoiled.CompareAndSwap(0, 1) {
			return bases
		}
		return append(append([]int64(nil), bases[:1]...), bases[2:]...)
	}
}

// TestAReadOnlyOpenListsAgainWhenItsListingMissedASegment ensures a
// read-only open whose listing missed a segment that exists lists again and
// serves every record, and Verify reports no gap: a new user's trial saw
// 10 of 60 `strom verify` runs beside a writer rolling 256 KiB segments
// report "segment ends at offset N but the next segment starts at M" for a
// segment that was there.
func TestAReadOnlyOpenListsAgainWhenItsListingMissedASegment(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			lg, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(4<<10))
			require.NoError(t, err)
			appendN(t, openPartition(t, lg, "events", 1), 0, 600)
			require.NoError(t, lg.Close())
			segs, err := filepath.Glob(filepath.Join(dir, "events", "0", "*.log"))
			require.NoError(t, err)
			require.Greater(t, len(segs), 4, "the records span several segments")

			var spoiled atomic.Int32
			restore := log.SetListSegments(missOnce(&spoiled))
			ro, err := log.Open(dir, log.ReadOnly())
			require.NoError(t, err)
			defer ro.Close()
			tp, err := ro.Topic("events")
			require.NoError(t, err, "a missed segment is not corruption")
			p, err := tp.Partition(0)
			require.NoError(t, err)
			restore()
			require.EqualValues(t, 1, spoiled.Load(), "the listing was spoiled")
			recs := readAll(t, p)
			require.Len(t, recs, 600)
			for i, r := range recs {
				require.Equal(t, string(val(i)), string(r.Value), "offset %d", i)
			}

			spoiled.Store(0)
			restore = log.SetListSegments(missOnce(&spoiled))
			rep, err := log.Verify(dir)
			restore()
			require.NoError(t, err)
			require.EqualValues(t, 1, spoiled.Load())
			assert.True(t, rep.OK(), "problems: %v", rep.Problems)
			assert.EqualValues(t, 600, rep.Records)
		})
	}
}

// TestAReadOnlyOpenStillReportsAGapThatIsThere ensures the second look
// does not hide real damage: with a middle segment deleted, a read-only
// open and Verify both report the gap as corruption.
func TestAReadOnlyOpenStillReportsAGapThatIsThere(t *testing.T) {
	dir := t.TempDir()
	lg, err := log.Open(dir, log.WithSegmentBytes(4<<10))
	require.NoError(t, err)
	appendN(t, openPartition(t, lg, "events", 1), 0, 600)
	require.NoError(t, lg.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "events", "0", "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 4)
	require.NoError(t, os.Remove(segs[1])) // Glob sorts: the second segment

	ro, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Topic("events")
	require.ErrorIs(t, err, log.ErrCorrupt)
	assert.Contains(t, err.Error(), "but the next segment starts at")

	rep, err := log.Verify(dir)
	require.NoError(t, err)
	require.False(t, rep.OK())
	assert.Contains(t, rep.Problems[0].Reason, "but the next segment starts at")
}
