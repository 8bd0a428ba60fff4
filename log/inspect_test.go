package log_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestTopicsListsCreatedTopicsSortedAndNothingElse ensures Topics names
// every created topic, sorted, and skips stray files, folders without a
// topic.json and folders whose name is no topic name.
func TestTopicsListsCreatedTopicsSortedAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	for _, name := range []string{"zeta", "alpha", "m.i-d_dle"} {
		_, err := lg.CreateTopic(name, 2)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bad name"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad name", "topic.json"), []byte("{}"), 0o644))

	names, err := lg.Topics()
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "m.i-d_dle", "zeta"}, names)

	ro := openLog(t, dir, log.ReadOnly())
	names, err = ro.Topics()
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "m.i-d_dle", "zeta"}, names, "a read-only log lists the same")
}

// TestTopicsOfMissingDirectoryIsNotExistAndCreatesNothing ensures a log
// opened read-only on a missing directory fails Topics with an error that
// names the directory and matches fs.ErrNotExist, and leaves no directory.
func TestTopicsOfMissingDirectoryIsNotExistAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	lg := openLog(t, dir, log.ReadOnly())
	_, err := lg.Topics()
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), dir)
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing created")
}

// TestSegmentsAreContiguousAndAddUpAcrossRolls ensures Segments, after
// appends that roll several small segments, lists them oldest first with
// contiguous offsets, byte counts that add up to the frames written, sealed
// flags on all but the last, the active segment's write path, and a
// ModeMmap active segment that reserves at least its data on disk; and that
// a read-only log sees the same segments.
func TestSegmentsAreContiguousAndAddUpAcrossRolls(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(1024))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100) // 56-byte frames: 18 to a 1 KiB segment

		segs, err := p.Segments()
		require.NoError(t, err)
		require.Greater(t, len(segs), 3)
		var records, bytes int64
		next := int64(0)
		for i, s := range segs {
			assert.Equal(t, next, s.BaseOffset, "segment %d starts where the previous ends", i)
			assert.Equal(t, s.NextOffset-s.BaseOffset, s.Records)
			assert.Equal(t, segPath(dir, "events", 0, s.BaseOffset), s.Path)
			assert.Equal(t, 56*s.Records, s.Bytes)
			assert.False(t, s.ModTime.IsZero())
			last := i == len(segs)-1
			assert.Equal(t, !last, s.Sealed)
			assert.Equal(t, !last, s.SealMarker)
			if !last {
				assert.Equal(t, log.WritePathSealed, s.WritePath)
				assert.Equal(t, s.Bytes, s.FileBytes, "a sealed segment's file is its frames")
				assert.Equal(t, s.Bytes, fileSize(t, s.Path))
			}
			next = s.NextOffset
			records += s.Records
			bytes += s.Bytes
		}
		assert.EqualValues(t, 100, next)
		assert.EqualValues(t, 100, records)
		assert.EqualValues(t, 100*56, bytes)

		active := segs[len(segs)-1]
		if mode == log.ModeMmap {
			assert.Equal(t, log.WritePathMmap, active.WritePath)
			assert.GreaterOrEqual(t, active.DiskBytes, active.Bytes)
			assert.EqualValues(t, 1024, active.FileBytes, "pre-sized")
		} else {
			assert.Equal(t, log.WritePathFile, active.WritePath)
			assert.Equal(t, active.Bytes, active.FileBytes)
		}

		ro := openLog(t, dir, log.ReadOnly())
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		rp, err := tp.Partition(0)
		require.NoError(t, err)
		roSegs, err := rp.Segments()
		require.NoError(t, err)
		require.Len(t, roSegs, len(segs))
		for i := range segs {
			assert.Equal(t, segs[i].BaseOffset, roSegs[i].BaseOffset)
			assert.Equal(t, segs[i].NextOffset, roSegs[i].NextOffset)
			assert.Equal(t, segs[i].Bytes, roSegs[i].Bytes)
			assert.Equal(t, segs[i].WritePath, roSegs[i].WritePath, "segment %d", i)
		}
	})
}
