package log_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// compactionInput is the case: records over keys, every key
// written the same number of times in a seeded order, 5% of the records
// tombstones (nil values).
type compactionInput struct {
	recs   []log.Record
	latest map[string]int // key -> index in recs of its last write
}

func newCompactionInput(seed uint64, keys, writesPerKey int) compactionInput {
	rng := rand.New(rand.NewPCG(seed, 0))
	order := make([]int, 0, keys*writesPerKey)
	for k := range keys {
		for range writesPerKey {
			order = append(order, k)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	in := compactionInput{latest: make(map[string]int, keys)}
	for i, k := range order {
		key := fmt.Sprintf("key-%04d", k)
		r := log.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%s=%d", key, i)), Timestamp: 1}
		if rng.IntN(100) < 5 {
			r.Value = nil // a tombstone
		}
		in.recs = append(in.recs, r)
		in.latest[key] = i
	}
	return in
}

// lastBelow returns the offset of key's last write below end, -1 if none.
func (in compactionInput) lastBelow(key string, end int64) int64 {
	for o := end - 1; o >= 0; o-- {
		if string(in.recs[o].Key) == key {
			return o
		}
	}
	return -1
}

// lastValues returns, per key, the last record of recs (in offset order).
func lastValues(recs []log.Record) map[string]log.Record {
	out := make(map[string]log.Record)
	for _, r := range recs {
		out[string(r.Key)] = r
	}
	return out
}

// TestCompactionKeepsTheLatestRecordOfEachKey is the case: 100,000
// records over 1,000 keys, every key written 100 times, 5% tombstones.
// After a pass every key's last record is its last write, at its offset,
// nothing else of a sealed segment is left of any key but its last write,
// offsets never change, a Reader that started before the pass reads every
// key's latest value, a reopened and a read-only log read the same, and
// tombstones go once their retention has passed after the pass that kept
// them.
func TestCompactionKeepsTheLatestRecordOfEachKey(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		in := newCompactionInput(26, 1000, 100)
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(256<<10), log.WithRetentionCheckInterval(0))
		tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		ctx := context.Background()
		for i := 0; i < len(in.recs); i += 500 {
			_, err := p.Append(ctx, in.recs[i:i+500]...)
			require.NoError(t, err)
		}
		before := p.HighWatermark()
		require.EqualValues(t, len(in.recs), before)

		// A reader that read a little before the pass.
		rd := p.Replay(0)
		early, err := rd.Next(ctx, 4<<10)
		require.NoError(t, err)
		require.NotEmpty(t, early)

		rep, err := tp.Compact(time.Now())
		require.NoError(t, err)
		require.Len(t, rep.Partitions, 1)
		pc := rep.Partitions[0]
		t.Logf("pass: %+v", pc)
		assert.Positive(t, pc.Segments)
		assert.Greater(t, pc.BytesBefore, pc.BytesAfter)
		assert.EqualValues(t, before, p.HighWatermark(), "the high watermark never moves")
		assert.EqualValues(t, 0, p.StartOffset(), "the log start offset never moves")

		check := func(t *testing.T, got []log.Record, what string, activeBase int64) {
			t.Helper()
			last := int64(-1)
			for _, r := range got {
				require.Greater(t, r.Offset, last, "%s: offsets increase", what)
				last = r.Offset
				want := in.recs[r.Offset]
				require.Equal(t, want.Key, r.Key, "%s: offset %d holds what was written there", what, r.Offset)
				require.Equal(t, want.Value, r.Value, "%s: offset %d", what, r.Offset)
				if r.Offset < pc.CleanedTo {
					require.EqualValues(t, in.lastBelow(string(r.Key), pc.CleanedTo), r.Offset,
						"%s: offset %d of key %s was kept, and a later write of it was in the section the pass mapped", what, r.Offset, r.Key)
				}
			}
			lv := lastValues(got)
			require.Len(t, lv, len(in.latest), "%s: every key", what)
			for k, i := range in.latest {
				require.EqualValues(t, i, lv[k].Offset, "%s: key %s's last record is its last write", what, k)
			}
		}
		segs, err := p.Segments()
		require.NoError(t, err)
		activeBase := segs[len(segs)-1].BaseOffset
		got := readAll(t, p)
		check(t, got, "after the pass", activeBase)
		assert.Less(t, len(got), len(in.recs)/10, "the sealed segments hold one record per key")

		seen := append([]log.Record(nil), early...)
		for {
			recs, err := rd.Next(ctx, 1<<20)
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			seen = append(seen, recs...)
		}
		lv := lastValues(seen)
		for k, i := range in.latest {
			require.EqualValues(t, i, lv[k].Offset, "the reader from before the pass: key %s", k)
		}

		states, err := tp.CleanerStates()
		require.NoError(t, err)
		require.Len(t, states, 1)
		assert.Equal(t, pc.CleanedTo, states[0].CleanedTo)
		assert.Equal(t, pc.Segments, states[0].CompactedSegments)
		assert.Zero(t, states[0].DirtyBytes, "everything sealed was mapped")
		assert.Zero(t, states[0].DirtyRatio())
		assert.WithinDuration(t, time.Now(), states[0].LastPass, time.Hour)

		vr, err := log.Verify(dir)
		require.NoError(t, err)
		assert.Empty(t, vr.Problems, "a compacted log verifies")
		assert.EqualValues(t, len(got), vr.Records, "Verify counts the records left, not the offsets")
		infos, err := p.Segments()
		require.NoError(t, err)
		n := int64(0)
		for i, in := range infos {
			n += in.Records
			assert.Equal(t, i < pc.Segments, in.Compacted, "segment %d", in.BaseOffset)
		}
		assert.EqualValues(t, len(got), n, "Segments counts the records left")

		ro := openLog(t, dir, log.ReadOnly())
		rt, err := ro.Topic("users")
		require.NoError(t, err)
		rp, err := rt.Partition(0)
		require.NoError(t, err)
		check(t, readAll(t, rp), "read-only log", activeBase)

		require.NoError(t, lg.Close())
		lg = openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(256<<10), log.WithRetentionCheckInterval(0))
		tp, err = lg.WriteTopic("users")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)
		check(t, readAll(t, p), "reopened", activeBase)
		assert.EqualValues(t, before, p.HighWatermark())

		// Tombstones outlive the pass that kept them by their retention.
		tombstones := 0
		for _, r := range readAll(t, p) {
			if r.Value == nil && r.Offset < activeBase {
				tombstones++
			}
		}
		require.Positive(t, tombstones)
		rep, err = tp.Compact(time.Now())
		require.NoError(t, err)
		for _, pc := range rep.Partitions {
			assert.Zero(t, pc.TombstonesRemoved, "within their retention")
		}
		rep, err = tp.Compact(time.Now().Add(23 * time.Hour))
		require.NoError(t, err)
		for _, pc := range rep.Partitions {
			assert.Zero(t, pc.TombstonesRemoved, "within the default 24 hours")
		}
		rep, err = tp.Compact(time.Now().Add(25 * time.Hour))
		require.NoError(t, err)
		require.Len(t, rep.Partitions, 1)
		assert.EqualValues(t, tombstones, rep.Partitions[0].TombstonesRemoved)
		for _, r := range readAll(t, p) {
			if r.Offset < activeBase {
				require.NotNil(t, r.Value, "offset %d: no tombstone left in the sealed segments", r.Offset)
			}
		}
	})
}

