package log_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// forgetRecoveryPoint removes a partition's recovery point file, as if the
// log had never been synced: the tests that damage the end of a log use it
// to model a torn tail, which only unsynced bytes can have.
func forgetRecoveryPoint(t testing.TB, dir, topic string, partition int) {
	t.Helper()
	err := os.Remove(filepath.Join(dir, topic, fmt.Sprint(partition), log.RecoveryPointFile))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
}

// recoveryPoint reads a partition's recovery point file.
func recoveryPoint(t *testing.T, dir, topic string, partition int) (segment, position, offset int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, topic, fmt.Sprint(partition), log.RecoveryPointFile))
	require.NoError(t, err)
	var rp struct{ Version, Segment, Position, Offset int64 }
	require.NoError(t, json.Unmarshal(b, &rp), string(b))
	require.EqualValues(t, 1, rp.Version)
	return rp.Segment, rp.Position, rp.Offset
}

// openTopicErr opens dir with opts and returns the error of opening topic
// "events", closing the log again.
func openTopicErr(t *testing.T, dir string, opts ...log.Option) error {
	t.Helper()
	lg, err := log.Open(dir, opts...)
	require.NoError(t, err)
	defer lg.Close()
	_, err = lg.WriteTopic("events")
	return err
}

// TestTruncatedAtEveryByteOfLastTwoFramesReopensAtIntactPrefix ensures
// that a segment cut at any byte of its last two frames (an unsynced tail
// torn by a crash) reopens with exactly the frames that lie whole below the
// cut, and the next append takes the offset after them.
func TestTruncatedAtEveryByteOfLastTwoFramesReopensAtIntactPrefix(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		for i := range 6 {
			_, err := p.Append(context.Background(), log.Record{Value: make([]byte, 3*i), Timestamp: 1})
			require.NoError(t, err)
		}
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		starts := append(frameStarts(t, path), int64(len(orig)))
		require.Len(t, starts, 7)
		for cut := starts[4]; cut <= starts[6]; cut++ {
			require.NoError(t, os.WriteFile(path, orig[:cut], 0o644))
			forgetRecoveryPoint(t, dir, "events", 0)
			want := 4
			if cut >= starts[5] {
				want = 5
			}
			if cut == starts[6] {
				want = 6
			}
			lg, p := openEvents(t, dir, log.WithMode(mode))
			require.EqualValues(t, want, p.HighWatermark(), "cut at byte %d", cut)
			all := readAll(t, p)
			require.Len(t, all, want)
			for i, r := range all {
				require.Len(t, r.Value, 3*i)
			}
			if cut > starts[want] {
				assert.NotEmpty(t, p.Recovery().Reason, "cut at byte %d", cut)
			}
			off, err := p.Append(context.Background(), log.Record{Value: []byte("next")})
			require.NoError(t, err)
			require.EqualValues(t, want, off)
			require.NoError(t, lg.Close())
		}
	})
}

