package log_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// fixedClock is the writer's clock of the timestamp tests.
var fixedClock = time.UnixMilli(1_800_000_000_000) // 2027-01-15T08:00:00Z

func clockAt(t time.Time) log.Option { return log.WithClock(func() time.Time { return t }) }

// TestFutureTimestampCannotPinAgeRetention is the case of issue 10: a topic
// with 7-day retention and three sealed segments of 30-day-old records (files
// last written 30 days ago), the first holding a record stamped ten years
// ahead (written with the bound off, as an older writer would have), and an
// active fourth segment. The future record's segment is aged by its mtime,
// so retention deletes the three and the log start becomes 15; while its
// mtime is recent it stays (and stops the check); with the clock stepped back
// a year nothing is deleted.
func TestFutureTimestampCannotPinAgeRetention(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		now := time.Now()
		old := now.Add(-30 * 24 * time.Hour)
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(5 * frameBytes), log.WithRetentionCheckInterval(0)}
		lg := openLog(t, dir, append(opts, log.WithMaxTimestampAhead(0))...)
		tp, err := lg.CreateTopic("events", 1, log.Retention(7*24*time.Hour))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		for i := range 17 { // 3 segments of 5 records, 2 in the active one
			ts := old.UnixMilli()
			switch {
			case i == 2:
				ts = now.AddDate(10, 0, 0).UnixMilli()
			case i >= 15:
				ts = now.UnixMilli()
			}
			_, err := p.Append(context.Background(), log.Record{Value: val(i), Timestamp: ts})
			require.NoError(t, err, "record %d", i)
		}
		require.NoError(t, lg.Close())
		segs := []string{segPath(dir, "events", 0, 0), segPath(dir, "events", 0, 5), segPath(dir, "events", 0, 10), segPath(dir, "events", 0, 15)}
		require.Equal(t, segs, segments(t, dir, "events", 0))

		lg = openLog(t, dir, opts...) // the default bound from here on
		tp, err = lg.WriteTopic("events")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)

		rep, err := tp.EnforceRetention(now)
		require.NoError(t, err)
		assert.Zero(t, rep.DeletedSegments(), "the future record's segment was written just now (mtime), so it is young")

		for _, s := range segs[:3] {
			require.NoError(t, os.Chtimes(s, old, old))
		}
		rep, err = tp.EnforceRetention(now.AddDate(-1, 0, 0))
		require.NoError(t, err)
		assert.Zero(t, rep.DeletedSegments(), "a clock stepped back a year deletes nothing early")
		assert.Zero(t, p.StartOffset())

		rep, err = tp.EnforceRetention(now)
		require.NoError(t, err)
		assert.Equal(t, 3, rep.DeletedSegments())
		require.Len(t, rep.Partitions, 1)
		assert.Equal(t, segs[:3], rep.Partitions[0].Segments)
		assert.EqualValues(t, 15, rep.Partitions[0].Records)
		assert.EqualValues(t, 15, rep.Partitions[0].StartOffset)
		assert.EqualValues(t, 15, p.StartOffset())
		assert.Equal(t, segs[3:], segments(t, dir, "events", 0))
		all := readAll(t, p)
		require.Len(t, all, 2)
		assert.Equal(t, val(15), all[0].Value)
	})
}

