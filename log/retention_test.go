package log_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// The records appendN writes take 56 bytes on disk each, so a 1024-byte
// segment holds 18 of them (1008 bytes) and rolls on the 19th.
const (
	frameBytes = 56
	perSegment = 18
)

// retentionLog opens a log with 1 KiB segments and no background check, and
// creates topic "events" (one partition) with opts.
func retentionLog(t *testing.T, dir string, mode log.Mode, opts ...log.TopicOption) (*log.Log, *log.Topic, *log.Partition) {
	t.Helper()
	lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(1024), log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("events", 1, opts...)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return lg, tp, p
}

// requireOutOfRangeBelow checks that reading offset from p fails with an
// *OffsetOutOfRangeError carrying start as the log start offset.
func requireOutOfRangeBelow(t *testing.T, p *log.Partition, offset, start int64) {
	t.Helper()
	_, err := p.Read(offset, 1<<20)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	var oor *log.OffsetOutOfRangeError
	require.ErrorAs(t, err, &oor)
	assert.Equal(t, offset, oor.Offset)
	assert.Equal(t, start, oor.StartOffset)
}

// openDescriptorsTo returns the descriptors of this process open on path,
// deleted or not, as /proc/self/fd shows them.
func openDescriptorsTo(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.TrimSuffix(target, " (deleted)") == path {
			n++
		}
	}
	return n
}

// TestRetentionBytesKeepsTheBoundAndNeverTheActiveSegment ensures retention
// by size deletes the oldest segments for as long as what remains holds the
// bound (Kafka's rule), that a bound of 0 leaves only the active segment,
// and that reads below the new log start fail with its offset.
func TestRetentionBytesKeepsTheBoundAndNeverTheActiveSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg, tp, p := retentionLog(t, dir, mode, log.RetentionBytes(2048))
		appendN(t, p, 0, 200) // 11 full segments of 18 and an active one of 2
		require.Len(t, segments(t, dir, "events", 0), 12)

		rep, err := tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		// Kept: the active segment (112 bytes) and two full ones (2128 >= 2048);
		// one full segment fewer would hold 1120 < 2048.
		require.Len(t, rep.Partitions, 1)
		pr := rep.Partitions[0]
		assert.Equal(t, "events", rep.Topic)
		assert.Len(t, pr.Segments, 9)
		assert.Equal(t, segPath(dir, "events", 0, 0), pr.Segments[0])
		assert.EqualValues(t, 9*perSegment, pr.Records)
		assert.EqualValues(t, 9*perSegment*frameBytes, pr.Bytes)
		assert.EqualValues(t, 9*perSegment, pr.StartOffset)
		assert.Equal(t, 9, rep.DeletedSegments())
		assert.EqualValues(t, pr.Bytes, rep.DeletedBytes())
		assert.EqualValues(t, 9*perSegment, p.StartOffset())
		assert.EqualValues(t, 200, p.HighWatermark())
		assert.Len(t, segments(t, dir, "events", 0), 3)
		for _, path := range pr.Segments {
			assert.NoFileExists(t, path)
		}

		requireOutOfRangeBelow(t, p, 0, 9*perSegment)
		requireOutOfRangeBelow(t, p, 9*perSegment-1, 9*perSegment)
		all := readAll(t, p)
		require.Len(t, all, 200-9*perSegment)
		for i, r := range all {
			require.EqualValues(t, 9*perSegment+i, r.Offset)
			require.Equal(t, val(9*perSegment+i), r.Value)
		}

		rep, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		assert.Empty(t, rep.Partitions, "a second check finds nothing more to delete")

		_, err = lg.CreateTopic("events", 1, log.RetentionBytes(0))
		require.NoError(t, err)
		rep, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		require.Len(t, rep.Partitions, 1)
		assert.Len(t, rep.Partitions[0].Segments, 2)
		assert.Equal(t, []string{segPath(dir, "events", 0, 11*perSegment)}, segments(t, dir, "events", 0),
			"the active segment stays, even past the bound")
		assert.EqualValues(t, 11*perSegment, p.StartOffset())
	})
}

