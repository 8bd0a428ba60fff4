package log_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// diskBytes is what a file holds on disk, as du counts it (st_blocks * 512).
func diskBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	return st.Blocks * 512
}

// TestIdlePartitionsOfA16PartitionTopicHoldAtMost1MiBOnDisk ensures a
// mapped segment no longer reserves its whole capacity: every partition of
// a 16-partition topic that took one record holds at most 1 MiB on disk
// (stat blocks, as du counts) while the log is open, in both modes.
func TestIdlePartitionsOfA16PartitionTopicHoldAtMost1MiBOnDisk(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		tp, err := lg.CreateTopic("events", 16)
		require.NoError(t, err)
		var total int64
		for i := range int32(16) {
			p, err := tp.Partition(i)
			require.NoError(t, err)
			_, err = p.AppendAck(context.Background(), log.AckSynced, log.Record{Value: make([]byte, 100)})
			require.NoError(t, err)
			path := segPath(dir, "events", int(i), 0)
			used := diskBytes(t, path)
			assert.LessOrEqual(t, used, int64(1<<20), "partition %d: %d bytes on disk", i, used)
			assert.LessOrEqual(t, fileSize(t, path), int64(1<<20), "partition %d", i)
			total += used
		}
		t.Logf("%s: 16 partitions of one record hold %d bytes on disk", mode, total)
	})
}

// TestMappedSegmentsGrowInStepsAndReadOnlyFollowerGetsEveryRecord ensures
// appends crossing many reservation steps (and segment rolls) are followed
// record by record by a follower of a read-only open of the same directory,
// in both modes, one record per call and in groups written through the
// descriptor (ModeMmap, 32 KiB), and that a mapped segment's file reserves 1 MiB first and
// never more than its capacity.
func TestMappedSegmentsGrowInStepsAndReadOnlyFollowerGetsEveryRecord(t *testing.T) {
	const total, valueBytes = 3000, 4000 // about 12 MiB: 1 MiB, then the rest, in a 6 MiB segment and its successor
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(6<<20))
		w := openPartition(t, lg, "events", 1)
		ro := openLog(t, dir, log.ReadOnly())
		rtp, err := ro.Topic("events")
		require.NoError(t, err)
		rp, err := rtp.Partition(0)
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		followed := followAll(ctx, rp, total, func(rec log.Record, n int64) error {
			if len(rec.Value) != valueBytes || binary.LittleEndian.Uint64(rec.Value) != uint64(n) {
				return fmt.Errorf("follower got offset %d (%d bytes) with another value", rec.Offset, len(rec.Value))
			}
			return nil
		})
		// One record per call, and in every other hundred offsets groups of
		// 8 (32 KiB: a ModeMmap write of pwriteMinBytes or more, written
		// through the descriptor and published by its first length).
		recs := make([]log.Record, 8)
		for i := range recs {
			recs[i].Value = make([]byte, valueBytes)
		}
		for i, checked := 0, -1; i < total; {
			n := 1
			if i/100%2 == 1 {
				n = min(len(recs), total-i)
			}
			for k := range n {
				binary.LittleEndian.PutUint64(recs[k].Value, uint64(i+k))
			}
			_, err := w.Append(ctx, recs[:n]...)
			require.NoError(t, err)
			i += n
			if mode == log.ModeMmap && i/500 > checked {
				checked = i / 500
				segs := segments(t, dir, "events", 0)
				active := segs[len(segs)-1]
				size := fileSize(t, active)
				assert.LessOrEqual(t, size, int64(6<<20), "offset %d", i)
				assert.GreaterOrEqual(t, size, int64(1<<20), "offset %d: the first step is reserved", i)
				if i == 1 {
					assert.EqualValues(t, 1<<20, size, "a new segment reserves one 1 MiB step")
				}
			}
		}
		require.NoError(t, <-followed)
		require.Len(t, segments(t, dir, "events", 0), 2)
	})
}

// TestTornTailTruncatedBytesCountsOnlyTheTornBytes ensures the recovery
// report of a torn frame followed by a zero tail (the space a ModeMmap
// segment reserved, here 3 MiB: more than any one read of it), whether the
// tail is a hole (unwritten reserved blocks after a crash) or written zeros
// (zeros written ahead), counts the torn bytes only, and that the reopened
// segment does not hold that tail on disk.
func TestTornTailTruncatedBytesCountsOnlyTheTornBytes(t *testing.T) {
	for _, written := range []bool{false, true} {
		t.Run(fmt.Sprintf("written-zeros=%v", written), func(t *testing.T) { tornTailCount(t, written) })
	}
}

