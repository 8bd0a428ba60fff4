package log_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// frameStarts returns the byte position of every frame in a segment file,
// walking the length prefixes (the layout of log/doc.go).
func frameStarts(t testing.TB, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []int64
	for pos := 0; pos+8 <= len(b); {
		n := binary.LittleEndian.Uint32(b[pos:])
		if n == 0 {
			break
		}
		out = append(out, int64(pos))
		pos += (8 + int(n) + 7) &^ 7
	}
	return out
}

// reopen closes lg and opens the same directory again with opts.
func reopen(t *testing.T, lg *log.Log, opts ...log.Option) (*log.Log, *log.Partition) {
	t.Helper()
	require.NoError(t, lg.Close())
	lg2 := openLog(t, lg.Dir(), opts...)
	tp, err := lg2.WriteTopic("events")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return lg2, p
}

// TestReopenRestoresNextOffsetAndIndex ensures a clean reopen serves the
// first, a middle and the last offset, nothing past the end, and appends
// continue the log.
func TestReopenRestoresNextOffsetAndIndex(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithIndexIntervalBytes(256))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 500)
		lg, p = reopen(t, lg, log.WithMode(mode), log.WithIndexIntervalBytes(256))
		require.EqualValues(t, 500, p.HighWatermark())
		for _, off := range []int64{0, 250, 499} {
			recs, err := p.Read(off, 1)
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			assert.Equal(t, off, recs[0].Offset)
			assert.Equal(t, val(int(off)), recs[0].Value)
			assert.Equal(t, "events", recs[0].Topic)
		}
		recs, err := p.Read(500, 1)
		require.NoError(t, err)
		assert.Empty(t, recs, "the offset past the end is absent")
		_, err = p.Read(501, 1)
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange)

		appendN(t, p, 500, 10)
		_, p = reopen(t, lg, log.WithMode(mode))
		all := readAll(t, p)
		require.Len(t, all, 510)
		for i, r := range all {
			require.EqualValues(t, i, r.Offset)
			require.Equal(t, val(i), r.Value)
		}
	})
}

// TestRecoverLengthPastEndDropsOnlyThatRecord ensures a ModeFile segment
// whose last length prefix claims 9999 bytes past the end of the file loses
// that record only, and the next append reuses its offset.
func TestRecoverLengthPastEndDropsOnlyThatRecord(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithMode(log.ModeFile))
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 10)
	require.NoError(t, lg.Close())

	path := segPath(dir, "events", 0, 0)
	starts := frameStarts(t, path)
	require.Len(t, starts, 10)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(binary.LittleEndian.AppendUint32(nil, 9999), starts[9])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	forgetRecoveryPoint(t, dir, "events", 0) // a torn tail is never synced

	lg, p = reopen(t, lg, log.WithMode(log.ModeFile))
	require.EqualValues(t, 9, p.HighWatermark())
	assert.Equal(t, "length past end of file", p.Recovery().Reason)
	assert.Equal(t, starts[9], fileSize(t, path), "the torn frame is cut from the file")
	off, err := p.Append(context.Background(), log.Record{Value: []byte("again")})
	require.NoError(t, err)
	assert.EqualValues(t, 9, off)
	_, p = reopen(t, lg, log.WithMode(log.ModeFile))
	all := readAll(t, p)
	require.Len(t, all, 10)
	assert.Equal(t, []byte("again"), all[9].Value)
}

// TestRecoverBodyWithoutLengthIsNotARecord ensures that in a pre-sized
// ModeMmap segment a body stored without its length prefix (a crash between
// the copy and the publishing store) is past the end of the log.
func TestRecoverBodyWithoutLengthIsNotARecord(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithMode(log.ModeMmap))
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 6)
	require.NoError(t, lg.Close())

	path := segPath(dir, "events", 0, 0)
	starts := frameStarts(t, path)
	require.Len(t, starts, 6)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	frame := append([]byte(nil), b[starts[5]:]...)[:starts[5]-starts[4]] // a frame's worth of bytes
	copy(frame, b[starts[4]:starts[5]])
	binary.LittleEndian.PutUint32(frame, 0) // the body and CRC, no length
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	end := starts[5] + (starts[5] - starts[4])
	_, err = f.WriteAt(frame, end)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, p = reopen(t, lg, log.WithMode(log.ModeMmap))
	require.EqualValues(t, 6, p.HighWatermark())
	off, err := p.Append(context.Background(), log.Record{Value: []byte("seventh")})
	require.NoError(t, err)
	require.EqualValues(t, 6, off)
	recs, err := p.Read(6, 1)
	require.NoError(t, err)
	assert.Equal(t, []byte("seventh"), recs[0].Value)
}