// TestRetentionNeverMovesNextOffsetBackwardsAcrossRestart ensures that a
// partition emptied down to its active segment by retention (by size and by
// age, with every record expired) reopens at the same next offset and log
// start offset and appends after its old end.
func TestRetentionNeverMovesNextOffsetBackwardsAcrossRestart(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg, tp, p := retentionLog(t, dir, mode, log.RetentionBytes(0), log.Retention(time.Millisecond))
		appendN(t, p, 0, 3*perSegment+1)
		rep, err := tp.EnforceRetention(time.Now().Add(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 3, rep.DeletedSegments())
		require.EqualValues(t, 3*perSegment, p.StartOffset())
		require.EqualValues(t, 3*perSegment+1, p.HighWatermark())

		for range 2 {
			lg2, p2 := reopen(t, lg, log.WithMode(mode), log.WithSegmentBytes(1024), log.WithRetentionCheckInterval(0))
			assert.EqualValues(t, 3*perSegment, p2.StartOffset())
			assert.EqualValues(t, 3*perSegment+1, p2.HighWatermark())
			tp2, err := lg2.Topic("events")
			require.NoError(t, err)
			rep, err := tp2.EnforceRetention(time.Now().Add(time.Hour))
			require.NoError(t, err)
			assert.Zero(t, rep.DeletedSegments(), "the active segment is never deleted, expired or not")
			lg = lg2
		}
		lg2, p2 := reopen(t, lg, log.WithMode(mode), log.WithSegmentBytes(1024), log.WithRetentionCheckInterval(0))
		off, err := p2.Append(context.Background(), log.Record{Value: []byte("after")})
		require.NoError(t, err)
		assert.EqualValues(t, 3*perSegment+1, off, "appends continue after the old end")
		require.NoError(t, lg2.Close())
	})
}

// TestRetentionByAgeUsesTheNewestTimestampOfASegment ensures a segment is
// deleted when its newest record is older than the bound, that one recent
// record (even out of order) keeps its segment and stops the check there,
// and that timestamps recovered by reopening decide the same way.
func TestRetentionByAgeUsesTheNewestTimestampOfASegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		now := time.Now()
		lg, tp, p := retentionLog(t, dir, mode, log.Retention(time.Hour))
		old := now.Add(-2 * time.Hour).UnixMilli()
		for i := range 4*perSegment + 1 {
			ts := old
			if i == 2*perSegment+5 {
				ts = now.Add(-time.Minute).UnixMilli() // a recent record in the third segment
			}
			_, err := p.Append(context.Background(), log.Record{Value: val(i), Timestamp: ts})
			require.NoError(t, err)
		}
		rep, err := tp.EnforceRetention(now)
		require.NoError(t, err)
		assert.Equal(t, 2, rep.DeletedSegments(), "the third segment's newest record is a minute old")
		assert.EqualValues(t, 2*perSegment, p.StartOffset())
		assert.Equal(t, time.Hour, tp.Retention().Age)
		assert.EqualValues(t, -1, tp.Retention().Bytes)

		lg, p = reopen(t, lg, log.WithMode(mode), log.WithSegmentBytes(1024), log.WithRetentionCheckInterval(0))
		tp, err = lg.Topic("events")
		require.NoError(t, err)
		assert.Equal(t, time.Hour, tp.Retention().Age, "the policy is stored in topic.json")
		rep, err = tp.EnforceRetention(now)
		require.NoError(t, err)
		assert.Zero(t, rep.DeletedSegments())
		rep, err = tp.EnforceRetention(now.Add(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 2, rep.DeletedSegments(), "an hour later the third and fourth segments are old too")
		assert.EqualValues(t, 4*perSegment, p.StartOffset())
	})
}

