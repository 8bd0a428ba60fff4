package log

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEpochHistoryBeginAndEndOffset ensures new epochs replace the ones
// they truncate and end offsets follow Kafka's OffsetForLeaderEpoch.
func TestEpochHistoryBeginAndEndOffset(t *testing.T) {
	var e epochs
	e = e.begin(0)   // epoch 0 at 0
	e = e.begin(100) // epoch 1 at 100
	e = e.begin(100) // epoch 2 at 100: epoch 1 appended nothing, replaced
	e = e.begin(95)  // epoch 3 at 95: a truncation below epoch 2's start
	require.Equal(t, epochs{{0, 0}, {3, 95}}, e)

	end, ok := e.endOffset(0, 120)
	assert.True(t, ok)
	assert.EqualValues(t, 95, end, "epoch 0 ended where epoch 3 began")
	end, _ = e.endOffset(1, 120)
	assert.EqualValues(t, 95, end, "a dropped epoch ends where its successor begins")
	end, _ = e.endOffset(3, 120)
	assert.EqualValues(t, 120, end, "the latest epoch ends at the log end")
	end, _ = e.endOffset(9, 120)
	assert.EqualValues(t, 120, end)
	_, ok = epochs{{2, 50}}.endOffset(1, 120)
	assert.False(t, ok, "older than the history")

	got, err := parseEpochs(e.encode())
	require.NoError(t, err)
	assert.Equal(t, e, got)
	for _, bad := range []string{"", "1\n0\n", "0\n2\n0 0\n", "0\n1\nx y\n", "0\n2\n1 10\n0 20\n", "0\n0\nextra\n"} {
		_, err := parseEpochs([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// TestReadOnlyRefreshResetsOnlyOnANewEpochBelowWhatItSaw ensures a read-only
// partition keeps its segments across reads while the writer appends in one
// epoch (no re-walk per Read), and walks them again once the writer
// truncates below what it had read.
func TestReadOnlyRefreshResetsOnlyOnANewEpochBelowWhatItSaw(t *testing.T) {
	dir := t.TempDir()
	lg, err := Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("t", 1)
	require.NoError(t, err)
	w, _ := tp.Partition(0)
	ctx := t.Context()
	for i := range 10 {
		_, err := w.Append(ctx, Record{Value: []byte{byte(i)}})
		require.NoError(t, err)
	}
	ro, err := Open(dir, ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	rtp, err := ro.Topic("t")
	require.NoError(t, err)
	r, _ := rtp.Partition(0)
	active := func() *segment {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return r.segs.active()
	}
	seg := active()
	for i := range 5 {
		recs, err := r.Read(int64(i), 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 10-i)
		require.Same(t, seg, active(), "read %d re-walked the partition", i)
	}
	_, err = w.Append(ctx, Record{Value: []byte{10}})
	require.NoError(t, err)
	recs, err := r.Read(10, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Same(t, seg, active(), "an append in the same epoch re-walked the partition")

	require.NoError(t, w.Truncate(4))
	_, err = w.Append(ctx, Record{Value: []byte{40}})
	require.NoError(t, err)
	recs, err = r.Read(4, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, []byte{40}, recs[0].Value)
	require.NotSame(t, seg, active(), "a truncation below what the reader saw must re-walk")
	require.Equal(t, int32(1), recs[0].Epoch)
}
