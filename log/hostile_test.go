package log_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// The tests of this file feed the log mistaken and hostile input: each
// checks the error names what was wrong and wraps the right sentinel, and
// that nothing already stored is lost (the log is reopened and every
// earlier record read back).

// requireIntact reopens dir for writing and requires topic events
// partition 0 to hold exactly the records val(0) to val(n-1), in order, then
// closes it.
func requireIntact(t *testing.T, dir string, n int, opts ...log.Option) {
	t.Helper()
	lg, err := log.Open(dir, opts...)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.WriteTopic("events")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	recs := readAll(t, p)
	require.Len(t, recs, n)
	for i, r := range recs {
		require.Equal(t, string(val(i)), string(r.Value), "offset %d", i)
	}
}

// TestHostileTopicNamesAreRefusedAndCreateNothing ensures a name with a
// '/', "..", a NUL byte or 250 characters is ErrInvalidTopic quoting the
// name and saying what is wrong, through every way in, creates no file, and
// loses nothing stored.
func TestHostileTopicNamesAreRefusedAndCreateNothing(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	appendN(t, openPartition(t, lg, "events", 1), 0, 3)
	for name, want := range map[string]string{
		"a/b":                    `"a/b" has character '/' at byte 1`,
		"../events":              `character '/' at byte 2`,
		"..":                     `".." is not allowed`,
		"ev\x00ents":             `"ev\x00ents" has character '\x00' at byte 2`,
		"/etc":                   `character '/' at byte 0`,
		strings.Repeat("a", 250): "name is 250 bytes long, the limit is 249",
	} {
		_, err := lg.CreateTopic(name, 1)
		require.ErrorIs(t, err, log.ErrInvalidTopic, "%q", name)
		assert.Contains(t, err.Error(), want)
		_, err = lg.Topic(name)
		require.ErrorIs(t, err, log.ErrInvalidTopic, "%q", name)
		_, err = lg.WriteTopic(name)
		require.ErrorIs(t, err, log.ErrInvalidTopic, "%q", name)
		_, err = log.Verify(dir, name)
		require.ErrorIs(t, err, log.ErrInvalidTopic, "%q", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only events")
	require.NoError(t, lg.Close())
	requireIntact(t, dir, 3)
}

// TestHostilePartitionNumbersAreRefused ensures a negative or huge partition
// number, or partition count, is an error giving the number and the range.
func TestHostilePartitionNumbersAreRefused(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	tp, err := lg.CreateTopic("events", 2)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, 0, 3)
	for _, n := range []int32{-1, math.MinInt32, 2, math.MaxInt32} {
		_, err := tp.Partition(n)
		require.ErrorIs(t, err, log.ErrPartitionOutOfRange)
		assert.Contains(t, err.Error(), fmt.Sprintf("topic events has partitions 0 to 1, asked for %d", n))
	}
	for _, n := range []int{-1, 0, log.MaxPartitions + 1, math.MaxInt} {
		_, err := lg.CreateTopic("other", n)
		require.ErrorIs(t, err, log.ErrInvalidPartitions)
		assert.Contains(t, err.Error(), fmt.Sprintf("topic other: %d partitions (want 1 to %d)", n, log.MaxPartitions))
	}
	assert.NoDirExists(t, filepath.Join(dir, "other"))
	require.NoError(t, lg.Close())
	requireIntact(t, dir, 3)
}

// TestOffsetsOutsideTheLogAreOutOfRange ensures reads, replays, follows and
// truncations below the log start offset (raised by retention) or past the
// end are *OffsetOutOfRangeError with the offset and both bounds, and
// change nothing.
func TestOffsetsOutsideTheLogAreOutOfRange(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(256)) // 4 frames of 56 bytes a segment
		tp, err := lg.CreateTopic("events", 1, log.RetentionBytes(0))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		appendN(t, p, 0, 10)
		_, err = tp.EnforceRetention(time.Now())
		require.NoError(t, err)
		start, next := p.StartOffset(), p.HighWatermark()
		require.Positive(t, start, "retention raised the log start offset")
		require.EqualValues(t, 10, next)

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, off := range []int64{-1, math.MinInt64, start - 1, next + 1, math.MaxInt64} {
			want := fmt.Sprintf("topic events partition 0: offset %d out of range [%d, %d]", off, start, next)
			_, err := p.Read(off, 0)
			requireOutOfRange(t, err, off, start, next)
			assert.Contains(t, err.Error(), want)
			_, err = p.Replay(off).Next(ctx, 0)
			requireOutOfRange(t, err, off, start, next)
			_, err = p.Follow(off).Next(ctx, 0)
			requireOutOfRange(t, err, off, start, next)
			if off > next {
				require.ErrorIs(t, p.Truncate(off), log.ErrOffsetOutOfRange)
			}
		}
		recs, err := p.Read(next, 0)
		require.NoError(t, err, "the high watermark itself is in range")
		assert.Empty(t, recs)
		require.NoError(t, lg.Close())

		lg = openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(256))
		tp, err = lg.WriteTopic("events")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)
		assert.Equal(t, start, p.StartOffset())
		assert.Equal(t, next, p.HighWatermark())
		recs = readAll(t, p)
		require.Len(t, recs, int(next-start))
		assert.Equal(t, string(val(int(start))), string(recs[0].Value))
	})
}

