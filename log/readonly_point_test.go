package log_test

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestReadOnlyOpenFailsOnEndBelowRecoveryPoint ensures a read-only open of
// a partition that ends below its recovery point (50 bytes cut off the
// segment, its last frame cut at a frame boundary, its last segment or
// every segment deleted: records known to be on disk are gone) fails with
// the *CorruptError a writer's open returns, naming the same segment, byte
// position and offset, instead of opening shorter without a word; and that
// Verify reports the same problem (it missed a deleted last segment).
func TestReadOnlyOpenFailsOnEndBelowRecoveryPoint(t *testing.T) {
	damages := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"50 bytes cut", func(t *testing.T, dir string) {
			segs := segments(t, dir, "events", 0)
			last := segs[len(segs)-1]
			require.NoError(t, os.Truncate(last, fileSize(t, last)-50))
		}},
		{"last frame cut at its start", func(t *testing.T, dir string) {
			segs := segments(t, dir, "events", 0)
			last := segs[len(segs)-1]
			starts := frameStarts(t, last)
			require.NoError(t, os.Truncate(last, starts[len(starts)-1]))
		}},
		{"last segment deleted", func(t *testing.T, dir string) {
			segs := segments(t, dir, "events", 0)
			require.NoError(t, os.Remove(segs[len(segs)-1]))
		}},
		{"every segment deleted", func(t *testing.T, dir string) {
			for _, s := range segments(t, dir, "events", 0) {
				require.NoError(t, os.Remove(s))
			}
		}},
	}
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		for _, d := range damages {
			t.Run(d.name, func(t *testing.T) {
				dir := t.TempDir()
				opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024)}
				lg := openLog(t, dir, opts...)
				appendN(t, openPartition(t, lg, "events", 1), 0, 50)
				require.NoError(t, lg.Close()) // Close syncs and saves the point at the end
				d.damage(t, dir)

				_, roErr := openReadOnlyPartition(t, dir)
				require.ErrorIs(t, roErr, log.ErrCorrupt, "a read-only open must not open shorter")
				var ro *log.CorruptError
				require.ErrorAs(t, roErr, &ro)
				assert.Regexp(t, `recovery point.*\b50\b`, ro.Reason)

				var w *log.CorruptError
				require.ErrorAs(t, openTopicErr(t, dir, opts...), &w)
				assert.Equal(t, *w, *ro, "the reader's error is the writer's")

				rep, err := log.Verify(dir)
				require.NoError(t, err)
				require.Len(t, rep.Problems, 1)
				assert.Equal(t, *w, *rep.Problems[0], "Verify's problem is the writer's error")
			})
		}
	})
}

// TestReadOnlyOpenBesideTruncateIsNotCorrupt ensures a read-only open that
// read the recovery point before a writer in another Log truncated the
// partition, and walked the segment after the cut, does not take the end
// below that old point for damage: Truncate lowered the point first, and the
// reader looks at it again before it judges.
func TestReadOnlyOpenBesideTruncateIsNotCorrupt(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		appendN(t, openPartition(t, lg, "events", 1), 0, 20)
		require.NoError(t, lg.Close())
		_, _, off := recoveryPoint(t, dir, "events", 0)
		require.EqualValues(t, 20, off)
		_, w := openEvents(t, dir, log.WithMode(mode), log.WithRetentionCheckInterval(0))

		// The reader's first listing comes after its load of the point:
		// the writer truncates there, between the load and the walk.
		var once sync.Once
		var truncErr error
		restore := log.SetListSegments(func(bases []int64) []int64 {
			once.Do(func() { truncErr = w.Truncate(10) })
			return bases
		})
		defer restore()
		p, err := openReadOnlyPartition(t, dir)
		require.NoError(t, truncErr)
		require.NoError(t, err)
		assert.EqualValues(t, 10, p.HighWatermark())
	})
}
