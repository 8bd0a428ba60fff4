package log_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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

// TestListTopicsOfMissingDirectoryIsNotExistAndCreatesNothing ensures
// ListTopics of a missing directory fails with an error that names the
// directory and matches fs.ErrNotExist, and leaves no directory. (Open of
// one fails before Topics could be called:
// TestOpenOfMissingDirectoryFailsWithErrNoLogAndCreatesNothing.)
func TestListTopicsOfMissingDirectoryIsNotExistAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	_, err := log.ListTopics(dir)
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

// TestReadOnlySegmentsTellTheWritePathFromTheFile ensures a read-only
// partition names its active segment's write path from the file: a ModeFile
// segment ending in a torn frame (bytes past its frames, none of them a
// reserved zero tail) is file, not mmap, and a live ModeMmap segment is mmap
// with a torn frame at the end of its frames too.
func TestReadOnlySegmentsTellTheWritePathFromTheFile(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		if mode == log.ModeFile {
			require.NoError(t, lg.Close())
		}
		// A frame torn after 10 bytes: a 200-byte body announced.
		path := segPath(dir, "events", 0, 0)
		writeAt(t, path, 10*56, []byte{200, 0, 0, 0, 1, 2, 3, 4, 9, 9})

		rp, err := openReadOnlyPartition(t, dir)
		require.NoError(t, err)
		segs, err := rp.Segments()
		require.NoError(t, err)
		require.Len(t, segs, 1)
		assert.EqualValues(t, 10*56, segs[0].Bytes)
		assert.Greater(t, segs[0].FileBytes, segs[0].Bytes)
		want := map[log.Mode]string{log.ModeFile: log.WritePathFile, log.ModeMmap: log.WritePathMmap}[mode]
		assert.Equal(t, want, segs[0].WritePath)
	})
}

// scanAll returns every frame ScanSegment passes for path, with the
// records' bytes copied.
func scanAll(t *testing.T, path string) []log.Frame {
	t.Helper()
	var out []log.Frame
	require.NoError(t, log.ScanSegment(path, func(f log.Frame) bool {
		f.Record.Key = bytes.Clone(f.Record.Key)
		f.Record.Value = bytes.Clone(f.Record.Value)
		out = append(out, f)
		return true
	}))
	return out
}

// TestScanSegmentYieldsEveryOffsetOnceOnCleanSegments ensures ScanSegment
// passes every frame of a clean sealed and a clean active segment (ModeMmap's
// zero tail included) once, in order, intact, at the positions of the
// frames, with their records decoded.
func TestScanSegmentYieldsEveryOffsetOnceOnCleanSegments(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(1024))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 30) // 18 in the first segment, 12 in the active one
		segs, err := p.Segments()
		require.NoError(t, err)
		require.Len(t, segs, 2)

		want := int64(0)
		for _, s := range segs {
			frames := scanAll(t, s.Path)
			starts := frameStarts(t, s.Path)
			require.Len(t, frames, int(s.Records))
			for i, f := range frames {
				require.NoError(t, f.Err)
				assert.True(t, f.CRCOK)
				assert.Equal(t, starts[i], f.Position)
				assert.EqualValues(t, 46, f.Length, "56-byte frames: 8 of header, 46 of body, 2 of padding")
				assert.Equal(t, want, f.Record.Offset)
				assert.Equal(t, val(int(want)), f.Record.Value)
				want++
			}
		}
		assert.EqualValues(t, 30, want)
	})
}

// TestScanSegmentStopsAtFlippedByteWithCRCError ensures a flipped byte in a
// record's value makes ScanSegment pass the frames before it intact, then
// that frame at its position with CRCOK false and a *FrameError naming
// position and offset, and nothing after it.
func TestScanSegmentStopsAtFlippedByteWithCRCError(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		flipByte(t, path, starts[4]+8+40) // inside the value

		frames := scanAll(t, path)
		require.Len(t, frames, 5)
		for i, f := range frames[:4] {
			require.NoError(t, f.Err)
			assert.EqualValues(t, i, f.Record.Offset)
		}
		bad := frames[4]
		assert.Equal(t, starts[4], bad.Position)
		assert.False(t, bad.CRCOK)
		assert.EqualValues(t, 46, bad.Length)
		var fe *log.FrameError
		require.ErrorAs(t, bad.Err, &fe)
		assert.Equal(t, path, fe.Segment)
		assert.Equal(t, starts[4], fe.Position)
		assert.EqualValues(t, 4, fe.Offset)
		assert.False(t, fe.Torn)
		assert.Contains(t, bad.Err.Error(), "crc mismatch")
		assert.EqualValues(t, 4, bad.Record.Offset, "the body still decodes: its claimed offset is shown")
	})
}