func requireOutOfRange(t *testing.T, err error, off, start, next int64) {
	t.Helper()
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange, "offset %d", off)
	var oe *log.OffsetOutOfRangeError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, off, oe.Offset)
	assert.Equal(t, start, oe.StartOffset)
	assert.Equal(t, next, oe.NextOffset)
}

// TestRecordOfExactlySegmentCapacityFitsAndOneByteMoreIsRefused ensures a
// record whose frame (8-byte header, body, padding to 8: log.FrameBytes) is
// exactly WithSegmentBytes is appended, in a segment of its own, and one
// whose value is one byte longer is *RecordTooLargeError with both sizes,
// storing nothing.
func TestRecordOfExactlySegmentCapacityFitsAndOneByteMoreIsRefused(t *testing.T) {
	t.Parallel()
	const segmentBytes = 1024
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(segmentBytes)}
		lg := openLog(t, dir, opts...)
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 1)

		// 8 header bytes, a 36-byte body without key, value or headers, the value.
		exact := log.Record{Value: make([]byte, segmentBytes-8-36)}
		require.EqualValues(t, segmentBytes, log.FrameBytes(exact))
		over := log.Record{Value: make([]byte, segmentBytes-8-36+1)}
		require.EqualValues(t, segmentBytes+8, log.FrameBytes(over))

		_, err := p.Append(context.Background(), over)
		require.ErrorIs(t, err, log.ErrRecordTooLarge)
		assert.Contains(t, err.Error(), "topic events partition 0: record needs 1032 bytes but a segment holds 1024 bytes")
		assert.EqualValues(t, 1, p.HighWatermark())

		off, err := p.Append(context.Background(), exact)
		require.NoError(t, err)
		require.EqualValues(t, 1, off)
		appendN(t, p, 2, 1) // the segment after the full one
		require.Len(t, segments(t, dir, "events", 0), 3)
		assert.EqualValues(t, segmentBytes, fileSize(t, segPath(dir, "events", 0, 1)))
		require.NoError(t, lg.Close())

		lg = openLog(t, dir, opts...)
		tp, err := lg.WriteTopic("events")
		require.NoError(t, err)
		p, err = tp.Partition(0)
		require.NoError(t, err)
		recs := readAll(t, p)
		require.Len(t, recs, 3)
		assert.Len(t, recs[1].Value, len(exact.Value))
		assert.Equal(t, string(val(2)), string(recs[2].Value))
	})
}

// segmentDamage is one way to damage the segment at path; it returns a
// function that undoes it.
type segmentDamage func(t *testing.T, path string) (undo func())

// moveAside renames path away and returns the undo.
func moveAside(t *testing.T, path string) func() {
	t.Helper()
	aside := path + ".aside"
	require.NoError(t, os.Rename(path, aside))
	return func() {
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, os.Rename(aside, path))
	}
}

// outside is a file outside every log directory that a symlink points to;
// the log must neither read nor write it.
var outsideContent = strings.Repeat("not a segment: must be neither read nor written\n", 4) // > 64 bytes, the size of follow.waiters

