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