func tornTailCount(t *testing.T, writtenZeros bool) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10)
		require.NoError(t, lg.Close())
		path := segPath(dir, "events", 0, 0)
		end := fileSize(t, path)
		torn := make([]byte, 30) // a header claiming 200 bytes, then 22 of them
		binary.LittleEndian.PutUint32(torn, 200)
		binary.LittleEndian.PutUint32(torn[4:], 0x12345678)
		for i := 8; i < len(torn); i++ {
			torn[i] = 0xab
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(torn, end)
		require.NoError(t, err)
		if writtenZeros {
			_, err = f.WriteAt(make([]byte, 3<<20-len(torn)), end+int64(len(torn)))
			require.NoError(t, err)
		} else {
			require.NoError(t, f.Truncate(end+3<<20))
		}
		require.NoError(t, f.Close())
		forgetRecoveryPoint(t, dir, "events", 0)

		_, p = openEvents(t, dir, log.WithMode(mode))
		require.EqualValues(t, 10, p.HighWatermark())
		assert.EqualValues(t, 32, p.Recovery().TruncatedBytes, "30 torn bytes, rounded to the 8-byte alignment")
		assert.LessOrEqual(t, diskBytes(t, path), end+1<<20+4096, "the frames and one step, in 4 KiB blocks")
		assert.Len(t, readAll(t, p), 10)
	})
}

// TestMmapTopicOnA64MiBTmpfs ensures a 16-partition ModeMmap topic with the
// default 64 MiB segments is created and takes a record per partition on a
// 64 MiB file system, and that filling the file system fails the append
// that needed the space with ENOSPC (the process would die of SIGBUS if a
// store reached unreserved space), and that the full file system reopens
// with every record acked before it. It runs in a child process in its own
// user and mount namespace, where it mounts the tmpfs (testutil.RunInTmpfs);
// where namespaces are not allowed it is skipped.
func TestMmapTopicOnA64MiBTmpfs(t *testing.T) {
	testutil.RunInTmpfs(t, 64<<20, fillTmpfs)
}

func fillTmpfs(t *testing.T, dir string) {
	lg := openLog(t, filepath.Join(dir, "log"), log.WithMode(log.ModeMmap), log.CreateIfMissing())
	tp, err := lg.CreateTopic("events", 16)
	require.NoError(t, err)
	ctx := context.Background()
	for i := range int32(16) {
		p, err := tp.Partition(i)
		require.NoError(t, err)
		_, err = p.Append(ctx, log.Record{Value: make([]byte, 100)})
		require.NoError(t, err)
	}
	p, err := tp.Partition(0)
	require.NoError(t, err)
	v := make([]byte, 256<<10)
	appended := 0
	for ; ; appended++ {
		_, err := p.Append(ctx, log.Record{Value: v})
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "append %d", appended)
			t.Logf("ENOSPC after %d appends of 256 KiB: %v", appended, err)
			break
		}
		require.Less(t, appended, 400, "64 MiB cannot take 100 MiB")
	}
	q, err := tp.Partition(1)
	require.NoError(t, err)
	recs, err := q.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	// Every record acked before the full disk is there after a reopen.
	// Close reports the write that failed, if anything.
	if err := lg.Close(); err != nil {
		require.ErrorIs(t, err, syscall.ENOSPC)
	}
	lg = openLog(t, filepath.Join(dir, "log"), log.WithMode(log.ModeMmap))
	tp, err = lg.WriteTopic("events")
	require.NoError(t, err)
	p, err = tp.Partition(0)
	require.NoError(t, err)
	require.EqualValues(t, 1+appended, p.HighWatermark())
	last, err := p.Read(int64(appended), 1<<20)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Len(t, last[0].Value, len(v))
}

// BenchmarkIdlePartitionDisk reports what one partition holding a single
// 100-byte record takes on disk, as du counts it (the partition folder's
// files, st_blocks * 512), the most over the 16 partitions of a topic, per
// write path: "disk-KiB". Before mapped segments were reserved in steps a
// ModeMmap partition took its whole 64 MiB segment. Each op creates the
// topic in a fresh folder and appends the 16 records (AckSynced).
func BenchmarkIdlePartitionDisk(b *testing.B) {
	for _, mode := range modes {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			var worst int64
			for range b.N {
				dir := b.TempDir()
				lg, err := log.Open(dir, log.WithMode(mode))
				if err != nil {
					b.Fatal(err)
				}
				tp, err := lg.CreateTopic("events", 16)
				if err != nil {
					b.Fatal(err)
				}
				for i := range int32(16) {
					p, _ := tp.Partition(i)
					if _, err := p.AppendAck(context.Background(), log.AckSynced, log.Record{Value: make([]byte, 100)}); err != nil {
						b.Fatal(err)
					}
					entries, err := os.ReadDir(filepath.Join(dir, "events", fmt.Sprint(i)))
					if err != nil {
						b.Fatal(err)
					}
					var used int64
					for _, e := range entries {
						var st unix.Stat_t
						if err := unix.Stat(filepath.Join(dir, "events", fmt.Sprint(i), e.Name()), &st); err == nil {
							used += st.Blocks * 512
						}
					}
					worst = max(worst, used)
				}
				if err := lg.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(worst)/1024, "disk-KiB")
		})
	}
}