// TestScanSegmentSaysWhetherAnIntactFrameLiesBehind ensures the FrameError
// of a bad frame names the first intact frame behind it (IntactAt and
// IntactOffset), and is 0 for a bad last frame; and that a zero length
// prefix with intact frames behind it is passed as a bad frame, while a zero
// tail is the end of the data.
func TestScanSegmentSaysWhetherAnIntactFrameLiesBehind(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		bad := func() *log.FrameError {
			t.Helper()
			frames := scanAll(t, path)
			var fe *log.FrameError
			require.ErrorAs(t, frames[len(frames)-1].Err, &fe)
			return fe
		}

		flipByte(t, path, starts[9]+8+40)
		fe := bad()
		assert.Zero(t, fe.IntactAt, "nothing intact behind the last frame")

		flipByte(t, path, starts[9]+8+40)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0x7f}, starts[4]+3) // a length past the end of the file
		require.NoError(t, err)
		fe = bad()
		assert.True(t, fe.Torn)
		assert.Equal(t, starts[5], fe.IntactAt)
		assert.EqualValues(t, 5, fe.IntactOffset)

		_, err = f.WriteAt(make([]byte, starts[6]-starts[4]), starts[4]) // frames 4 and 5 zeroed
		require.NoError(t, err)
		require.NoError(t, f.Close())
		frames := scanAll(t, path)
		require.Len(t, frames, 5)
		fe = bad()
		assert.Equal(t, starts[4], fe.Position)
		assert.EqualValues(t, 0, frames[4].Length)
		assert.Contains(t, fe.Reason, "zero length prefix")
		assert.Equal(t, starts[6], fe.IntactAt)
		assert.EqualValues(t, 6, fe.IntactOffset)
	})
}

// TestScanSegmentHugeLengthDoesNotAllocateIt ensures a garbage length
// prefix of 0x7FFFFFF0 (2 GiB) is reported as a torn frame at once, in a
// file larger than the 1 MiB read buffer too, without allocating anything
// near its size.
func TestScanSegmentHugeLengthDoesNotAllocateIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
		value   int
	}{{"small file", 10, 10}, {"file past one read buffer", 6, 512 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir, log.WithMode(log.ModeFile))
			p := openPartition(t, lg, "events", 1)
			for range tc.records {
				_, err := p.Append(context.Background(), log.Record{Value: make([]byte, tc.value)})
				require.NoError(t, err)
			}
			require.NoError(t, lg.Close())
			path := segPath(dir, "events", 0, 0)
			starts := frameStarts(t, path)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(binary.LittleEndian.AppendUint32(nil, 0x7FFFFFF0), starts[1])
			require.NoError(t, err)
			require.NoError(t, f.Close())

			var before, after runtime.MemStats
			var frames []log.Frame
			runtime.ReadMemStats(&before)
			require.NoError(t, log.ScanSegment(path, func(f log.Frame) bool {
				frames = append(frames, f)
				return true
			}))
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, allocated, uint64(4<<20), "allocated %d bytes", allocated)

			require.Len(t, frames, 2)
			assert.NoError(t, frames[0].Err)
			bad := frames[1]
			assert.Equal(t, starts[1], bad.Position)
			assert.EqualValues(t, 0x7FFFFFF0, bad.Length)
			assert.False(t, bad.CRCOK)
			assert.ErrorIs(t, bad.Err, io.ErrUnexpectedEOF)
			assert.Contains(t, bad.Err.Error(), "length past end of file")
		})
	}
}

// TestScanSegmentStopsWhenFnReturnsFalse ensures ScanSegment calls fn no
// more once it returned false.
func TestScanSegmentStopsWhenFnReturnsFalse(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 10)
	calls := 0
	require.NoError(t, log.ScanSegment(segPath(dir, "events", 0, 0), func(log.Frame) bool {
		calls++
		return calls < 3
	}))
	assert.Equal(t, 3, calls)
}

// TestScanSegmentOfMissingFileNamesIt ensures a missing segment file is an
// error naming it that matches fs.ErrNotExist.
func TestScanSegmentOfMissingFileNamesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	err := log.ScanSegment(path, func(log.Frame) bool { return true })
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), path)
}