// TestFlippedByteFollowedByValidFramesIsCorruptNotTorn ensures a damaged
// frame with intact frames behind it, in the last segment and above the
// recovery point, fails the open with ErrCorrupt naming the frame, instead
// of being cut as a torn tail with the records behind it; and that
// WithRepair cuts there and reports the records it dropped.
func TestFlippedByteFollowedByValidFramesIsCorruptNotTorn(t *testing.T) {
	damages := map[string]func(t *testing.T, path string, at int64){
		"body byte": func(t *testing.T, path string, at int64) { flipByte(t, path, at+8+20) },
		"length":    func(t *testing.T, path string, at int64) { flipByte(t, path, at+2) },
		"zeroed": func(t *testing.T, path string, at int64) { // a page never written back, as after a power loss
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			_, err = f.WriteAt(make([]byte, 56), at)
			require.NoError(t, err)
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				dir := t.TempDir()
				lg := openLog(t, dir, log.WithMode(mode))
				p := openPartition(t, lg, "events", 1)
				appendN(t, p, 0, 20) // frames of 56 bytes
				require.NoError(t, lg.Close())
				forgetRecoveryPoint(t, dir, "events", 0) // not below the point: only the scan tells
				path := segPath(dir, "events", 0, 0)
				starts := frameStarts(t, path)
				damage(t, path, starts[10])

				err := openTopicErr(t, dir, log.WithMode(mode))
				require.ErrorIs(t, err, log.ErrCorrupt)
				var ce *log.CorruptError
				require.True(t, errors.As(err, &ce))
				assert.Equal(t, path, ce.Segment)
				assert.Equal(t, starts[10], ce.Position)
				assert.EqualValues(t, 10, ce.Offset)
				assert.Contains(t, ce.Reason, "followed by an intact frame of offset 11")
				assert.EqualValues(t, starts[19]+56, fileSize(t, path), "nothing cut without repair")

				lg, p = openEvents(t, dir, log.WithMode(mode), log.WithRepair())
				assert.EqualValues(t, 10, p.HighWatermark())
				assert.EqualValues(t, 10, p.Recovery().DroppedRecords, "offsets 10 to 19")
				assert.Equal(t, path, p.Recovery().Segment)
				require.NoError(t, lg.Close())
				_, p = openEvents(t, dir, log.WithMode(mode))
				assert.Len(t, readAll(t, p), 10)
			})
		})
	}
}

// TestFlippedByteBelowRecoveryPointIsCorrupt ensures a damaged last frame
// with nothing behind it, which would pass for a torn tail, is ErrCorrupt
// when the recovery point says it was synced; WithRepair cuts it, reports
// it and lowers the point so the next open succeeds.
func TestFlippedByteBelowRecoveryPointIsCorrupt(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 20)
		require.NoError(t, lg.Close()) // Close syncs and saves the point at the end
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		_, pos, off := recoveryPoint(t, dir, "events", 0)
		require.EqualValues(t, 20, off)
		require.Equal(t, starts[19]+56, pos)
		flipByte(t, path, starts[19]+8+20)

		err := openTopicErr(t, dir, log.WithMode(mode))
		require.ErrorIs(t, err, log.ErrCorrupt)
		var ce *log.CorruptError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, starts[19], ce.Position)
		assert.EqualValues(t, 19, ce.Offset)
		assert.Contains(t, ce.Reason, "crc mismatch; the log ends below the recovery point (offset 20")

		lg, p = openEvents(t, dir, log.WithMode(mode), log.WithRepair())
		assert.EqualValues(t, 19, p.HighWatermark())
		assert.EqualValues(t, 1, p.Recovery().DroppedRecords)
		_, _, off = recoveryPoint(t, dir, "events", 0)
		assert.EqualValues(t, 19, off, "repair lowers the point before it cuts")
		require.NoError(t, lg.Close())
		_, p = openEvents(t, dir, log.WithMode(mode))
		assert.EqualValues(t, 19, p.HighWatermark())
	})
}

// TestMissingSegmentBelowRecoveryPointIsCorrupt ensures that a partition
// whose segments end below the recovery point (a file cut at a frame
// boundary, or deleted) does not reopen shorter without a word.
func TestMissingSegmentBelowRecoveryPointIsCorrupt(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 50)
		require.NoError(t, lg.Close())
		segs := segments(t, dir, "events", 0)
		require.NoError(t, os.Remove(segs[len(segs)-1]))
		err := openTopicErr(t, dir, opts...)
		require.ErrorIs(t, err, log.ErrCorrupt)
		assert.Contains(t, err.Error(), "below the recovery point (offset 50")
	})
}

// TestSyncedAppendSavesRecoveryPoint ensures an AckSynced append records
// the synced end in the recovery point file without waiting for Close, and
// Truncate lowers it before cutting, so a reopen after Truncate succeeds.
func TestSyncedAppendSavesRecoveryPoint(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 3)
		_, err := p.AppendAck(context.Background(), log.AckSynced, log.Record{Value: []byte("x")})
		require.NoError(t, err)
		seg, pos, off := recoveryPoint(t, dir, "events", 0)
		assert.EqualValues(t, 0, seg)
		assert.EqualValues(t, 4, off)
		assert.EqualValues(t, fileSizeOfFrames(t, segPath(dir, "events", 0, 0)), pos)

		require.NoError(t, p.Truncate(2))
		_, _, off = recoveryPoint(t, dir, "events", 0)
		assert.EqualValues(t, 2, off)
		_, p = reopen(t, lg, log.WithMode(mode))
		assert.EqualValues(t, 2, p.HighWatermark())
	})
}