// TestBackgroundRetentionUsesTheLogsClock ensures the background check
// asks the log's clock for the time of the check: with the clock stepped
// back a year, segments of 30-day-old records (by timestamp and by mtime)
// stay.
func TestBackgroundRetentionUsesTheLogsClock(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	checked := make(chan struct{}, 1)
	lg := openLog(t, dir, log.WithSegmentBytes(5*frameBytes), log.WithRetentionCheckInterval(time.Millisecond), log.WithMaxTimestampAhead(0),
		log.WithClock(func() time.Time {
			select {
			case checked <- struct{}{}:
			default:
			}
			return now.AddDate(-1, 0, 0)
		}))
	tp, err := lg.CreateTopic("events", 1, log.Retention(7*24*time.Hour))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := range 12 {
		_, err := p.Append(context.Background(), log.Record{Value: val(i), Timestamp: old.UnixMilli()})
		require.NoError(t, err)
	}
	for _, base := range []int64{0, 5} {
		require.NoError(t, os.Chtimes(segPath(dir, "events", 0, base), old, old))
	}
	for range 3 { // the clock is read at least once per check
		<-checked
	}
	require.NoError(t, lg.Close())
	assert.Len(t, segments(t, dir, "events", 0), 3)
}

// TestAppendTimestampAheadOfTheBoundIsRefused ensures an append stamped two
// hours ahead of the writer's clock fails with a *TimestampAheadError
// giving the timestamp, the clock and the one-hour default bound, and that
// nothing of its call is stored (Partition.AppendAck and
// Topic.AppendBatch), while exactly the bound ahead, the past and zero
// timestamps are stored.
func TestAppendTimestampAheadOfTheBoundIsRefused(t *testing.T) {
	lg := openLog(t, t.TempDir(), clockAt(fixedClock), log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	ahead := fixedClock.Add(2 * time.Hour).UnixMilli()
	ctx := context.Background()

	_, err = p.Append(ctx, log.Record{Value: val(0)}, log.Record{Value: val(1), Timestamp: ahead})
	require.ErrorIs(t, err, log.ErrTimestampAhead)
	var tae *log.TimestampAheadError
	require.ErrorAs(t, err, &tae)
	assert.Equal(t, log.TimestampAheadError{Topic: "events", Partition: 0, Timestamp: ahead, Clock: fixedClock.UnixMilli(), Bound: time.Hour}, *tae)
	for _, want := range []string{fmt.Sprint(ahead), fmt.Sprint(fixedClock.UnixMilli()), "bound of 1h0m0s", "2h0m0s ahead", "topic events partition 0"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Zero(t, p.HighWatermark(), "nothing of the call is stored")

	recs := []log.Record{
		{Key: []byte("a"), Value: val(0)},
		{Key: []byte("b"), Value: val(1), Timestamp: ahead},
		{Key: []byte("c"), Value: val(2)},
	}
	err = tp.AppendBatch(ctx, recs)
	require.ErrorIs(t, err, log.ErrTimestampAhead)
	for i := range 3 {
		q, err := tp.Partition(int32(i))
		require.NoError(t, err)
		assert.Zero(t, q.HighWatermark(), "partition %d: nothing of the batch is stored", i)
	}

	atBound := fixedClock.Add(time.Hour).UnixMilli()
	past := fixedClock.AddDate(-10, 0, 0).UnixMilli()
	_, err = p.Append(ctx, log.Record{Value: val(0), Timestamp: atBound}, log.Record{Value: val(1), Timestamp: past}, log.Record{Value: val(2)})
	require.NoError(t, err)
	got := readAll(t, p)
	require.Len(t, got, 3)
	assert.Equal(t, []int64{atBound, past, fixedClock.UnixMilli()}, []int64{got[0].Timestamp, got[1].Timestamp, got[2].Timestamp})
}

// TestMaxTimestampAheadOption ensures the bound is configurable and that 0
// or a negative bound turns the check off.
func TestMaxTimestampAheadOption(t *testing.T) {
	for _, tc := range []struct {
		bound  time.Duration
		ahead  time.Duration
		refuse bool
	}{
		{5 * time.Minute, 10 * time.Minute, true},
		{5 * time.Minute, 5 * time.Minute, false},
		{0, 24 * 365 * 10 * time.Hour, false},
		{-1, 24 * 365 * 10 * time.Hour, false},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.bound, tc.ahead), func(t *testing.T) {
			lg := openLog(t, t.TempDir(), clockAt(fixedClock), log.WithMaxTimestampAhead(tc.bound), log.WithRetentionCheckInterval(0))
			p := openPartition(t, lg, "events", 1)
			ts := fixedClock.Add(tc.ahead).UnixMilli()
			_, err := p.Append(context.Background(), log.Record{Value: val(0), Timestamp: ts})
			if tc.refuse {
				require.ErrorIs(t, err, log.ErrTimestampAhead)
				assert.Contains(t, err.Error(), "bound of "+tc.bound.String())
				return
			}
			require.NoError(t, err)
			got := readAll(t, p)
			require.Len(t, got, 1)
			assert.Equal(t, ts, got[0].Timestamp)
		})
	}
}

