package log_test

import (
	"context"
	"io"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestReplayEndsAtHighWatermarkOfItsStart ensures a replay returns the
// records present when it began, then io.EOF, ignoring later appends.
func TestReplayEndsAtHighWatermarkOfItsStart(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(1024))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 50)
		r := p.Replay(10)
		appendN(t, p, 50, 5)
		var got []int64
		for {
			recs, err := r.Next(context.Background(), 100)
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			for _, rec := range recs {
				got = append(got, rec.Offset)
			}
		}
		require.Len(t, got, 40)
		assert.EqualValues(t, 10, got[0])
		assert.EqualValues(t, 49, got[39])
		assert.EqualValues(t, 50, r.Position())
	})
}

// TestReadRespectsByteBudget ensures Read returns at least one record even
// above the budget and stops at the budget otherwise.
func TestReadRespectsByteBudget(t *testing.T) {
	lg := openLog(t, t.TempDir())
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 100)
	recs, err := p.Read(0, 1)
	require.NoError(t, err)
	assert.Len(t, recs, 1)
	recs, err = p.Read(0, 56*10) // frames of these records are 56 bytes
	require.NoError(t, err)
	assert.Len(t, recs, 10)
}

// TestFollowWakesInProcessAtOnce ensures a follower blocked at the high
// watermark gets a record appended by another goroutine.
func TestFollowWakesInProcessAtOnce(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(512))
		p := openPartition(t, lg, "events", 1)
		r := p.Follow(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		go func() {
			for i := range 200 {
				_, _ = p.Append(ctx, log.Record{Value: val(i)})
			}
		}()
		var got int64
		for got < 200 {
			recs, err := r.Next(ctx, 1<<20)
			require.NoError(t, err)
			for _, rec := range recs {
				require.Equal(t, got, rec.Offset, "a follower crossing rolls sees every record in order")
				got++
			}
		}
		short, c2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer c2()
		_, err := r.Next(short, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// TestFollowSeesAppendsOfAnotherProcess ensures a reader that opened the
// log read-only follows records a child process appends, across segment
// rolls, and prints how long each took to arrive.
func TestFollowSeesAppendsOfAnotherProcess(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		_, err := lg.CreateTopic("events", 1)
		require.NoError(t, err)
		require.NoError(t, lg.Close())

		ro := openLog(t, dir, log.ReadOnly())
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		r := p.Follow(0)

		const n = 300
		child := helperProcess(t, "append", dir, strconv.Itoa(n))
		require.NoError(t, child.Start())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var lat []time.Duration
		for int64(len(lat)) < n {
			recs, err := r.Next(ctx, 1<<20)
			require.NoError(t, err)
			now := time.Now()
			for _, rec := range recs {
				require.EqualValues(t, len(lat), rec.Offset)
				ns, err := strconv.ParseInt(string(rec.Value), 10, 64)
				require.NoError(t, err)
				lat = append(lat, now.Sub(time.Unix(0, ns)))
			}
		}
		require.NoError(t, child.Wait())
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("cross-process follow latency: p50 %v p99 %v max %v", lat[n/2], lat[n*99/100], lat[n-1])
	})
}

// TestReadOnlyEmptyPartitionStaysOneSegment ensures a read-only reader of
// an empty partition (or one that just rolled to an empty segment) does not
// reopen the empty segment on every look, and later sees appends.
func TestReadOnlyEmptyPartitionStaysOneSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		w := openPartition(t, lg, "events", 1)
		ro := openLog(t, dir, log.ReadOnly())
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		fds := openFDs(t)
		for range 1000 {
			require.EqualValues(t, 0, p.HighWatermark())
		}
		assert.InDelta(t, fds, openFDs(t), 2, "no descriptor leaked per look")
		appendN(t, w, 0, 3)
		assert.EqualValues(t, 3, p.HighWatermark())
		recs, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		assert.Len(t, recs, 3)
	})
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestHighWatermarkIsOnePastTheLastRecordAndNextOffsetIsItsAlias ensures
// HighWatermark is 0 on an empty partition and one past the last record
// after appends, in the writing process and in a read-only one, and that
// the deprecated NextOffset still answers the same.
func TestHighWatermarkIsOnePastTheLastRecordAndNextOffsetIsItsAlias(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		w := openPartition(t, openLog(t, dir, log.WithMode(mode)), "events", 1)
		tp, err := openLog(t, dir, log.ReadOnly()).Topic("events")
		require.NoError(t, err)
		ro, err := tp.Partition(0)
		require.NoError(t, err)
		for _, p := range []*log.Partition{w, ro} {
			assert.Zero(t, p.HighWatermark(), "empty partition")
		}
		appendN(t, w, 0, 5)
		for _, p := range []*log.Partition{w, ro} {
			assert.EqualValues(t, 5, p.HighWatermark())
			assert.Equal(t, p.HighWatermark(), p.NextOffset()) //nolint:staticcheck // the deprecated alias must keep answering
		}
	})
}

