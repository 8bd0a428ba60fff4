package log

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEpochCacheReaderSeesWritersEpochsAndRewrites ensures an epochCache
// works on its own, over its directory only: the epochs one cache begins
// (at an open, at a Truncate) are in the file another cache reloads, and
// the reloading one calls the history rewritten exactly when a new epoch
// starts below the end it walked to.
func TestEpochCacheReaderSeesWritersEpochsAndRewrites(t *testing.T) {
	dir := t.TempDir()
	w := &epochCache{topic: "t", id: 0, dir: dir}
	r := &epochCache{topic: "t", id: 0, dir: dir}

	require.NoError(t, r.reloadLocked(), "no file yet is no error")
	require.EqualValues(t, -1, r.latestLocked(), "no file: no epoch")

	require.NoError(t, w.beginLocked(0))
	require.EqualValues(t, 0, w.current())
	require.NoError(t, r.reloadLocked())
	require.EqualValues(t, 0, r.latestLocked(), "the reader missed epoch 0")

	// The writer reopens at 10, the end the reader walked to: the new
	// epoch continues the log.
	prev := r.latestLocked()
	require.NoError(t, w.beginLocked(10))
	require.EqualValues(t, 1, w.current())
	require.NoError(t, r.reloadLocked())
	require.EqualValues(t, 1, r.latestLocked(), "the reader missed epoch 1")
	require.False(t, r.rewrittenLocked(prev, 10), "an epoch beginning at the walked end is no rewrite")

	// A Truncate to 5, below the walked end 10.
	prev = r.latestLocked()
	require.NoError(t, w.truncateLocked(5))
	require.EqualValues(t, 2, w.current())
	require.NoError(t, r.reloadLocked())
	require.EqualValues(t, 2, r.latestLocked(), "the reader missed the truncation's epoch")
	require.True(t, r.rewrittenLocked(prev, 10), "an epoch beginning below the walked end is a rewrite")
	require.False(t, r.rewrittenLocked(r.latestLocked(), 10), "no new epoch since the last load")

	require.EqualValues(t, 5, r.stepBackLocked(10, 1), "a position past epoch 1's end steps back to epoch 2's start")
	require.EqualValues(t, 4, r.stepBackLocked(4, 1))

	// A third cache, opening as a writer, continues the file's history.
	w2 := &epochCache{topic: "t", id: 0, dir: dir}
	require.NoError(t, w2.beginLocked(5))
	require.EqualValues(t, 3, w2.current(), "a writer's open begins after the file's latest epoch")
}
