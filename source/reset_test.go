package source_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// retainedLog opens a log whose topic "events" (one partition) keeps only
// its active segment, with no background check: tests call dropSealed.
func retainedLog(t *testing.T, mode log.Mode) *log.Log {
	t.Helper()
	lg := testutil.OpenLog(t, mode, log.WithRetentionCheckInterval(0))
	_, err := lg.CreateTopic("events", 1, log.RetentionBytes(0))
	require.NoError(t, err)
	return lg
}

// dropSealed applies retention to "events" now, which deletes every sealed
// segment, and returns the new log start offset.
func dropSealed(t *testing.T, lg *log.Log) int64 {
	t.Helper()
	tp, err := lg.Topic("events")
	require.NoError(t, err)
	rep, err := tp.EnforceRetention(time.Now())
	require.NoError(t, err)
	require.Len(t, rep.Partitions, 1, "the test needs retention to delete something")
	return rep.Partitions[0].StartOffset
}

// resetRecorder collects what the OnReset hook is told.
type resetRecorder []source.Reset

func (r *resetRecorder) option() source.PartitionOption {
	return source.OnReset(func(x source.Reset) { *r = append(*r, x) })
}

// TestResetEarliestByDefaultWhenRetentionPassesTheReader ensures a following
// source whose position retention deleted continues at the new log start
// offset by default, and counts and reports the jump.
func TestResetEarliestByDefaultWhenRetentionPassesTheReader(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := retainedLog(t, m.Mode)
			appendRange(t, lg, "events", 0, 300)
			var resets resetRecorder
			src := source.Partition(lg, "events", 0, source.Earliest, source.MaxBytes(10*56), resets.option())
			first, err := src.Read(context.Background())
			require.NoError(t, err)
			requireOffsets(t, first, "events", 0, 10)

			start := dropSealed(t, lg)
			require.Greater(t, start, int64(10))
			batch, err := src.Read(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, batch)
			require.Equal(t, start, batch[0].Offset, "continues at the new log start offset")
			require.Equal(t, int64(1), src.Resets())
			require.Equal(t, resetRecorder{{Topic: "events", Partition: 0, Policy: source.ResetEarliest,
				From: 10, To: start, StartOffset: start, NextOffset: 300}}, resets)
			require.Equal(t, start-10, resets[0].Skipped())
		})
	}
}

// TestResetLatestContinuesAtTheHighWatermark ensures ResetLatest skips to the
// high watermark, so a follower reads only what is appended afterwards and a
// replay ends.
func TestResetLatestContinuesAtTheHighWatermark(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := retainedLog(t, m.Mode)
			appendRange(t, lg, "events", 0, 300)
			var resets resetRecorder
			follow := source.Partition(lg, "events", 0, source.Earliest, source.MaxBytes(56),
				source.OnOutOfRange(source.ResetLatest), resets.option())
			replay := source.Partition(lg, "events", 0, source.Earliest, source.MaxBytes(56), source.Replay(),
				source.OnOutOfRange(source.ResetLatest))
			for _, src := range []*source.PartitionSource{follow, replay} {
				first, err := src.Read(context.Background())
				require.NoError(t, err)
				requireOffsets(t, first, "events", 0, 1)
			}

			dropSealed(t, lg)
			batch, err := replay.Read(context.Background())
			for next := int64(1); err == nil; next++ {
				// The batches a replay read ahead before the retention ran
				// (partition_readahead.go: two at most): delivered, as a
				// Kafka consumer's prefetched fetches are.
				require.Less(t, next, int64(3), "batches read ahead")
				requireOffsets(t, batch, "events", next, next+1)
				batch, err = replay.Read(context.Background())
			}
			require.ErrorIs(t, err, io.EOF, "a replay reset to its end is over")
			require.Nil(t, batch)
			require.Equal(t, int64(1), replay.Resets())
			require.Equal(t, int64(300), replay.Position())

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err = follow.Read(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded, "nothing after the high watermark yet")
			require.Equal(t, int64(1), follow.Resets())
			require.Equal(t, int64(300), follow.Position())
			require.Len(t, resets, 1)
			require.Equal(t, int64(300), resets[0].To)
			require.Equal(t, int64(299), resets[0].Skipped())

			appendRange(t, lg, "events", 300, 301)
			batch, err = follow.Read(context.Background())
			require.NoError(t, err)
			requireOffsets(t, batch, "events", 300, 301)
		})
	}
}

// TestResetErrorFailsWithTheNewStartOffset ensures ResetError moves nothing:
// Read fails, again and again, with the out-of-range error that carries the
// new log start offset, and the position stays.
func TestResetErrorFailsWithTheNewStartOffset(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := retainedLog(t, m.Mode)
			appendRange(t, lg, "events", 0, 300)
			src := source.Partition(lg, "events", 0, source.Earliest, source.MaxBytes(56),
				source.OnOutOfRange(source.ResetError))
			_, err := src.Read(context.Background())
			require.NoError(t, err)

			start := dropSealed(t, lg)
			for range 2 {
				batch, err := src.Read(context.Background())
				require.Nil(t, batch)
				require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
				var oor *log.OffsetOutOfRangeError
				require.ErrorAs(t, err, &oor)
				require.Equal(t, int64(1), oor.Offset)
				require.Equal(t, start, oor.StartOffset)
				var pe *source.PartitionError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, int64(1), src.Position())
			}
			require.Zero(t, src.Resets())
		})
	}
}

