package log_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// TestFullDiskFailsTheAppendOrRollAndLosesNothingAcked ensures that on a
// full file system (a 4 MiB tmpfs filled by another file) an append fails
// with ENOSPC naming the segment: in ModeFile the write of the append, in
// ModeMmap the reservation of the next segment at a roll (a mapped segment
// reserves its 64 KiB at creation); that the partition then refuses appends
// until reopened (a failed write may have lost pages), and that after the
// space is freed a reopen holds every record acked before and appends again.
func TestFullDiskFailsTheAppendOrRollAndLosesNothingAcked(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		testutil.RunInTmpfs(t, 4<<20, func(t *testing.T, dir string) {
			ldir := filepath.Join(dir, "log")
			opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(64 << 10)}
			lg, err := log.Open(ldir, append([]log.Option{log.CreateIfMissing()}, opts...)...)
			require.NoError(t, err)
			p := openPartition(t, lg, "events", 1)
			appendN(t, p, 0, 10)
			free := testutil.FillDisk(t, filepath.Join(dir, "ballast"))

			ctx := context.Background()
			acked := 10
			var appendErr error
			for ; acked < 10_000; acked++ {
				if _, appendErr = p.Append(ctx, log.Record{Value: val(acked)}); appendErr != nil {
					break
				}
			}
			require.ErrorIs(t, appendErr, syscall.ENOSPC)
			assert.Contains(t, appendErr.Error(), "topic events partition 0")
			assert.Contains(t, appendErr.Error(), filepath.Join(ldir, "events", "0")+"/")
			t.Logf("%s: ENOSPC after %d records: %v", mode, acked, appendErr)
			if mode == log.ModeMmap {
				assert.Contains(t, appendErr.Error(), "fallocate", "the reservation of the next segment")
			}

			free()
			_, err = p.Append(ctx, log.Record{Value: val(acked)})
			require.ErrorIs(t, err, syscall.ENOSPC, "the partition stays failed until reopened")
			if err := lg.Close(); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
			}
			requireIntactAndWritable(t, ldir, acked, opts...)
		})
	})
}

// requireIntactAndWritable is requireIntact, then an append of val(n).
func requireIntactAndWritable(t *testing.T, dir string, n int, opts ...log.Option) {
	t.Helper()
	requireIntact(t, dir, n, opts...)
	lg, err := log.Open(dir, opts...)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.WriteTopic("events")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	off, err := p.Append(context.Background(), log.Record{Value: val(n)})
	require.NoError(t, err)
	require.EqualValues(t, n, off)
}

// TestReadOnlyFileSystemFailsWritesAndLosesNothing ensures a log on a file
// system remounted read-only (what chmod 0555 cannot do for root) fails the
// first write of a topic and the creation of one with EROFS naming the
// path, still reads every record, and loses nothing.
func TestReadOnlyFileSystemFailsWritesAndLosesNothing(t *testing.T) {
	t.Parallel()
	testutil.RunInTmpfs(t, 4<<20, func(t *testing.T, dir string) {
		ldir := filepath.Join(dir, "log")
		lg, err := log.Open(ldir, log.CreateIfMissing())
		require.NoError(t, err)
		appendN(t, openPartition(t, lg, "events", 1), 0, 3)
		require.NoError(t, lg.Close())
		testutil.RemountReadOnly(t, dir)

		lg, err = log.Open(ldir)
		require.NoError(t, err)
		defer lg.Close()
		_, err = lg.CreateTopic("other", 1)
		require.ErrorIs(t, err, syscall.EROFS)
		assert.Contains(t, err.Error(), "topic other")
		tp, err := lg.Topic("events")
		require.NoError(t, err, "reading needs no write")
		p, err := tp.Partition(0)
		require.NoError(t, err)
		assert.Len(t, readAll(t, p), 3)
		_, err = p.Append(context.Background(), log.Record{Value: []byte("x")})
		require.ErrorIs(t, err, syscall.EROFS)
		assert.Contains(t, err.Error(), filepath.Join(ldir, "events"))
		_, err = os.Stat(filepath.Join(ldir, "other"))
		require.ErrorIs(t, err, os.ErrNotExist)

		ro, err := log.Open(ldir, log.ReadOnly())
		require.NoError(t, err)
		defer ro.Close()
		tp, err = ro.Topic("events")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)
		require.Len(t, readAll(t, p), 3)
		for i, r := range readAll(t, p) {
			assert.Equal(t, string(val(i)), string(r.Value))
		}
	})
}