// TestVerifyCleanMultiTopicLogCountsExactly ensures Verify on a clean log of
// two topics (several partitions, rolled segments) finds no problem and no
// torn tail, and counts topics, partitions, segments, records and bytes
// exactly; and that naming a topic verifies only it.
func TestVerifyCleanMultiTopicLogCountsExactly(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(1024))
		a, err := lg.CreateTopic("a", 3)
		require.NoError(t, err)
		segs := 0
		for id := range int32(3) {
			p, err := a.Partition(id)
			require.NoError(t, err)
			appendN(t, p, 0, 40*int(id)) // 0, 40 and 80 records
			s, err := p.Segments()
			require.NoError(t, err)
			segs += len(s)
		}
		b := openPartition(t, lg, "b", 1)
		appendN(t, b, 0, 25)
		s, err := b.Segments()
		require.NoError(t, err)
		segs += len(s)

		rep, err := log.Verify(dir)
		require.NoError(t, err)
		assert.True(t, rep.OK())
		assert.Empty(t, rep.Problems)
		assert.Empty(t, rep.TornTails)
		assert.Equal(t, 2, rep.Topics)
		assert.Equal(t, 4, rep.Partitions)
		assert.Equal(t, segs, rep.Segments)
		assert.EqualValues(t, 145, rep.Records)
		assert.EqualValues(t, 145*56, rep.Bytes)

		rep, err = log.Verify(dir, "b")
		require.NoError(t, err)
		assert.Equal(t, 1, rep.Topics)
		assert.EqualValues(t, 25, rep.Records)
	})
}

// TestVerifyFindsFlippedByteInSealedSegment ensures a flipped byte in a
// sealed segment is one *CorruptError naming topic, partition, segment,
// byte position and offset, and that Verify reads on past it (the records
// behind the damage are counted).
func TestVerifyFindsFlippedByteInSealedSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(1024))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100)
		require.NoError(t, lg.Close())
		first := segments(t, dir, "events", 0)[0]
		starts := frameStarts(t, first)
		flipByte(t, first, starts[3]+8+20)

		rep, err := log.Verify(dir)
		require.NoError(t, err)
		assert.False(t, rep.OK())
		require.Len(t, rep.Problems, 1)
		ce := rep.Problems[0]
		assert.ErrorIs(t, ce, log.ErrCorrupt)
		assert.Equal(t, "events", ce.Topic)
		assert.EqualValues(t, 0, ce.Partition)
		assert.Equal(t, first, ce.Segment)
		assert.Equal(t, starts[3], ce.Position)
		assert.EqualValues(t, 3, ce.Offset)
		assert.Contains(t, ce.Reason, "crc mismatch")
		assert.Empty(t, rep.TornTails)
		assert.EqualValues(t, 99, rep.Records, "every record but the damaged one")
	})
}

// TestVerifyReportsMissingSegmentAsGap ensures a sealed segment removed
// from the middle of a partition is reported at the end of the segment
// before it.
func TestVerifyReportsMissingSegmentAsGap(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithSegmentBytes(1024))
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 100)
	require.NoError(t, lg.Close())
	segs := segments(t, dir, "events", 0)
	require.NoError(t, os.Remove(segs[1]))

	rep, err := log.Verify(dir)
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1)
	assert.Equal(t, segs[0], rep.Problems[0].Segment)
	assert.Equal(t, fileSize(t, segs[0]), rep.Problems[0].Position)
	assert.Contains(t, rep.Problems[0].Reason, "the next segment starts at")
}

// TestVerifyReportsTornTailNotCorruption ensures a damaged last frame of a
// partition's last segment, above the recovery point, is a torn tail (its
// position, offset and size), not a problem, and that Open then cuts
// exactly that.
func TestVerifyReportsTornTailNotCorruption(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		flipByte(t, path, starts[9]+8+40)
		forgetRecoveryPoint(t, dir, "events", 0) // a torn tail is never synced

		rep, err := log.Verify(dir)
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
		require.Len(t, rep.TornTails, 1)
		tt := rep.TornTails[0]
		assert.Equal(t, "events", tt.Topic)
		assert.EqualValues(t, 0, tt.Partition)
		assert.Equal(t, path, tt.Segment)
		assert.Equal(t, starts[9], tt.Position)
		assert.EqualValues(t, 9, tt.Offset)
		assert.EqualValues(t, 56, tt.Bytes)
		assert.Equal(t, "crc mismatch", tt.Reason)
		assert.EqualValues(t, 9, rep.Records)

		_, p = reopen(t, openLog(t, dir, log.WithMode(mode)), log.WithMode(mode))
		assert.EqualValues(t, 9, p.HighWatermark(), "Open cuts what Verify called a torn tail")
		assert.Equal(t, path, p.Recovery().Segment)
	})
}