var segmentDamages = map[string]struct {
	damage segmentDamage
	want   string // in the error
}{
	"truncated to zero": {func(t *testing.T, path string) func() {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(path, 0))
		return func() { require.NoError(t, os.WriteFile(path, b, 0o644)) }
	}, ""},
	"replaced by a directory": {func(t *testing.T, path string) func() {
		undo := moveAside(t, path)
		require.NoError(t, os.Mkdir(path, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(path, "x"), []byte("x"), 0o644))
		return undo
	}, "is a directory, not a regular file"},
	"replaced by a symlink out of the log directory": {func(t *testing.T, path string) func() {
		undo := moveAside(t, path)
		require.NoError(t, os.Symlink(outsidePath(t), path))
		return undo
	}, "is a symbolic link, not a regular file"},
	"replaced by a symlink to its own copy": {func(t *testing.T, path string) func() {
		undo := moveAside(t, path)
		require.NoError(t, os.Symlink(filepath.Base(path)+".aside", path))
		return undo
	}, "is a symbolic link, not a regular file"},
}

// outsidePath returns a file outside the log directory with outsideContent,
// one per test.
func outsidePath(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "outside")
	if _, err := os.Stat(p); err != nil {
		require.NoError(t, os.WriteFile(p, []byte(outsideContent), 0o644))
	}
	return p
}

// TestDamagedSegmentFileFailsTheOpenAndIsNeverFollowed ensures a segment
// file truncated to zero, replaced by a directory or replaced by a symlink
// (out of the log directory or not) fails opening the partition, for
// writing and read-only, with ErrCorrupt naming the segment, whether it is
// a sealed segment or the last one, never reads or writes through the
// symlink, and that with the file put back every record is there.
func TestDamagedSegmentFileFailsTheOpenAndIsNeverFollowed(t *testing.T) {
	t.Parallel()
	for name, d := range segmentDamages {
		for _, which := range []string{"sealed", "last"} {
			t.Run(name+"/"+which, func(t *testing.T) {
				forEachMode(t, func(t *testing.T, mode log.Mode) {
					dir := t.TempDir()
					opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(256)}
					lg := openLog(t, dir, opts...)
					appendN(t, openPartition(t, lg, "events", 1), 0, 10) // segments 0, 4, 8
					require.NoError(t, lg.Close())
					base := int64(0)
					if which == "last" {
						base = 8
					}
					path := segPath(dir, "events", 0, base)
					out := outsidePath(t)
					undo := d.damage(t, path)

					for _, ro := range []bool{false, true} {
						o := opts
						if ro {
							o = append(o, log.ReadOnly())
						}
						lg, err := log.Open(dir, o...)
						require.NoError(t, err)
						if ro {
							_, err = lg.Topic("events")
						} else {
							_, err = lg.WriteTopic("events")
						}
						// The last segment truncated to zero is told from
						// one just rolled by the recovery point, which a
						// reader reads too: it says records 8 and 9 were on
						// disk.
						require.ErrorIs(t, err, log.ErrCorrupt, "read-only %v", ro)
						assert.Contains(t, err.Error(), "topic events partition 0")
						assert.Contains(t, err.Error(), path)
						assert.Contains(t, err.Error(), d.want)
						require.NoError(t, lg.Close())
					}
					b, err := os.ReadFile(out)
					require.NoError(t, err)
					assert.Equal(t, outsideContent, string(b), "the file outside was not written")

					undo()
					requireIntact(t, dir, 10, opts...)
				})
			})
		}
	}
}

// TestSymlinkedLockAndWaitersFilesAreNotFollowed ensures the files a writer
// opens in place, writer.lock (truncated and given the pid) and
// follow.waiters (mapped and written), are not followed when they are
// symlinks, so a link planted in the log directory cannot make the writer
// write outside it: the lock is refused with ErrCorrupt naming the file,
// and followers go without follow.waiters (they poll, as where it cannot be
// written).
func TestSymlinkedLockAndWaitersFilesAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"writer.lock", "0/follow.waiters"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			dir := t.TempDir()
			opts := []log.Option{log.WithMode(log.ModeMmap)}
			lg := openLog(t, dir, opts...)
			appendN(t, openPartition(t, lg, "events", 1), 0, 3)
			require.NoError(t, lg.Close())
			path := filepath.Join(dir, "events", file)
			out := outsidePath(t)
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Symlink(out, path))

			lg, err := log.Open(dir, opts...)
			require.NoError(t, err)
			tp, err := lg.WriteTopic("events")
			if file == "writer.lock" {
				require.ErrorIs(t, err, log.ErrCorrupt)
				assert.Contains(t, err.Error(), path+" is a symbolic link, not a regular file")
			} else {
				require.NoError(t, err)
				p, err := tp.Partition(0)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				_, err = p.Follow(3).Next(ctx, 0) // waits: raises the flag in follow.waiters
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded)
				_, err = p.Append(context.Background(), log.Record{Value: val(3)}) // clears it
				require.NoError(t, err)
				require.NoError(t, p.Truncate(3))
			}
			require.NoError(t, lg.Close())
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, outsideContent, string(b), "the file outside was not written")
			require.NoError(t, os.Remove(path))
			requireIntact(t, dir, 3, opts...)
		})
	}
}

