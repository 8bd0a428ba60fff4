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

// TestWriterReopensOnAFullDiskAndItsFirstAppendReportsENOSPC ensures a log
// whose file system filled up while it was closed (a 4 MiB tmpfs filled by
// another file) reopens for writing, in both modes: the open writes nothing
// it can do without (the new epoch is recorded before the first append, not
// at the open), every record reads back, the first append fails with ENOSPC
// and leaves the partition usable, and once space is freed the append goes
// in at the new epoch, which the epoch file then holds.
func TestWriterReopensOnAFullDiskAndItsFirstAppendReportsENOSPC(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		testutil.RunInTmpfs(t, 4<<20, func(t *testing.T, dir string) {
			ldir := filepath.Join(dir, "log")
			opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(64 << 10)}
			lg, err := log.Open(ldir, append([]log.Option{log.CreateIfMissing()}, opts...)...)
			require.NoError(t, err)
			appendN(t, openPartition(t, lg, "events", 1), 0, 10)
			require.NoError(t, lg.Close())
			free := testutil.FillDisk(t, filepath.Join(dir, "ballast"))

			lg, err = log.Open(ldir, opts...)
			require.NoError(t, err)
			defer lg.Close()
			tp, err := lg.WriteTopic("events")
			require.NoError(t, err, "a full disk fails the open for writing")
			p, err := tp.Partition(0)
			require.NoError(t, err)
			require.Len(t, readAll(t, p), 10)
			require.EqualValues(t, 1, p.Epoch(), "the epoch of the next append")
			ctx := context.Background()
			_, err = p.Append(ctx, log.Record{Value: val(10)})
			require.ErrorIs(t, err, syscall.ENOSPC)
			assert.Contains(t, err.Error(), "topic events partition 0")

			free()
			off, err := p.Append(ctx, log.Record{Value: val(10)})
			require.NoError(t, err, "the full disk failed an append, not the partition")
			require.EqualValues(t, 10, off)
			recs, err := p.Read(10, 1<<20)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			assert.EqualValues(t, 1, recs[0].Epoch)
			require.NoError(t, lg.Close())

			ro, err := log.Open(ldir, append(opts, log.ReadOnly())...)
			require.NoError(t, err)
			defer ro.Close()
			rtp, err := ro.Topic("events")
			require.NoError(t, err)
			rp, err := rtp.Partition(0)
			require.NoError(t, err)
			assert.EqualValues(t, 1, rp.Epoch(), "epoch 1 is in the epoch file")
			end, ok := rp.EndOffsetForEpoch(0)
			require.True(t, ok)
			assert.EqualValues(t, 10, end, "epoch 0 ended where epoch 1 began")
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
