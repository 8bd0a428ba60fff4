package log

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecoveryPointsDropAPointNotedAcrossALowering drives recoveryPoints on
// its own, without a partition: a point read before lowerPoint (a
// Truncate) is not saved after it, even when forced, and a point read after
// it is.
func TestRecoveryPointsDropAPointNotedAcrossALowering(t *testing.T) {
	dir := t.TempDir()
	rp := &recoveryPoints{dir: dir}
	assert.Equal(t, point{}, rp.begin())

	high := point{Segment: 0, Position: 560, Offset: 10}
	stale := rp.lowerings()
	require.NoError(t, rp.notePoint(high, stale, true))
	saved, err := loadRecoveryPoint(dir)
	require.NoError(t, err)
	assert.Equal(t, high, saved)

	low := point{Segment: 0, Position: 280, Offset: 5}
	require.NoError(t, rp.lowerPoint(low))
	require.NoError(t, rp.notePoint(high, stale, true), "a point from before the lowering is dropped, not an error")
	saved, err = loadRecoveryPoint(dir)
	require.NoError(t, err)
	assert.Equal(t, low, saved, "the lowered point stays")

	higher := point{Segment: 0, Position: 336, Offset: 6}
	require.NoError(t, rp.notePoint(higher, rp.lowerings(), true))
	saved, err = loadRecoveryPoint(dir)
	require.NoError(t, err)
	assert.Equal(t, higher, saved)
	assert.NoError(t, rp.saveErr())
}