// TestLogAppendTimeStoresTheWritersClock ensures a topic of log append time
// stores the writer's clock whatever the record carries (the record stamped
// two hours ahead included), that the type is stored in topic.json and
// survives reopening, and that CreateTopic with CreateTime switches back
// (removing the field).
func TestLogAppendTimeStoresTheWritersClock(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "events", "topic.json")
	lg := openLog(t, dir, clockAt(fixedClock), log.WithRetentionCheckInterval(0))
	tp, err := lg.CreateTopic("events", 2, log.WithTimestampType(log.LogAppendTime))
	require.NoError(t, err)
	assert.Equal(t, log.LogAppendTime, tp.TimestampType())
	b, err := os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"events","partitions":2,"timestampType":"LogAppendTime","id":"`+tp.ID().String()+`"}`, string(b))

	p, err := tp.Partition(0)
	require.NoError(t, err)
	ctx := context.Background()
	ahead := fixedClock.Add(2 * time.Hour).UnixMilli()
	_, err = p.Append(ctx, log.Record{Value: val(0), Timestamp: ahead}, log.Record{Value: val(1), Timestamp: 1}, log.Record{Value: val(2)})
	require.NoError(t, err)
	require.NoError(t, tp.AppendBatch(ctx, []log.Record{{Value: val(3), Timestamp: ahead}, {Value: val(4), Timestamp: ahead}}))
	for i := range 2 {
		q, err := tp.Partition(int32(i))
		require.NoError(t, err)
		for _, r := range readAll(t, q) {
			assert.Equal(t, fixedClock.UnixMilli(), r.Timestamp, "partition %d offset %d", i, r.Offset)
		}
	}
	require.NoError(t, lg.Close())

	later := fixedClock.Add(time.Minute)
	lg = openLog(t, dir, clockAt(later), log.WithRetentionCheckInterval(0))
	tp, err = lg.WriteTopic("events")
	require.NoError(t, err)
	assert.Equal(t, log.LogAppendTime, tp.TimestampType(), "the type survives reopening")
	p, err = tp.Partition(0)
	require.NoError(t, err)
	off, err := p.Append(ctx, log.Record{Value: val(5), Timestamp: ahead})
	require.NoError(t, err)
	got, err := p.Read(off, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, later.UnixMilli(), got[0].Timestamp)

	_, err = lg.CreateTopic("events", 2, log.WithTimestampType(log.CreateTime))
	require.NoError(t, err)
	assert.Equal(t, log.CreateTime, tp.TimestampType())
	b, err = os.ReadFile(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":1,"name":"events","partitions":2,"id":"`+tp.ID().String()+`"}`, string(b))
	_, err = p.Append(ctx, log.Record{Value: val(6), Timestamp: ahead})
	require.ErrorIs(t, err, log.ErrTimestampAhead, "create time again: the bound applies")

	_, err = lg.CreateTopic("other", 1, log.WithTimestampType(log.TimestampType(7)))
	require.ErrorContains(t, err, "invalid timestamp type 7")
}