// TestReadOnlyLogReadsThroughACompaction ensures a log opened read-only
// before a pass (a consumer in another process) keeps its log start offset
// when the pass replaces its leading segments (their files get new inodes:
// the old ones lose their last name, which is how a deletion by retention
// looks), reads every key's latest record after the pass, and follows new
// appends.
func TestReadOnlyLogReadsThroughACompaction(t *testing.T) {
	dir := t.TempDir()
	in := newCompactionInput(7, 200, 50)
	lg := openLog(t, dir, log.WithSegmentBytes(32<<10), log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < len(in.recs); i += 100 {
		_, err := p.Append(ctx, in.recs[i:i+100]...)
		require.NoError(t, err)
	}
	ro := openLog(t, dir, log.ReadOnly())
	rt, err := ro.Topic("users")
	require.NoError(t, err)
	rp, err := rt.Partition(0)
	require.NoError(t, err)
	rd := rp.Follow(0)
	first, err := rd.Next(ctx, 1<<10)
	require.NoError(t, err)

	_, err = tp.Compact(time.Now())
	require.NoError(t, err)
	assert.EqualValues(t, 0, rp.StartOffset(), "a replaced segment is not a deleted one")
	seen := append([]log.Record(nil), first...)
	for int64(len(seen)) == 0 || seen[len(seen)-1].Offset+1 < p.HighWatermark() {
		recs, err := rd.Next(ctx, 1<<20)
		require.NoError(t, err)
		seen = append(seen, recs...)
	}
	lv := lastValues(seen)
	for k, i := range in.latest {
		require.EqualValues(t, i, lv[k].Offset, "key %s", k)
	}
	check := lastValues(readAll(t, rp))
	for k, i := range in.latest {
		require.EqualValues(t, i, check[k].Offset, "a read from the start after the pass: key %s", k)
	}
	off, err := p.Append(ctx, log.Record{Key: []byte("new"), Value: []byte("v")})
	require.NoError(t, err)
	recs, err := rd.Next(ctx, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, off, recs[0].Offset)
}

// TestBackgroundCleanerCompactsDirtyPartitionsOnly ensures a writable Log
// runs cleaner passes by itself on the compacted topics it writes, once a
// partition's dirty ratio reaches one half, reports them to the observer,
// leaves a clean partition alone, and leaves a topic of cleanup policy
// delete alone.
func TestBackgroundCleanerCompactsDirtyPartitionsOnly(t *testing.T) {
	reports := make(chan log.CompactionReport, 100)
	lg := openLog(t, t.TempDir(), log.WithSegmentBytes(16<<10), log.WithRetentionCheckInterval(0),
		log.WithCleanerInterval(5*time.Millisecond), log.WithCleanerObserver(func(r log.CompactionReport, err error) {
			assert.NoError(t, err)
			reports <- r
		}))
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	plain, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	q, err := plain.Partition(0)
	require.NoError(t, err)
	in := newCompactionInput(3, 20, 100)
	ctx := context.Background()
	_, err = p.Append(ctx, in.recs...)
	require.NoError(t, err)
	_, err = q.Append(ctx, in.recs...)
	require.NoError(t, err)

	rep := <-reports
	require.Equal(t, "users", rep.Topic, "only the compacted topic is cleaned")
	require.Len(t, rep.Partitions, 1)
	assert.Positive(t, rep.Partitions[0].Segments)
	lv := lastValues(readAll(t, p))
	for k, i := range in.latest {
		require.EqualValues(t, i, lv[k].Offset, "key %s", k)
	}
	assert.Len(t, readAll(t, q), len(in.recs), "a topic of cleanup policy delete keeps everything")

	// Clean now: the next passes find nothing dirty and report nothing,
	// until new records make it dirty again.
	_, err = p.Append(ctx, in.recs...)
	require.NoError(t, err)
	rep = <-reports
	require.Len(t, rep.Partitions, 1)
	assert.Greater(t, rep.Partitions[0].DirtyFrom, int64(0), "the pass maps from where the last stopped")
}

// TestRetentionAppliesToCompactDeleteNotCompact ensures the retention
// bounds delete segments of a topic of cleanup policy compact,delete and
// not of one of compact alone, as in Kafka.
func TestRetentionAppliesToCompactDeleteNotCompact(t *testing.T) {
	lg := openLog(t, t.TempDir(), log.WithSegmentBytes(4<<10), log.WithRetentionCheckInterval(0), log.WithCleanerInterval(0))
	in := newCompactionInput(5, 50, 20)
	for _, c := range []struct {
		policy  log.CleanupPolicy
		deletes bool
	}{{log.CleanupCompact, false}, {log.CleanupCompactDelete, true}} {
		tp, err := lg.CreateTopic("t-"+strings.ReplaceAll(c.policy.String(), ",", "-"), 1,
			log.WithCleanupPolicy(c.policy), log.RetentionBytes(8<<10))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		_, err = p.Append(context.Background(), in.recs...)
		require.NoError(t, err)
		rep, err := tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		assert.Equal(t, c.deletes, len(rep.Partitions) > 0, "%s", c.policy)
		assert.Equal(t, c.deletes, p.StartOffset() > 0, "%s", c.policy)
	}
}

// TestTruncateBelowWhatCompactionReliedOnIsRefused is the loss the stress
// test found: a pass removed a key's older record because a later one
// replaced it, then a Truncate cut the later one, and the key had neither.
// Such a Truncate is refused with a *CompactedError naming the lowest
// offset allowed, also after a reopen (the compacted flags keep it); one at
// or above it cuts.
func TestTruncateBelowWhatCompactionReliedOnIsRefused(t *testing.T) {
	dir := t.TempDir()
	opts := []log.Option{log.WithSegmentBytes(4 << 10), log.WithRetentionCheckInterval(0), log.WithCleanerInterval(0)}
	lg := openLog(t, dir, opts...)
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	in := newCompactionInput(9, 10, 50)
	_, err = p.Append(context.Background(), in.recs...)
	require.NoError(t, err)
	rep, err := tp.Compact(time.Now())
	require.NoError(t, err)
	mapped := rep.Partitions[0].CleanedTo
	require.Less(t, mapped, p.HighWatermark())

	for _, reopen := range []bool{false, true} {
		if reopen {
			require.NoError(t, lg.Close())
			lg = openLog(t, dir, opts...)
			tp, err = lg.WriteTopic("users")
			require.NoError(t, err)
			p, err = tp.Partition(0)
			require.NoError(t, err)
		}
		err = p.Truncate(mapped - 1)
		require.ErrorIs(t, err, log.ErrCompacted, "reopen %v", reopen)
		var ce *log.CompactedError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, mapped, ce.CompactedThrough)
		assert.ErrorContains(t, err, fmt.Sprintf("topic users partition 0: truncate to offset %d refused", mapped-1))
		lv := lastValues(readAll(t, p))
		for k, i := range in.latest {
			require.EqualValues(t, i, lv[k].Offset, "nothing was cut: key %s", k)
		}
	}
	require.NoError(t, p.Truncate(mapped), "at the mapped end: allowed")
	assert.Equal(t, mapped, p.HighWatermark())
}

