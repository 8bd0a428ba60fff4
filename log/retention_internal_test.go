package log

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFrameTimestampReadsTheBodysTimestamp ensures the shortcut appends use
// to track a segment's newest timestamp reads the same bytes as decodeBody,
// whatever the key, value and headers: a change to the body layout must
// change both.
func TestFrameTimestampReadsTheBodysTimestamp(t *testing.T) {
	for i, r := range []Record{
		{Timestamp: 1},
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 1_700_000_000_123},
		{Key: nil, Value: nil, Timestamp: -5, Headers: []Header{{Key: "h", Value: []byte("x")}}},
	} {
		frame := appendFrame(nil, &r, int64(i), 3)
		var got Record
		bodyLen, _ := frameHeader(frame)
		require.NoError(t, decodeBody(frame[frameHeaderBytes:frameHeaderBytes+int(bodyLen)], &got))
		assert.Equal(t, r.Timestamp, got.Timestamp)
		assert.Equal(t, r.Timestamp, frameTimestamp(frame))
	}
}

// TestNewestTimestampOfAnUnwalkedSegment ensures a segment whose newest
// timestamp is not known (opened without walking its frames) finds it by
// walking a copy, leaving the segment's own state alone.
func TestNewestTimestampOfAnUnwalkedSegment(t *testing.T) {
	for _, mode := range []Mode{ModeFile, ModeMmap} {
		lg, err := Open(t.TempDir(), WithMode(mode), WithSegmentBytes(1024), WithRetentionCheckInterval(0))
		require.NoError(t, err)
		tp, err := lg.CreateTopic("events", 1)
		require.NoError(t, err)
		p, _ := tp.Partition(0)
		for i := range 40 {
			_, err := p.Append(context.Background(), Record{Value: []byte("0123456789"), Timestamp: int64(1000 + i%7*100)})
			require.NoError(t, err)
		}
		s := p.segs.at(0)
		require.True(t, s.hasTimestamp)
		assert.EqualValues(t, 1600, s.maxTimestamp)
		size, next, index := s.size, s.next, len(s.index)
		s.hasTimestamp, s.maxTimestamp = false, 0
		ts, ok, err := s.newestTimestamp()
		require.NoError(t, err)
		assert.True(t, ok)
		assert.EqualValues(t, 1600, ts)
		assert.Equal(t, []int64{size, next, int64(index)}, []int64{s.size, s.next, int64(len(s.index))})
		require.NoError(t, lg.Close())
	}
}

// TestCloseStopsTheBackgroundCheck ensures Close returns only after the
// retention goroutine has, and that an interval of 0 starts none.
func TestCloseStopsTheBackgroundCheck(t *testing.T) {
	lg, err := Open(t.TempDir(), WithRetentionCheckInterval(time.Millisecond))
	require.NoError(t, err)
	require.NotNil(t, lg.ret.done)
	require.NoError(t, lg.Close())
	select {
	case <-lg.ret.done:
	default:
		t.Fatal("the retention goroutine still runs after Close")
	}
	require.NoError(t, lg.Close(), "Close stays idempotent")

	lg, err = Open(t.TempDir(), WithRetentionCheckInterval(0))
	require.NoError(t, err)
	assert.Nil(t, lg.ret.done)
	require.NoError(t, lg.Close())

	lg, err = Open(t.TempDir(), ReadOnly())
	require.NoError(t, err)
	assert.Nil(t, lg.ret.done, "a read-only log deletes nothing")
	require.NoError(t, lg.Close())
}