// TestReadOnlyLogDirectoryFailsWritesAndLosesNothing ensures a log whose
// directories were made read-only (chmod 0555) fails CreateTopic and the
// first write of a topic with the path and the permission error, reads
// still work, and with the permission back every record is there. As root,
// chmod does not stop writes, and the test is skipped.
func TestReadOnlyLogDirectoryFailsWritesAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	appendN(t, openPartition(t, lg, "events", 1), 0, 3)
	require.NoError(t, lg.Close())
	var dirs []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return err
	}))
	for _, d := range dirs {
		require.NoError(t, os.Chmod(d, 0o555))
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Chmod(d, 0o755)
		}
	})
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Skipf("chmod 0555 does not stop this process (uid %d) from writing", os.Getuid())
	}

	lg = openLog(t, dir)
	_, err := lg.CreateTopic("other", 1)
	require.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), "other")
	tp, err := lg.Topic("events")
	require.NoError(t, err, "reading needs no write")
	p, err := tp.Partition(0)
	require.NoError(t, err)
	assert.Len(t, readAll(t, p), 3)
	_, err = p.Append(context.Background(), log.Record{Value: []byte("x")})
	require.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), filepath.Join(dir, "events"))
	require.NoError(t, lg.Close())

	for _, d := range dirs {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	requireIntact(t, dir, 3)
}

// TestClockStepsDuringARunKeepOffsetsAndRecords ensures a writer's clock
// stepped back and forward between appends changes only the timestamps
// stored: offsets stay dense, a record ahead of the stepped-back clock by
// more than the bound is *TimestampAheadError naming both times and stores
// nothing, a retention check by age at the stepped-back clock deletes
// nothing, and every record is there after a reopen.
func TestClockStepsDuringARunKeepOffsetsAndRecords(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		now := t0
		clock := func() time.Time { return now }
		opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(256), log.WithClock(clock), log.WithRetentionCheckInterval(0)}
		lg := openLog(t, dir, opts...)
		tp, err := lg.CreateTopic("events", 1, log.Retention(time.Hour))
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		ctx := context.Background()

		appendN(t, p, 0, 4) // stamped t0
		now = t0.Add(-2 * time.Hour)
		appendN(t, p, 4, 4) // stamped two hours earlier than the records before
		_, err = p.Append(ctx, log.Record{Value: []byte("x"), Timestamp: t0.UnixMilli()})
		require.ErrorIs(t, err, log.ErrTimestampAhead)
		assert.Contains(t, err.Error(), fmt.Sprintf("record timestamp %d", t0.UnixMilli()))
		assert.Contains(t, err.Error(), fmt.Sprintf("writer's clock %d", now.UnixMilli()))
		rep, err := tp.EnforceRetention(now)
		require.NoError(t, err)
		assert.Empty(t, rep.Partitions, "a clock stepped back deletes nothing")

		now = t0.Add(30 * time.Minute)
		appendN(t, p, 8, 4)
		assert.EqualValues(t, 12, p.HighWatermark())
		recs := readAll(t, p)
		require.Len(t, recs, 12)
		for i, r := range recs {
			want := t0
			switch {
			case i >= 8:
				want = t0.Add(30 * time.Minute)
			case i >= 4:
				want = t0.Add(-2 * time.Hour)
			}
			assert.Equal(t, want.UnixMilli(), r.Timestamp, "offset %d", i)
		}
		require.NoError(t, lg.Close())
		requireIntact(t, dir, 12, opts...)
	})
}