// TestFollowWithEndStopsThereAndWaitsBelowIt ensures SetEnd makes a Follow
// reader return only records below the end and io.EOF at it, wait for
// appends while it is below the end (not io.EOF, as a replay would), and
// follow again once the end is removed.
func TestFollowWithEndStopsThereAndWaitsBelowIt(t *testing.T) {
	lg := openLog(t, t.TempDir())
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 5)
	r := p.Follow(0)
	r.SetEnd(3)
	ctx := context.Background()
	recs, err := r.Next(ctx, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	_, err = r.Next(ctx, 1<<20)
	require.ErrorIs(t, err, io.EOF, "at the end")

	r.SetEnd(8) // above the high watermark (5)
	recs, err = r.Next(ctx, 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, []int64{3, 4}, []int64{recs[0].Offset, recs[1].Offset})
	got := make(chan []log.Record, 1)
	go func() {
		recs, _ := r.Next(ctx, 1<<20) // below the end: waits for the append
		got <- recs
	}()
	appendN(t, p, 5, 4)
	recs = <-got
	require.NotEmpty(t, recs)
	require.EqualValues(t, 5, recs[0].Offset)
	for _, rec := range recs {
		require.Less(t, rec.Offset, int64(8), "nothing at or past the end")
	}

	r.SetEnd(-1)
	r.SetPosition(8)
	recs, err = r.Next(ctx, 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, 8, recs[0].Offset, "no end: follows to the high watermark")
}

// TestReaderWaitReturnsOnceARecordIsThereAndReadsNothing ensures Wait
// returns at once for a replay and for a follower with a record to read,
// waits at the high watermark until an append, returns ctx.Err() when its
// context ends first, and moves no position.
func TestReaderWaitReturnsOnceARecordIsThereAndReadsNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		ctx := context.Background()
		_, err := p.Append(ctx, log.Record{Value: val(0)})
		require.NoError(t, err)

		require.NoError(t, p.Replay(1).Wait(ctx), "a replay at its end never waits")
		r := p.Follow(0)
		require.NoError(t, r.Wait(ctx), "a record is there")
		require.Equal(t, int64(0), r.Position(), "Wait reads nothing")

		r = p.Follow(1)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, r.Wait(cancelled), context.Canceled)

		waited := make(chan error, 1)
		go func() { waited <- r.Wait(ctx) }()
		select {
		case err := <-waited:
			t.Fatalf("Wait returned %v at the high watermark", err)
		default:
		}
		_, err = p.Append(ctx, log.Record{Value: val(1)})
		require.NoError(t, err)
		require.NoError(t, <-waited, "the append wakes it")
		recs, err := r.Next(ctx, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 1)
	})
}

// TestReaderSetPositionAfterAStepBackBelowTheLogStartReadsFromThere ensures
// a follower whose epoch check (KIP-320) steps it back below the log start
// (the writer truncated below records it had read, and retention then
// deleted that range) reads from where SetPosition puts it. Before, the
// reader kept the epoch of its last record, stepped back below the start
// again at every Next and returned ErrOffsetOutOfRange forever: a caller
// that applies its reset policy on that error (source.Partition does) spun.
// Found by TestStressEveryPartOfAPartitionAtOnceUnderTheRaceDetector.
func TestReaderSetPositionAfterAStepBackBelowTheLogStartReadsFromThere(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		_, tp, p := retentionLog(t, t.TempDir(), mode, log.RetentionBytes(2048))
		ctx := context.Background()
		appendN(t, p, 0, 10)
		r := p.Follow(0)
		recs, err := r.Next(ctx, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 10, "read in epoch 0")

		require.NoError(t, p.Truncate(5)) // epoch 1 begins at 5, below what r read
		appendN(t, p, 100, 200)
		_, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		start := p.StartOffset()
		require.Greater(t, start, int64(5), "retention deleted the step-back target")

		_, err = r.Next(ctx, 1<<20)
		var oor *log.OffsetOutOfRangeError
		require.ErrorAs(t, err, &oor, "the step back lands below the log start")
		r.SetPosition(oor.StartOffset)
		recs, err = r.Next(ctx, 1<<20)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		require.Equal(t, start, recs[0].Offset)
	})
}