// TestReadInADeletedSegmentFinishesWithItsBytes ensures a read paused inside
// a segment while retention unlinks it returns that segment's records
// intact, that the descriptor is closed by the read, not before, and that
// the next read there is out of range with the new log start offset.
func TestReadInADeletedSegmentFinishesWithItsBytes(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		_, tp, p := retentionLog(t, dir, mode, log.RetentionBytes(0))
		appendN(t, p, 0, 5*perSegment)
		seg0 := segPath(dir, "events", 0, 0)

		paused, resume := make(chan struct{}), make(chan struct{})
		restore := log.SetBeforeSegmentRead(func(rp *log.Partition, base, offset int64) {
			if rp == p && base == 0 && offset == 5 {
				close(paused)
				<-resume
			}
		})
		defer restore()
		type result struct {
			recs []log.Record
			err  error
		}
		done := make(chan result, 1)
		go func() {
			recs, err := p.Read(5, 1<<20)
			done <- result{recs, err}
		}()
		<-paused

		// Appends are not blocked by the read in flight.
		appendN(t, p, 5*perSegment, 1)
		rep, err := tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		assert.Equal(t, 5, rep.DeletedSegments())
		assert.NoFileExists(t, seg0)
		assert.Equal(t, 1, openDescriptorsTo(t, seg0), "the paused read still holds the deleted segment")

		close(resume)
		res := <-done
		require.NoError(t, res.err)
		require.Len(t, res.recs, perSegment-5)
		for i, r := range res.recs {
			require.EqualValues(t, 5+i, r.Offset)
			require.Equal(t, val(5+i), r.Value)
		}
		assert.Zero(t, openDescriptorsTo(t, seg0), "the read closed the last descriptor")
		requireOutOfRangeBelow(t, p, 5, 5*perSegment)
	})
}

// TestReadOnlyReaderNoticesDeletedSegments ensures a log opened read-only
// (another process, as far as descriptors and state go) reports the writer's
// new log start offset after retention, fails reads below it, and lets go of
// the deleted files: at once for a read in its first segment, within a
// second for a follower at the tail, and also when every segment it knew is
// gone.
func TestReadOnlyReaderNoticesDeletedSegments(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		_, tp, w := retentionLog(t, dir, mode, log.RetentionBytes(0))
		appendN(t, w, 0, 3*perSegment+1)

		ro := openLog(t, dir, log.ReadOnly())
		rtp, err := ro.Topic("events")
		require.NoError(t, err)
		assert.EqualValues(t, 0, rtp.Retention().Bytes, "a reader sees the stored policy")
		_, err = rtp.EnforceRetention(time.Now())
		require.ErrorIs(t, err, log.ErrReadOnly)
		r, err := rtp.Partition(0)
		require.NoError(t, err)
		require.EqualValues(t, 0, r.StartOffset())
		require.Len(t, readAll(t, r), 3*perSegment+1)

		_, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		seg0 := segPath(dir, "events", 0, 0)
		require.Equal(t, 1, openDescriptorsTo(t, seg0), "only the reader still holds the deleted segment")

		requireOutOfRangeBelow(t, r, 0, 3*perSegment)
		assert.EqualValues(t, 3*perSegment, r.StartOffset())
		assert.Zero(t, openDescriptorsTo(t, seg0))
		recs, err := r.Read(3*perSegment, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, val(3*perSegment), recs[0].Value)

		// A follower at the tail never reads the first segment; the reader still
		// lets go of deleted files within deletionCheckInterval (1 s).
		appendN(t, w, 3*perSegment+1, 2*perSegment)
		require.EqualValues(t, 5*perSegment+1, r.HighWatermark())
		_, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		seg3 := segPath(dir, "events", 0, 3*perSegment)
		require.Eventually(t, func() bool {
			r.HighWatermark()
			return openDescriptorsTo(t, seg3) == 0
		}, 5*time.Second, 10*time.Millisecond)
		assert.EqualValues(t, 5*perSegment, r.StartOffset())

		// The writer rolls past every segment the reader knows and deletes them.
		appendN(t, w, 5*perSegment+1, 3*perSegment)
		_, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		assert.EqualValues(t, 8*perSegment, r.StartOffset())
		assert.EqualValues(t, 8*perSegment+1, r.HighWatermark())
		recs, err = r.Read(8*perSegment, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, val(8*perSegment), recs[0].Value)
		requireOutOfRangeBelow(t, r, 5*perSegment, 8*perSegment)
	})
}

// TestBackgroundRetentionRunsOnScheduleAndStopsOnClose ensures a writable
// log applies retention every WithRetentionCheckInterval, reports it to the
// observer, and that Close stops it.
func TestBackgroundRetentionRunsOnScheduleAndStopsOnClose(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		var mu sync.Mutex
		var reports []log.RetentionReport
		observed := make(chan struct{}, 100)
		lg, err := log.Open(t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(1024),
			log.WithRetentionCheckInterval(5*time.Millisecond),
			log.WithRetentionObserver(func(rep log.RetentionReport, err error) {
				assert.NoError(t, err)
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
				observed <- struct{}{}
			}))
		require.NoError(t, err)
		tp, err := lg.CreateTopic("events", 1, log.RetentionBytes(0))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		appendN(t, p, 0, 2*perSegment+1)
		select {
		case <-observed:
		case <-time.After(10 * time.Second):
			t.Fatal("no background retention check within 10 s")
		}
		require.Eventually(t, func() bool { return p.StartOffset() == 2*perSegment }, 10*time.Second, time.Millisecond)
		require.NoError(t, lg.Close())
		mu.Lock()
		n := len(reports)
		deleted := 0
		for _, r := range reports {
			deleted += r.DeletedSegments()
		}
		mu.Unlock()
		assert.Equal(t, 2, deleted)
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		assert.Len(t, reports, n, "no check runs after Close")
		mu.Unlock()
	})
}