// TestSavedPositionBelowTheLogStartAppliesThePolicy ensures a checkpoint that
// retention passed while the consumer was away is handled by the policy when
// the source opens, through FromStore and through Resume.
func TestSavedPositionBelowTheLogStartAppliesThePolicy(t *testing.T) {
	lg := retainedLog(t, log.ModeMmap)
	appendRange(t, lg, "events", 0, 300)
	start := dropSealed(t, lg)
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(7)))

	var resets resetRecorder
	earliest := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay(), resets.option())
	requireOffsets(t, readUntilEOF(t, earliest), "events", start, 300)
	require.Equal(t, int64(1), earliest.Resets())
	require.Equal(t, resetRecorder{{Topic: "events", Policy: source.ResetEarliest,
		From: 7, To: start, StartOffset: start, NextOffset: 300}}, resets)

	require.NoError(t, earliest.Resume(context.Background(), &store))
	requireOffsets(t, readUntilEOF(t, earliest), "events", start, 300)
	require.Equal(t, int64(2), earliest.Resets(), "Resume to a deleted position resets again")

	latest := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay(),
		source.OnOutOfRange(source.ResetLatest))
	require.Empty(t, readUntilEOF(t, latest))
	require.Equal(t, int64(300), latest.Position())

	failing := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay(),
		source.OnOutOfRange(source.ResetError))
	_, err := failing.Read(context.Background())
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	require.Equal(t, int64(-1), failing.Position())

	at := source.Partition(lg, "events", 0, source.At(start-1), source.Replay())
	requireOffsets(t, readUntilEOF(t, at), "events", start, 300)
	require.Equal(t, int64(1), at.Resets())
}

// TestPositionAboveTheLogEndIsAnErrorWhateverThePolicy ensures no policy ever
// jumps from a position the log does not reach: a saved position beyond the
// high watermark, or a follower whose records were truncated away, fail with
// log.ErrOffsetOutOfRange and reset nothing.
func TestPositionAboveTheLogEndIsAnErrorWhateverThePolicy(t *testing.T) {
	for _, policy := range []source.ResetPolicy{source.ResetEarliest, source.ResetLatest, source.ResetError} {
		t.Run(policy.String(), func(t *testing.T) {
			lg := retainedLog(t, log.ModeFile)
			appendRange(t, lg, "events", 0, 300)
			dropSealed(t, lg)
			var store checkpoint.MemoryStore
			require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(305)))
			saved := source.Partition(lg, "events", 0, source.FromStore(&store), source.OnOutOfRange(policy))
			_, err := saved.Read(context.Background())
			require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
			require.Zero(t, saved.Resets())

			follower := source.Partition(lg, "events", 0, source.Latest, source.OnOutOfRange(policy))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			_, err = follower.Read(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			tp, err := lg.Topic("events")
			require.NoError(t, err)
			p, err := tp.Partition(0)
			require.NoError(t, err)
			require.NoError(t, p.Truncate(299))
			for range 2 {
				_, err = follower.Read(context.Background())
				require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
				var oor *log.OffsetOutOfRangeError
				require.ErrorAs(t, err, &oor)
				require.Equal(t, int64(300), oor.Offset)
				require.Equal(t, int64(299), oor.NextOffset)
			}
			require.Zero(t, follower.Resets())
			require.Equal(t, int64(300), follower.Position())
		})
	}
}

// TestResetPolicyString ensures each policy prints its Kafka-like name.
func TestResetPolicyString(t *testing.T) {
	require.Equal(t, "earliest", source.ResetEarliest.String())
	require.Equal(t, "latest", source.ResetLatest.String())
	require.Equal(t, "error", source.ResetError.String())
	require.Equal(t, "ResetPolicy(9)", source.ResetPolicy(9).String())
}

// TestReadOnlySourceResetsAfterTheWritersRetention ensures a source on a log
// opened read-only (as a consumer process opens it) notices that the writing
// log's retention deleted its position and applies the policy.
func TestReadOnlySourceResetsAfterTheWritersRetention(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := retainedLog(t, m.Mode)
			appendRange(t, lg, "events", 0, 300)
			ro, err := log.Open(lg.Dir(), log.ReadOnly())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, ro.Close()) })
			src := source.Partition(ro, "events", 0, source.Earliest, source.MaxBytes(56))
			first, err := src.Read(context.Background())
			require.NoError(t, err)
			requireOffsets(t, first, "events", 0, 1)

			start := dropSealed(t, lg)
			batch, err := src.Read(context.Background())
			require.NoError(t, err)
			requireOffsets(t, batch, "events", start, start+1)
			require.Equal(t, int64(1), src.Resets())
		})
	}
}
