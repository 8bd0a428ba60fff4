package log_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestEpochRisesAtEveryOpenAndRecordsCarryIt ensures each open for writing
// starts a new epoch, recorded in the records appended in it.
func TestEpochRisesAtEveryOpenAndRecordsCarryIt(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		assert.EqualValues(t, 0, p.Epoch())
		appendN(t, p, 0, 3)
		lg, p = reopen(t, lg, log.WithMode(mode))
		assert.EqualValues(t, 1, p.Epoch())
		appendN(t, p, 3, 2)
		_, p = reopen(t, lg, log.WithMode(mode))
		assert.EqualValues(t, 2, p.Epoch())
		var got []int32
		for _, r := range readAll(t, p) {
			got = append(got, r.Epoch)
		}
		assert.Equal(t, []int32{0, 0, 0, 1, 1}, got)
		end, ok := p.EndOffsetForEpoch(0)
		assert.True(t, ok)
		assert.EqualValues(t, 3, end)
		end, _ = p.EndOffsetForEpoch(2)
		assert.EqualValues(t, 5, end)
	})
}

// TestResumeOffsetOnAClosedPartitionIsErrClosed ensures a position is not
// validated against a closed partition, which holds no segment: the answer
// was an out-of-range error against [0, 0], or an offset accepted. Found
// by a new user's trial (2026-12-02).
func TestResumeOffsetOnAClosedPartitionIsErrClosed(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 10)
	require.NoError(t, lg.Close())
	for _, epoch := range []int32{0, -1} {
		_, err := p.ResumeOffset(5, epoch)
		require.ErrorIs(t, err, log.ErrClosed, "epoch %d", epoch)
		assert.NotErrorIs(t, err, log.ErrOffsetOutOfRange)
		assert.ErrorContains(t, err, "topic events partition 0")
	}
}

// TestResumeOffsetStepsBackToTheEndOfTheSavedEpoch ensures a position saved
// in an epoch that a truncation cut short resumes where the truncation
// happened, so the records appended at the reused offsets are read; and a
// position past the log end is ErrOffsetOutOfRange, never a jump.
func TestResumeOffsetStepsBackToTheEndOfTheSavedEpoch(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 100)
		saved, savedEpoch := int64(100), p.Epoch() // a consumer handled 0..99
		require.NoError(t, p.Truncate(95))         // 95..99 are lost
		appendN(t, p, 95, 10)                      // and 95..104 reused, epoch 1

		off, err := p.ResumeOffset(saved, savedEpoch)
		require.NoError(t, err)
		assert.EqualValues(t, 95, off)
		off, err = p.ResumeOffset(100, p.Epoch())
		require.NoError(t, err)
		assert.EqualValues(t, 100, off, "a position in the current epoch stands")
		off, err = p.ResumeOffset(50, -1)
		require.NoError(t, err)
		assert.EqualValues(t, 50, off, "no epoch: taken as it is")
		_, err = p.ResumeOffset(200, p.Epoch())
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
		_, err = p.ResumeOffset(200, -1)
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	})
}

// TestFollowerReadsRecordsAtOffsetsReusedAfterTruncation ensures a follower
// that already returned offsets a truncation removed steps back and returns
// the new records at those offsets, in-process and in a read-only log.
func TestFollowerReadsRecordsAtOffsetsReusedAfterTruncation(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)

		ro := openLog(t, dir, log.ReadOnly())
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		rp, err := tp.Partition(0)
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, r := range []*log.Reader{p.Follow(0), rp.Follow(0)} {
			var n int
			for n < 10 {
				recs, err := r.Next(ctx, 1<<20)
				require.NoError(t, err)
				n += len(recs)
			}
		}
		in, cross := p.Follow(0), rp.Follow(0)
		drain := func(r *log.Reader, n int) []log.Record {
			var out []log.Record
			for len(out) < n {
				recs, err := r.Next(ctx, 1<<20)
				require.NoError(t, err)
				out = append(out, recs...)
			}
			return out
		}
		drain(in, 10)
		drain(cross, 10)

		require.NoError(t, p.Truncate(7))
		_, err = p.Append(ctx, log.Record{Value: []byte("new-7")}, log.Record{Value: []byte("new-8")})
		require.NoError(t, err)
		for name, r := range map[string]*log.Reader{"in-process": in, "read-only": cross} {
			recs := drain(r, 2)
			require.EqualValues(t, 7, recs[0].Offset, name)
			assert.Equal(t, "new-7", string(recs[0].Value), name)
			assert.EqualValues(t, 1, recs[0].Epoch, name)
		}
	})
}