// fileSizeOfFrames is the end of the last frame of a segment file.
func fileSizeOfFrames(t *testing.T, path string) int64 {
	t.Helper()
	starts := frameStarts(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	last := starts[len(starts)-1]
	return last + int64((8+int(binary.LittleEndian.Uint32(b[last:]))+7)&^7)
}

// TestZeroTailIsEndAndEmptyValueBeforeItIsARecord ensures the zero-filled
// tail of a pre-sized segment is the end of the log, and that a record with
// an empty value and no key just before it is still a record.
func TestZeroTailIsEndAndEmptyValueBeforeItIsARecord(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 4)
		_, err := p.Append(context.Background(), log.Record{Key: nil, Value: []byte{}})
		require.NoError(t, err)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		end := fileSize(t, path)
		require.NoError(t, os.Truncate(path, 64<<10)) // the pre-sized tail a crash leaves

		lg, p = openEvents(t, dir, log.WithMode(mode))
		require.EqualValues(t, 5, p.HighWatermark())
		assert.Empty(t, p.Recovery().Reason, "the zero tail is the end, not damage")
		all := readAll(t, p)
		require.Len(t, all, 5)
		assert.Nil(t, all[4].Key)
		assert.NotNil(t, all[4].Value)
		assert.Empty(t, all[4].Value)
		off, err := p.Append(context.Background(), log.Record{Value: []byte("sixth")})
		require.NoError(t, err)
		assert.EqualValues(t, 5, off)
		require.NoError(t, lg.Close())
		assert.Greater(t, fileSize(t, path), end)
		_, p = openEvents(t, dir, log.WithMode(mode))
		assert.EqualValues(t, 6, p.HighWatermark())
	})
}

// TestSegmentEndingExactlyAtCapacityRolls ensures a segment whose frames
// fill it to the last byte takes no more: the next record, alone or in a
// group, starts the next segment at the next offset, also after a reopen,
// and a follower crossing the roll sees no error.
func TestSegmentEndingExactlyAtCapacityRolls(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		rec := log.Record{Value: make([]byte, 12), Timestamp: 1} // 8 + 36 + 12 = 56 bytes, aligned
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(4 * 56)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		follower := p.Follow(0)
		got := make(chan error, 1)
		go func() {
			n := 0
			for n < 13 {
				recs, err := follower.Next(ctx, 1<<20)
				if err != nil {
					got <- err
					return
				}
				for _, r := range recs {
					if r.Offset != int64(n) {
						got <- fmt.Errorf("follower got offset %d, want %d", r.Offset, n)
						return
					}
					n++
				}
			}
			got <- nil
		}()

		_, err := p.Append(ctx, rec, rec, rec, rec)
		require.NoError(t, err)
		require.Len(t, segments(t, dir, "events", 0), 1, "full, but nothing asked to go past it")
		assert.EqualValues(t, 4*56, fileSizeOfFrames(t, segPath(dir, "events", 0, 0)))
		lg, p = reopen(t, lg, opts...)
		off, err := p.Append(ctx, rec)
		require.NoError(t, err)
		require.EqualValues(t, 4, off)
		require.Equal(t, []string{segPath(dir, "events", 0, 0), segPath(dir, "events", 0, 4)}, segments(t, dir, "events", 0))
		assert.EqualValues(t, 4*56, fileSize(t, segPath(dir, "events", 0, 0)))
		require.Error(t, <-got, "the first follower's partition was closed by the reopen")

		follower = p.Follow(0)
		go func() {
			n := 0
			for n < 13 {
				recs, err := follower.Next(ctx, 1<<20)
				if err != nil {
					got <- err
					return
				}
				for _, r := range recs {
					if r.Offset != int64(n) {
						got <- fmt.Errorf("follower got offset %d, want %d", r.Offset, n)
						return
					}
					n++
				}
			}
			got <- nil
		}()
		off, err = p.Append(ctx, rec, rec, rec, rec, rec, rec, rec, rec) // a group across two rolls
		require.NoError(t, err)
		require.EqualValues(t, 5, off)
		require.NoError(t, <-got)
		require.Len(t, segments(t, dir, "events", 0), 4)
		_, p = reopen(t, lg, opts...)
		all := readAll(t, p)
		require.Len(t, all, 13)
		for i, r := range all {
			require.EqualValues(t, i, r.Offset)
		}
	})
}