// TestRecoverFlippedByteInLastRecordDropsOnlyIt ensures a CRC mismatch in
// the last frame of the active segment is a torn tail: that record goes,
// the others stay.
func TestRecoverFlippedByteInLastRecordDropsOnlyIt(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 20)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		flipByte(t, path, starts[19]+8+20)       // inside the body
		forgetRecoveryPoint(t, dir, "events", 0) // a torn tail is never synced
		_, p = reopen(t, lg, log.WithMode(mode))
		assert.EqualValues(t, 19, p.HighWatermark())
		assert.Equal(t, "crc mismatch", p.Recovery().Reason)
		assert.Len(t, readAll(t, p), 19)
	})
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, pos)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
}

// TestReopenRestoresAllSegmentsInOrder ensures a partition of several
// segments reopens with every one of them, contiguous, and the next append
// goes to the last.
func TestReopenRestoresAllSegmentsInOrder(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100)
		segs := segments(t, dir, "events", 0)
		require.Greater(t, len(segs), 3)
		lg, p = reopen(t, lg, opts...)
		require.EqualValues(t, 100, p.HighWatermark())
		all := readAll(t, p)
		require.Len(t, all, 100)
		for i, r := range all {
			require.EqualValues(t, i, r.Offset)
		}
		appendN(t, p, 100, 1)
		after := segments(t, dir, "events", 0)
		last := after[len(after)-1]
		recs, err := p.Read(100, 1)
		require.NoError(t, err)
		require.Equal(t, val(100), recs[0].Value)
		if len(after) == len(segs) {
			assert.Equal(t, segs[len(segs)-1], last, "the append went to the last segment")
		}
		_, p = reopen(t, lg, opts...)
		assert.EqualValues(t, 101, p.HighWatermark())
	})
}

// TestTruncateDropsAboveAndReusesOffset ensures truncating to an offset
// removes every record at and above it, across segments, and the next
// append reuses the offset, also after a reopen.
func TestTruncateDropsAboveAndReusesOffset(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100)
		require.NoError(t, p.Truncate(37))
		require.EqualValues(t, 37, p.HighWatermark())
		_, err := p.Read(38, 1)
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
		off, err := p.Append(context.Background(), log.Record{Value: []byte("new-37")})
		require.NoError(t, err)
		require.EqualValues(t, 37, off)
		_, p = reopen(t, lg, opts...)
		all := readAll(t, p)
		require.Len(t, all, 38)
		assert.Equal(t, []byte("new-37"), all[37].Value)
		assert.Equal(t, val(36), all[36].Value)
		require.ErrorIs(t, p.Truncate(99), log.ErrOffsetOutOfRange)
	})
}

// TestOpenFailsOnCorruptionInSealedSegment ensures a flipped byte in an
// older (sealed, so synced) segment is ErrCorrupt naming partition,
// segment, byte position and offset, not a truncation; and that WithRepair
// cuts there and reports what it dropped.
func TestOpenFailsOnCorruptionInSealedSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100)
		require.NoError(t, lg.Close())
		removeSealMarkers(t, dir) // so Open walks them (see sealed_test.go for the trusted path)
		first := segments(t, dir, "events", 0)[0]
		starts := frameStarts(t, first)
		flipByte(t, first, starts[3]+8+20)

		lg2, err := log.Open(dir, opts...)
		require.NoError(t, err)
		_, err = lg2.WriteTopic("events")
		require.ErrorIs(t, err, log.ErrCorrupt)
		var ce *log.CorruptError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, first, ce.Segment)
		assert.Equal(t, starts[3], ce.Position)
		assert.EqualValues(t, 3, ce.Offset)
		assert.EqualValues(t, 0, ce.Partition)
		assert.Contains(t, err.Error(), first)
		require.NoError(t, lg2.Close())
		assert.Len(t, segments(t, dir, "events", 0), len(segments(t, dir, "events", 0)), "nothing deleted without repair")

		lg3 := openLog(t, dir, append(opts, log.WithRepair())...)
		tp, err := lg3.WriteTopic("events")
		require.NoError(t, err)
		p3, err := tp.Partition(0)
		require.NoError(t, err)
		assert.EqualValues(t, 3, p3.HighWatermark())
		rep := p3.Recovery()
		assert.Equal(t, first, rep.Segment)
		assert.EqualValues(t, 97, rep.DroppedRecords, "offsets 3 to 99")
		assert.NotEmpty(t, rep.DeletedSegments)
	})
}

// TestAppendAfterReopenOfEmptyPartition ensures an empty partition reopens
// at offset 0.
func TestAppendAfterReopenOfEmptyPartition(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		openPartition(t, lg, "events", 2)
		_, p := reopen(t, lg, log.WithMode(mode))
		assert.EqualValues(t, 0, p.HighWatermark())
		off, err := p.Append(context.Background(), log.Record{})
		require.NoError(t, err)
		assert.EqualValues(t, 0, off)
	})
}