// TestTopicJSONTimestampTypeIsChecked ensures a topic.json of an unknown
// timestamp type is ErrCorruptMetadata and one without the field (earlier
// versions) opens as CreateTime.
func TestTopicJSONTimestampTypeIsChecked(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithRetentionCheckInterval(0))
	_, err := lg.CreateTopic("events", 1, log.Retention(time.Hour))
	require.NoError(t, err)
	require.NoError(t, lg.Close())
	meta := filepath.Join(dir, "events", "topic.json")

	require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"events","partitions":1,"retentionMs":3600000}`+"\n"), 0o644))
	lg = openLog(t, dir, log.WithRetentionCheckInterval(0))
	tp, err := lg.Topic("events")
	require.NoError(t, err)
	assert.Equal(t, log.CreateTime, tp.TimestampType())
	require.NoError(t, lg.Close())

	require.NoError(t, os.WriteFile(meta, []byte(`{"version":1,"name":"events","partitions":1,"timestampType":"Sometime"}`+"\n"), 0o644))
	lg = openLog(t, dir, log.WithRetentionCheckInterval(0))
	_, err = lg.Topic("events")
	require.ErrorIs(t, err, log.ErrCorruptMetadata)
	assert.ErrorContains(t, err, `timestamp type "Sometime"`)
}

// TestParseTimestampTypeReadsStringsNames ensures ParseTimestampType and
// String agree and unknown names fail.
func TestParseTimestampTypeReadsStringsNames(t *testing.T) {
	for _, tt := range []log.TimestampType{log.CreateTime, log.LogAppendTime} {
		got, err := log.ParseTimestampType(tt.String())
		require.NoError(t, err)
		assert.Equal(t, tt, got)
	}
	got, err := log.ParseTimestampType("append")
	require.NoError(t, err)
	assert.Equal(t, log.LogAppendTime, got)
	_, err = log.ParseTimestampType("later")
	assert.ErrorContains(t, err, `unknown timestamp type "later"`)
}

// TestLockWriterReadsTheTimestampTypeTheLastWriterStored ensures a topic
// opened for reading, then written, appends with the timestamp type the
// writer before it stored in the meantime, not the one it read at open.
func TestLockWriterReadsTheTimestampTypeTheLastWriterStored(t *testing.T) {
	dir := t.TempDir()
	first := openLog(t, dir, log.WithRetentionCheckInterval(0))
	_, err := first.CreateTopic("events", 1)
	require.NoError(t, err)
	require.NoError(t, first.Close())

	reader := openLog(t, dir, clockAt(fixedClock), log.WithRetentionCheckInterval(0))
	tp, err := reader.Topic("events")
	require.NoError(t, err)
	assert.Equal(t, log.CreateTime, tp.TimestampType())

	other := openLog(t, dir, log.WithRetentionCheckInterval(0))
	_, err = other.CreateTopic("events", 1, log.WithTimestampType(log.LogAppendTime), log.Retention(time.Hour))
	require.NoError(t, err)
	require.NoError(t, other.Close())

	_, off, err := tp.Append(context.Background(), log.Record{Value: val(0), Timestamp: 1})
	require.NoError(t, err)
	assert.Equal(t, log.LogAppendTime, tp.TimestampType())
	assert.Equal(t, time.Hour, tp.Retention().Age)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	got, err := p.Read(off, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, fixedClock.UnixMilli(), got[0].Timestamp)
}

// TestTimestampAheadErrorSaysCenturiesInDays ensures the error of a
// timestamp centuries ahead (a year misread as 2999) says how far ahead in
// days, instead of a time.Duration that overflowed to a negative span.
func TestTimestampAheadErrorSaysCenturiesInDays(t *testing.T) {
	far := time.Date(2999, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	e := &log.TimestampAheadError{Topic: "ev", Partition: 0, Timestamp: far, Clock: fixedClock.UnixMilli(), Bound: time.Hour}
	assert.Contains(t, e.Error(), "(2999-01-01T00:00:00Z) is 355001 days ahead of the writer's clock")
	assert.NotContains(t, e.Error(), "is -")
}