// TestRetentionCheckIntervalOption ensures a negative interval fails Open
// with a message naming it.
func TestRetentionCheckIntervalOption(t *testing.T) {
	_, err := log.Open(t.TempDir(), log.WithRetentionCheckInterval(-time.Second))
	require.ErrorContains(t, err, "retention check interval -1s")
}

// TestTopicJSONStoresRetentionAndReadsTheFirstFormat ensures the policy is
// written to topic.json only when bounded, that options given to CreateTopic
// of an existing topic replace only themselves, and that a topic.json
// without retention fields (the first format) opens as unlimited.
func TestTopicJSONStoresRetentionAndReadsTheFirstFormat(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "events", "topic.json")
	lg := openLog(t, dir)
	tp, err := lg.CreateTopic("events", 2)
	require.NoError(t, err)
	b, err := os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"events","partitions":2,"id":"`+tp.ID().String()+`"}`, string(b))
	assert.Equal(t, log.RetentionPolicy{Bytes: -1, Age: -1}, tp.Retention())

	_, err = lg.CreateTopic("events", 2, log.RetentionBytes(4096), log.Retention(90*time.Minute))
	require.NoError(t, err)
	b, err = os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"events","partitions":2,"retentionBytes":4096,"retentionMs":5400000,"id":"`+tp.ID().String()+`"}`, string(b))
	assert.Equal(t, log.RetentionPolicy{Bytes: 4096, Age: 90 * time.Minute}, tp.Retention())

	_, err = lg.CreateTopic("events", 2, log.Retention(-1))
	require.NoError(t, err)
	assert.Equal(t, log.RetentionPolicy{Bytes: 4096, Age: -1}, tp.Retention(), "only the option given changes")

	require.NoError(t, lg.Close())
	lg = openLog(t, dir)
	tp, err = lg.Topic("events")
	require.NoError(t, err)
	assert.Equal(t, log.RetentionPolicy{Bytes: 4096, Age: -1}, tp.Retention())
	require.NoError(t, lg.Close())

	require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"events","partitions":2}`+"\n"), 0o644))
	lg = openLog(t, dir)
	tp, err = lg.CreateTopic("events", 2)
	require.NoError(t, err)
	assert.Equal(t, log.RetentionPolicy{Bytes: -1, Age: -1}, tp.Retention())
	rep, err := tp.EnforceRetention(time.Now())
	require.NoError(t, err)
	assert.Empty(t, rep.Partitions)
}

// TestReadsRacingTruncateNeverSeeTornFrames ensures reads, which pread
// without the partition lock, never return a torn or corrupt frame while
// Truncate cuts and appends rewrite the same bytes: a read that overlapped a
// cut reads again.
func TestReadsRacingTruncateNeverSeeTornFrames(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(1024), log.WithRetentionCheckInterval(0))
		p := openPartition(t, lg, "events", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					recs, err := p.Read(0, 1<<20)
					if errors.Is(err, log.ErrOffsetOutOfRange) {
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					for i, r := range recs {
						if !assert.EqualValues(t, i, r.Offset) ||
							!assert.True(t, strings.HasSuffix(string(r.Value), fmt.Sprintf("-o%d", i)), "value %q at %d", r.Value, i) {
							return
						}
					}
				}
			})
		}
		for g := 0; ctx.Err() == nil && g < 300; g++ {
			for i := range 30 {
				_, err := p.Append(ctx, log.Record{Value: []byte(fmt.Sprintf("g%d-o%d", g, i))})
				if ctx.Err() != nil {
					break
				}
				require.NoError(t, err)
			}
			require.NoError(t, p.Truncate(0))
		}
		cancel()
		wg.Wait()
	})
}