// TestWritesAfterTornTailLandBehindTruncationAndSurvive ensures records
// appended after a torn tail was cut take the offsets from the cut on, sit
// where the torn frame was, and are all there after the next reopen.
func TestWritesAfterTornTailLandBehindTruncationAndSurvive(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		starts := frameStarts(t, path)
		require.NoError(t, os.Truncate(path, starts[9]+30)) // frame 9 torn mid-body
		forgetRecoveryPoint(t, dir, "events", 0)

		lg, p = openEvents(t, dir, log.WithMode(mode))
		require.EqualValues(t, 9, p.HighWatermark())
		cut := p.Recovery().TruncatedBytes // the torn bytes, less trailing zeros
		assert.True(t, cut > 20 && cut <= 30, "cut %d bytes", cut)
		for i := range 3 {
			off, err := p.AppendAck(context.Background(), log.AckSynced, log.Record{Value: fmt.Appendf(nil, "after-%d", i)})
			require.NoError(t, err)
			require.EqualValues(t, 9+i, off)
		}
		assert.Equal(t, starts[9], frameStarts(t, path)[9], "the first new frame is where the torn one was")
		require.NoError(t, lg.Close())
		_, p = openEvents(t, dir, log.WithMode(mode))
		all := readAll(t, p)
		require.Len(t, all, 12)
		assert.Equal(t, val(8), all[8].Value)
		for i := range 3 {
			assert.Equal(t, fmt.Appendf(nil, "after-%d", i), all[9+i].Value)
		}
	})
}

// TestRecoveryPointThatDoesNotParseIsCorrupt ensures a damaged recovery
// point file is an error naming it, not a silent "nothing was synced", and
// that WithRepair rewrites it.
func TestRecoveryPointThatDoesNotParseIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 3)
	require.NoError(t, lg.Close())
	rp := filepath.Join(dir, "events", "0", log.RecoveryPointFile)
	require.NoError(t, os.WriteFile(rp, []byte("{garbage"), 0o644))
	err := openTopicErr(t, dir)
	require.ErrorIs(t, err, log.ErrCorrupt)
	assert.Contains(t, err.Error(), rp)
	lg, p = openEvents(t, dir, log.WithRepair())
	assert.EqualValues(t, 3, p.HighWatermark())
	require.NoError(t, lg.Close())
	_, _, off := recoveryPoint(t, dir, "events", 0)
	assert.EqualValues(t, 3, off)
}

// TestReadOnlyOpenReportsDamageWithIntactFramesBehind ensures a reader
// that opens the log read-only (a consumer, strom read) does not stop
// quietly at a damaged frame with intact records behind it: the open fails
// with ErrCorrupt, as a writable open does.
func TestReadOnlyOpenReportsDamageWithIntactFramesBehind(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 20)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		flipByte(t, path, frameStarts(t, path)[10]+8+20)

		ro := openLog(t, dir, log.ReadOnly())
		_, err := ro.Topic("events")
		require.ErrorIs(t, err, log.ErrCorrupt)
		var ce *log.CorruptError
		require.ErrorAs(t, err, &ce)
		assert.EqualValues(t, 10, ce.Offset)
		assert.Contains(t, ce.Reason, "followed by an intact frame of offset 11")
	})
}