// TestVerifyDamageWithIntactFramesBehindIsCorruption ensures a damaged
// frame in the middle of a partition's last segment, with intact frames
// behind it, is a problem naming the frame behind, not a torn tail, even
// without a recovery point.
func TestVerifyDamageWithIntactFramesBehindIsCorruption(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		forgetRecoveryPoint(t, dir, "events", 0)
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		flipByte(t, path, starts[5]+8+40)

		rep, err := log.Verify(dir)
		require.NoError(t, err)
		assert.Empty(t, rep.TornTails)
		require.Len(t, rep.Problems, 1)
		assert.Equal(t, starts[5], rep.Problems[0].Position)
		assert.EqualValues(t, 5, rep.Problems[0].Offset)
		assert.Contains(t, rep.Problems[0].Reason, fmt.Sprintf("followed by an intact frame of offset 6 at byte %d", starts[6]))
		assert.EqualValues(t, 9, rep.Records)
	})
}

// TestVerifyReportsCorruptTopicMetadataAsProblem ensures a topic.json that
// does not parse is a problem naming the file, and Verify goes on with the
// other topics.
func TestVerifyReportsCorruptTopicMetadataAsProblem(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	appendN(t, openPartition(t, lg, "good", 1), 0, 3)
	openPartition(t, lg, "bad", 1)
	require.NoError(t, lg.Close())
	meta := filepath.Join(dir, "bad", "topic.json")
	require.NoError(t, os.WriteFile(meta, []byte("{not json"), 0o644))

	rep, err := log.Verify(dir)
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1)
	assert.Equal(t, meta, rep.Problems[0].Segment)
	assert.EqualValues(t, -1, rep.Problems[0].Partition)
	assert.ErrorIs(t, rep.Problems[0], log.ErrCorrupt)
	assert.Equal(t, 1, rep.Topics)
	assert.EqualValues(t, 3, rep.Records)
}

// TestVerifyDamageBelowRecoveryPointIsCorruption ensures a damaged last
// frame that the recovery point says was on disk is a problem, not a torn
// tail.
func TestVerifyDamageBelowRecoveryPointIsCorruption(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithMode(log.ModeFile))
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 10)
	require.NoError(t, lg.Close()) // Close syncs and saves the recovery point
	_, _, rpOffset := recoveryPoint(t, dir, "events", 0)
	require.EqualValues(t, 10, rpOffset)
	path := segPath(dir, "events", 0, 0)
	flipByte(t, path, frameStarts(t, path)[9]+8+40)

	rep, err := log.Verify(dir)
	require.NoError(t, err)
	assert.Empty(t, rep.TornTails)
	require.Len(t, rep.Problems, 1)
	assert.EqualValues(t, 9, rep.Problems[0].Offset)
	assert.Contains(t, rep.Problems[0].Reason, "below the recovery point")
}

// TestVerifyMissingDirectoryOrTopicIsAnErrorAndCreatesNothing ensures a
// missing log directory matches fs.ErrNotExist and a missing topic
// ErrUnknownTopic, each named, and that neither is created.
func TestVerifyMissingDirectoryOrTopicIsAnErrorAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	_, err := log.Verify(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), dir)
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist)

	dir = t.TempDir()
	openPartition(t, openLog(t, dir), "events", 1)
	_, err = log.Verify(dir, "nope")
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	assert.Contains(t, err.Error(), "nope")
	_, err = os.Stat(filepath.Join(dir, "nope"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = log.Verify(dir, "../x")
	assert.ErrorIs(t, err, log.ErrInvalidTopic)
}

// TestVerifyBesideRunningWriter ensures Verify reads a log while another
// *Log holds the topic's writer lock and appends across segment rolls:
// it finds no problem and counts at least the records appended before it
// began.
func TestVerifyBesideRunningWriter(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(4096))
		tp, err := lg.CreateTopic("events", 2)
		require.NoError(t, err)
		require.NoError(t, tp.LockWriter())
		ctx, cancel := context.WithCancel(context.Background())
		var appended atomic.Int64
		done := make(chan error, 1)
		go func() {
			for i := 0; ctx.Err() == nil; i++ {
				if _, _, err := tp.Append(ctx, log.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: val(i)}); err != nil {
					if ctx.Err() != nil && err == ctx.Err() {
						err = nil // the test is over: an append cancelled in flight is not a failure
					}
					done <- err
					return
				}
				appended.Add(1)
			}
			done <- nil
		}()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		require.Eventually(t, func() bool { return appended.Load() > 500 }, 10*time.Second, time.Millisecond)

		for range 5 {
			before := appended.Load()
			rep, err := log.Verify(dir)
			require.NoError(t, err)
			assert.Empty(t, rep.Problems)
			assert.Equal(t, 2, rep.Partitions)
			assert.GreaterOrEqual(t, rep.Records, before)
			assert.Greater(t, rep.Segments, 2, "the writer rolled segments")
			for _, tt := range rep.TornTails {
				t.Logf("torn tail seen beside the writer (an append in flight): %+v", tt)
			}
		}
		_, err = lg.Topic("events")
		require.NoError(t, err)
	})
}
