package log_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// replaceFile writes b to path as the writer does (temporary file, rename),
// so a reader's stat sees a new file.
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".test-tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// TestReadOnlyReadRetriesWhenTheWriterTruncatesTheFramesItVerified pins
// the interleaving a read-only follower lost in the stress test: its Read
// takes the segment and the end of the frames it verified, and before its
// pread the writer (another process: Truncate moves no generation of the
// reader's) cuts below that end and appends frames of other sizes at the
// same offsets. The pread then finds frames that changed after they were
// verified; it is the writer's rewrite, told by the new epoch, not damage,
// so the Read reads again and returns the new records.
//
// "epoch recorded" is a Truncate that finished before the pread (the epoch
// file is there at the first look). "epoch not yet recorded" is the pread
// between the Truncate's cut and its epoch file (it writes the epoch after
// it cuts): the Read looks again readOnlyRecheck later, when the Truncate
// has finished (the recheck hook writes the epoch file back).
func TestReadOnlyReadRetriesWhenTheWriterTruncatesTheFramesItVerified(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := "epoch recorded"
		if late {
			name = "epoch not yet recorded"
		}
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				dir := t.TempDir()
				lg, err := log.Open(dir, log.WithMode(mode), log.CreateIfMissing())
				require.NoError(t, err)
				defer lg.Close()
				tp, err := lg.CreateTopic("events", 1)
				require.NoError(t, err)
				p, err := tp.Partition(0)
				require.NoError(t, err)
				ctx := context.Background()
				for i := range 10 {
					_, err := p.Append(ctx, log.Record{Value: bytes.Repeat([]byte{byte(i)}, 20)})
					require.NoError(t, err)
				}
				rp, err := openReadOnlyPartition(t, dir)
				require.NoError(t, err)
				recs, err := rp.Read(0, 1<<20)
				require.NoError(t, err)
				require.Len(t, recs, 10) // verified up to offset 10

				epochPath := filepath.Join(dir, "events", "0", "leader-epoch-checkpoint")
				var newEpochs []byte
				var once sync.Once
				defer log.SetBeforeSegmentRead(func(q *log.Partition, _, _ int64) {
					if q != rp {
						return
					}
					once.Do(func() {
						old, err := os.ReadFile(epochPath)
						require.NoError(t, err)
						require.NoError(t, p.Truncate(5))
						for i := range 5 { // other sizes at offsets 5 to 9
							_, err := p.Append(ctx, log.Record{Value: bytes.Repeat([]byte{byte(100 + i)}, 60)})
							require.NoError(t, err)
						}
						if late {
							newEpochs, err = os.ReadFile(epochPath)
							require.NoError(t, err)
							replaceFile(t, epochPath, old) // as it was before the Truncate recorded its epoch
						}
					})
				})()
				rechecked := false
				defer log.SetReadOnlyRecheck(func() {
					if late && !rechecked {
						rechecked = true
						replaceFile(t, epochPath, newEpochs) // the Truncate finishes
					}
				})()

				recs, err = rp.Read(0, 1<<20)
				require.NoError(t, err)
				require.Len(t, recs, 10)
				for i, r := range recs {
					require.Equal(t, int64(i), r.Offset)
					want := bytes.Repeat([]byte{byte(i)}, 20)
					if i >= 5 {
						want = bytes.Repeat([]byte{byte(100 + i - 5)}, 60)
					}
					require.Equal(t, want, r.Value, "offset %d", i)
				}
				require.Equal(t, late, rechecked, "waited for the epoch only when it was not there yet")
			})
		})
	}
}

// TestReadOnlyIndexBuildRetriesWhenTheWriterTruncatedTheTrustedSegment pins
// the other interleaving of the stress test's read-only follower: a sealed
// segment it trusted by its seal marker (its index built on first read)
// that the writer truncated into and appended to before that first read.
// The build then finds frames that end elsewhere than the marker said: the
// writer's rewrite, told by its new epoch, not damage, so the Read looks
// again and returns the new records.
func TestReadOnlyIndexBuildRetriesWhenTheWriterTruncatedTheTrustedSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		ctx := context.Background()
		lg, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(1024), log.CreateIfMissing())
		require.NoError(t, err)
		tp, err := lg.CreateTopic("events", 1)
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		for p.HighWatermark() < 30 { // 64 B frames: segment 0 holds 16, sealed with a marker
			_, err := p.Append(ctx, log.Record{Value: bytes.Repeat([]byte{1}, 20)})
			require.NoError(t, err)
		}
		require.NoError(t, lg.Close()) // the sealers have written their markers

		lg, err = log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(1024))
		require.NoError(t, err)
		defer lg.Close()
		tp, err = lg.Topic("events")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)
		rp, err := openReadOnlyPartition(t, dir)
		require.NoError(t, err)

		require.NoError(t, tp.LockWriter()) // the writer's open, before the hook below
		_, err = p.Read(0, 1)               // the writer builds its own index of segment 0 now
		require.NoError(t, err)
		var once sync.Once
		defer log.SetIndexBuild(func() { // the reader's first read of segment 0, after its refresh
			once.Do(func() {
				require.NoError(t, p.Truncate(5))
				for range 3 { // other sizes at offsets 5 to 7
					_, err := p.Append(ctx, log.Record{Value: bytes.Repeat([]byte{2}, 100)})
					require.NoError(t, err)
				}
			})
		})()
		recs, err := rp.Read(0, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 8)
		for i, r := range recs {
			require.Equal(t, int64(i), r.Offset)
			if i >= 5 {
				require.Len(t, r.Value, 100, "offset %d is the rewrite's", i)
			}
		}
	})
}