// TestEpochFileReplacedByALinkToAnEndlessFileIsCorrupt ensures a partition's
// leader-epoch-checkpoint replaced by a symlink (to /dev/zero, which a plain
// read would never finish) or by a FIFO fails the open, writing and
// read-only, with ErrCorrupt naming the file, and that with the file put
// back every record is there.
func TestEpochFileReplacedByALinkToAnEndlessFileIsCorrupt(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir)
			appendN(t, openPartition(t, lg, "events", 1), 0, 3)
			require.NoError(t, lg.Close())
			path := filepath.Join(dir, "events", "0", "leader-epoch-checkpoint")
			undo := moveAside(t, path)
			want := path + " is a symbolic link, not a regular file"
			if kind == "symlink" {
				require.NoError(t, os.Symlink("/dev/zero", path))
			} else {
				require.NoError(t, syscall.Mkfifo(path, 0o644))
				want = path + " is a special file"
			}
			for _, ro := range []bool{false, true} {
				var opts []log.Option
				if ro {
					opts = append(opts, log.ReadOnly())
				}
				lg, err := log.Open(dir, opts...)
				require.NoError(t, err)
				if ro {
					_, err = lg.Topic("events")
				} else {
					_, err = lg.WriteTopic("events")
				}
				require.ErrorIs(t, err, log.ErrCorrupt, "read-only %v", ro)
				assert.Contains(t, err.Error(), want)
				require.NoError(t, lg.Close())
			}
			undo()
			requireIntact(t, dir, 3)
		})
	}
}

// TestMetadataFilesThatAreNotRegularFilesAreCorrupt ensures topic.json and a
// partition's recovery-point.json replaced by a FIFO (whose plain open
// would wait for a writer forever) or by a symlink (here to /dev/zero) fail
// the open, for writing, with ErrCorrupt naming the file, and that with the
// file put back every record is there.
func TestMetadataFilesThatAreNotRegularFilesAreCorrupt(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"topic.json", "0/recovery-point.json"} {
		for _, kind := range []string{"symlink", "fifo"} {
			t.Run(filepath.Base(file)+"/"+kind, func(t *testing.T) {
				dir := t.TempDir()
				lg := openLog(t, dir)
				appendN(t, openPartition(t, lg, "events", 1), 0, 3)
				require.NoError(t, lg.Close())
				path := filepath.Join(dir, "events", file)
				undo := moveAside(t, path)
				want := path + " is a symbolic link, not a regular file"
				if kind == "symlink" {
					require.NoError(t, os.Symlink("/dev/zero", path))
				} else {
					require.NoError(t, syscall.Mkfifo(path, 0o644))
					want = path + " is a special file"
				}
				requireOpenFailsWithin(t, dir, want)
				undo()
				requireIntact(t, dir, 3)
			})
		}
	}
}

// requireOpenFailsWithin requires WriteTopic("events") on dir to fail with
// ErrCorrupt saying want, within 10 s: a FIFO followed would block it for
// ever.
func requireOpenFailsWithin(t *testing.T, dir, want string) {
	t.Helper()
	lg := openLog(t, dir)
	done := make(chan error, 1)
	go func() {
		_, err := lg.WriteTopic("events")
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, log.ErrCorrupt)
		assert.Contains(t, err.Error(), want)
	case <-time.After(10 * time.Second):
		t.Fatal("the open of the topic is blocked on a FIFO")
	}
	require.NoError(t, lg.Close())
}

// TestSealMarkerThatIsAFIFOIsNotWaitedOn ensures a seal marker replaced by a
// FIFO does not block the open of its partition: the marker is not trusted
// and the segment walked.
func TestSealMarkerThatIsAFIFOIsNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir, log.WithSegmentBytes(256))
	appendN(t, openPartition(t, lg, "events", 1), 0, 10)
	require.NoError(t, lg.Close())
	marker := filepath.Join(dir, "events", "0", "00000000000000000000.sealed")
	require.NoError(t, os.Remove(marker))
	require.NoError(t, syscall.Mkfifo(marker, 0o644))
	done := make(chan error, 1)
	go func() {
		lg, err := log.Open(dir, log.WithSegmentBytes(256))
		if err == nil {
			_, err = lg.WriteTopic("events")
			lg.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "an untrusted marker means a walk, not a failure")
	case <-time.After(10 * time.Second):
		t.Fatal("the open of the partition is blocked on a FIFO seal marker")
	}
	requireIntact(t, dir, 10, log.WithSegmentBytes(256))
}