// TestTombstonesExpireFromTheirFirstPassWhateverTheirSegmentDoes is the
// loss of two cases a new user's trial found: tombstones in a segment
// from which a pass removes nothing (never rewritten, they were kept
// forever), and tombstones in a segment rewritten by every pass (their
// clock restarted at each rewrite). Both now go once TombstoneRetention has
// passed since the pass that first kept them.
func TestTombstonesExpireFromTheirFirstPassWhateverTheirSegmentDoes(t *testing.T) {
	lg := openLog(t, t.TempDir(), log.WithSegmentBytes(4<<10), log.WithRetentionCheckInterval(0), log.WithCleanerInterval(0))
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact), log.TombstoneRetention(time.Hour))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	ctx := context.Background()
	appendAll := func(recs ...log.Record) {
		t.Helper()
		_, err := p.Append(ctx, recs...)
		require.NoError(t, err)
	}
	var profiles, deletes []log.Record
	for i := range 300 {
		profiles = append(profiles, log.Record{Key: fmt.Appendf(nil, "u%d", i), Value: []byte("profile")})
		deletes = append(deletes, log.Record{Key: fmt.Appendf(nil, "u%d", i)})
	}
	appendAll(profiles...)
	appendAll(deletes...)
	tombstones := func() (n int) {
		for _, r := range readAll(t, p) {
			if r.Value == nil {
				n++
			}
		}
		return n
	}
	// Each pass sees new records of another key (the partition is dirty),
	// which a later one replaces: the segments holding them are rewritten
	// at every pass.
	t0 := time.Now()
	for i, at := range []time.Duration{0, 20 * time.Minute, 40 * time.Minute, 59 * time.Minute} {
		for j := range 100 {
			appendAll(log.Record{Key: []byte("other"), Value: fmt.Appendf(nil, "x%d-%d", i, j)})
		}
		_, err := tp.Compact(t0.Add(at))
		require.NoError(t, err)
		require.Equal(t, 300, tombstones(), "pass at +%v: within the hour, every tombstone stays", at)
	}
	appendAll(log.Record{Key: []byte("other"), Value: []byte("last")})
	rep, err := tp.Compact(t0.Add(61 * time.Minute))
	require.NoError(t, err)
	left := tombstones()
	require.Len(t, rep.Partitions, 1)
	assert.EqualValues(t, 300-left, rep.Partitions[0].TombstonesRemoved)
	segs, err := p.Segments()
	require.NoError(t, err)
	active := segs[len(segs)-1].BaseOffset
	for _, r := range readAll(t, p) {
		if r.Value == nil {
			assert.GreaterOrEqual(t, r.Offset, active, "offset %d: a tombstone past its hour is left outside the active segment", r.Offset)
		}
	}
}
