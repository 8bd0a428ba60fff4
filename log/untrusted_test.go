package log_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// damagedLengths are the length prefixes a damaged frame is given: across
// the whole range of a uint32, and one (24 MiB) that lies inside a
// pre-sized segment, so that only its CRC can tell it from a real frame.
var damagedLengths = []uint32{1 << 20, 24 << 20, 1 << 28, 1<<31 - 1, 1<<32 - 16}

// untrustedSegmentBytes is the segment size of these tests: a ModeMmap
// segment left by a crash is this long (sparse here), so a damaged length
// below it ends inside the file.
const untrustedSegmentBytes = 32 << 20

// allocLimit is the most Open may allocate for a partition with a damaged
// length (issue 10: 16 MiB).
const allocLimit = 16 << 20

// allocated returns the bytes fn allocated on the heap, all goroutines
// together (runtime.MemStats.TotalAlloc): the tests that use it do not run
// in parallel.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// crashWithLength writes n records to a one-partition topic "events", closes
// the log and makes its only segment look as a crash left it: the length
// prefix of record damaged reads length, ModeMmap's file has its pre-sized
// zero tail back, and no recovery point says anything was synced. It
// returns the log folder, the segment path and the frame's byte position.
func crashWithLength(t testing.TB, mode log.Mode, n, damaged int, length uint32) (dir, path string, pos int64) {
	t.Helper()
	dir = t.TempDir()
	lg, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(untrustedSegmentBytes))
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = log.Record{Value: val(i)}
	}
	_, err = p.Append(context.Background(), recs...)
	require.NoError(t, err)
	require.NoError(t, lg.Close())
	path = segPath(dir, "events", 0, 0)
	pos = frameStarts(t, path)[damaged]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], length)
	_, err = f.WriteAt(b[:], pos)
	require.NoError(t, err)
	if mode == log.ModeMmap {
		require.NoError(t, f.Truncate(untrustedSegmentBytes))
	}
	forgetRecoveryPoint(t, dir, "events", 0)
	return dir, path, pos
}

// TestDamagedLengthOfLastFrameIsCutAsTornTailWithoutSizingAnything ensures
// that a last frame whose length prefix reads anything from 1 MiB to
// 2^32-16 (a crash's torn tail) opens allocating under 16 MiB, is cut as a
// torn tail (log/doc.go), and the next append reuses its offset.
func TestDamagedLengthOfLastFrameIsCutAsTornTailWithoutSizingAnything(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		for _, length := range damagedLengths {
			t.Run(fmt.Sprintf("%#x", length), func(t *testing.T) {
				dir, path, _ := crashWithLength(t, mode, 2, 1, length)
				var lg *log.Log
				var p *log.Partition
				alloc := allocated(func() {
					var err error
					lg, err = log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(untrustedSegmentBytes))
					require.NoError(t, err)
					tp, err := lg.WriteTopic("events")
					require.NoError(t, err)
					p, err = tp.Partition(0)
					require.NoError(t, err)
				})
				defer lg.Close()
				assert.Less(t, alloc, uint64(allocLimit), "Open allocated %d bytes", alloc)
				assert.Equal(t, path, p.Recovery().Segment, "the torn tail is reported cut")
				require.EqualValues(t, 1, p.HighWatermark())
				off, err := p.Append(context.Background(), log.Record{Value: val(9)})
				require.NoError(t, err)
				assert.EqualValues(t, 1, off, "the next append reuses the torn frame's offset")
				all := readAll(t, p)
				require.Len(t, all, 2)
				assert.Equal(t, val(0), all[0].Value)
				assert.Equal(t, val(9), all[1].Value)
			})
		}
	})
}

// TestDamagedLengthWithIntactFramesBehindIsCorruptWithoutSizingAnything
// ensures that the second of 20,000 frames with a length prefix from 1 MiB
// to 2^32-16 fails Open with a *CorruptError naming partition, segment,
// byte position and offset (intact frames follow: log/doc.go), allocating
// under 16 MiB, for a writer and for a read-only open alike.
func TestDamagedLengthWithIntactFramesBehindIsCorruptWithoutSizingAnything(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		for _, length := range damagedLengths {
			t.Run(fmt.Sprintf("%#x", length), func(t *testing.T) {
				dir, path, pos := crashWithLength(t, mode, 20000, 1, length)
				for _, ro := range []bool{false, true} {
					opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(untrustedSegmentBytes)}
					if ro {
						opts = append(opts, log.ReadOnly())
					}
					var err error
					alloc := allocated(func() {
						lg, oerr := log.Open(dir, opts...)
						require.NoError(t, oerr)
						defer lg.Close()
						if ro {
							_, err = lg.Topic("events")
						} else {
							_, err = lg.WriteTopic("events")
						}
					})
					assert.Less(t, alloc, uint64(allocLimit), "read-only %v: Open allocated %d bytes", ro, alloc)
					require.ErrorIs(t, err, log.ErrCorrupt, "read-only %v", ro)
					var ce *log.CorruptError
					require.ErrorAs(t, err, &ce)
					assert.Equal(t, "events", ce.Topic)
					assert.EqualValues(t, 0, ce.Partition)
					assert.Equal(t, path, ce.Segment)
					assert.Equal(t, pos, ce.Position)
					assert.EqualValues(t, 1, ce.Offset)
					assert.Contains(t, ce.Reason, "followed by an intact frame of offset 2")
				}
			})
		}
	})
}

// TestEpochFileCountBeyondItsSizeIsCorruptMetadata ensures that an epoch
// file whose count line reads anything from 1 MiB to 2^32-16 entries, more
// than its bytes can hold, fails the open with ErrCorruptMetadata naming
// the file, allocating under 16 MiB (the count never sizes the history).
func TestEpochFileCountBeyondItsSizeIsCorruptMetadata(t *testing.T) {
	for _, count := range damagedLengths {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir)
			p := openPartition(t, lg, "events", 1)
			appendN(t, p, 0, 3)
			require.NoError(t, lg.Close())
			path := filepath.Join(dir, "events", "0", "leader-epoch-checkpoint")
			require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "0\n%d\n0 0\n", count), 0o644))
			var err error
			alloc := allocated(func() { err = openTopicErr(t, dir) })
			assert.Less(t, alloc, uint64(allocLimit), "Open allocated %d bytes", alloc)
			require.ErrorIs(t, err, log.ErrCorruptMetadata)
			assert.Contains(t, err.Error(), path)
		})
	}
}

// sealMarkerCRC rewrites the CRC32C of a seal marker (bytes 48-51 over the
// 48 before them; log/doc.go "Seal markers") after a test edited a field.
func sealMarkerCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[48:], crc32.Checksum(b[:48], crc32.MakeTable(crc32.Castagnoli)))
}

// TestSealMarkerWithImpossibleNextOffsetIsNotTrusted ensures that a seal
// marker whose CRC matches but whose next offset says the segment holds
// more records than its bytes can (1 MiB to 2^32-16 past its base) is not
// trusted: the segment is walked, and the log opens with every record, its
// next offset right and under 16 MiB allocated.
func TestSealMarkerWithImpossibleNextOffsetIsNotTrusted(t *testing.T) {
	for _, next := range damagedLengths {
		t.Run(fmt.Sprint(next), func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir, log.WithSegmentBytes(1<<10))
			p := openPartition(t, lg, "events", 1)
			appendN(t, p, 0, 40) // 56-byte frames: 18 per segment, 3 segments
			require.NoError(t, lg.Close())
			marker := filepath.Join(dir, "events", "0", fmt.Sprintf("%020d.sealed", 0))
			b, err := os.ReadFile(marker)
			require.NoError(t, err)
			require.Len(t, b, 56)
			binary.LittleEndian.PutUint64(b[16:], uint64(next))
			sealMarkerCRC(b)
			require.NoError(t, os.WriteFile(marker, b, 0o644))

			var p2 *log.Partition
			alloc := allocated(func() {
				lg2, err := log.Open(dir, log.WithSegmentBytes(1<<10))
				require.NoError(t, err)
				t.Cleanup(func() { lg2.Close() })
				tp, err := lg2.WriteTopic("events")
				require.NoError(t, err)
				p2, err = tp.Partition(0)
				require.NoError(t, err)
			})
			assert.Less(t, alloc, uint64(allocLimit), "Open allocated %d bytes", alloc)
			require.EqualValues(t, 40, p2.HighWatermark())
			require.Len(t, readAll(t, p2), 40)
		})
	}
}

// TestOversizedMetadataFilesAreCorruptAndNotRead ensures that a recovery
// point file or a topic.json of 8 MiB, larger than its format can be, fails
// the open with ErrCorrupt (ErrCorruptMetadata for topic.json) naming the
// file, allocating under 16 MiB: neither is read whole.
func TestOversizedMetadataFilesAreCorruptAndNotRead(t *testing.T) {
	for _, name := range []string{filepath.Join("0", log.RecoveryPointFile), "topic.json"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir)
			p := openPartition(t, lg, "events", 1)
			appendN(t, p, 0, 3)
			require.NoError(t, lg.Close())
			path := filepath.Join(dir, "events", name)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, append(b, strings.Repeat(" ", 8<<20)...), 0o644))
			var err2 error
			alloc := allocated(func() { err2 = openTopicErr(t, dir) })
			assert.Less(t, alloc, uint64(4<<20), "Open allocated %d bytes", alloc)
			require.ErrorIs(t, err2, log.ErrCorrupt)
			assert.Contains(t, err2.Error(), path)
		})
	}
}

// TestRecoveryPointBeyondTheLogIsCorruptWithoutSizingAnything ensures that
// a recovery point whose position and offset read anything from 1 MiB to
// 2^32-16 (past the end of the log) fails the open with a *CorruptError
// (records known to be on disk are gone: log/doc.go), allocating under
// 16 MiB.
func TestRecoveryPointBeyondTheLogIsCorruptWithoutSizingAnything(t *testing.T) {
	for _, v := range damagedLengths {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			dir := t.TempDir()
			lg := openLog(t, dir)
			p := openPartition(t, lg, "events", 1)
			appendN(t, p, 0, 3)
			require.NoError(t, lg.Close())
			path := filepath.Join(dir, "events", "0", log.RecoveryPointFile)
			require.NoError(t, os.WriteFile(path,
				fmt.Appendf(nil, `{"version":1,"segment":0,"position":%d,"offset":%d}`+"\n", v, v), 0o644))
			var err error
			alloc := allocated(func() { err = openTopicErr(t, dir) })
			assert.Less(t, alloc, uint64(allocLimit), "Open allocated %d bytes", alloc)
			require.ErrorIs(t, err, log.ErrCorrupt)
			var ce *log.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.EqualValues(t, 3, ce.Offset)
		})
	}
}

// TestVerifyAndScanSegmentOfDamagedLengthSizeNothing ensures that Verify
// and ScanSegment, which decode a bad frame to describe it, report the
// second of 20,000 frames with a length prefix from 1 MiB to 2^32-16 at its
// byte position, with the intact frame behind it, allocating under 16 MiB.
func TestVerifyAndScanSegmentOfDamagedLengthSizeNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		for _, length := range damagedLengths {
			t.Run(fmt.Sprintf("%#x", length), func(t *testing.T) {
				dir, path, pos := crashWithLength(t, mode, 20000, 1, length)
				var rep log.VerifyReport
				var err error
				alloc := allocated(func() { rep, err = log.Verify(dir) })
				require.NoError(t, err)
				assert.Less(t, alloc, uint64(allocLimit), "Verify allocated %d bytes", alloc)
				require.Len(t, rep.Problems, 1)
				assert.Equal(t, path, rep.Problems[0].Segment)
				assert.Equal(t, pos, rep.Problems[0].Position)

				var bad *log.FrameError
				alloc = allocated(func() {
					err = log.ScanSegment(path, func(fr log.Frame) bool {
						if fr.Err != nil {
							require.ErrorAs(t, fr.Err, &bad)
						}
						return true
					})
				})
				require.NoError(t, err)
				assert.Less(t, alloc, uint64(allocLimit), "ScanSegment allocated %d bytes", alloc)
				require.NotNil(t, bad)
				assert.Equal(t, pos, bad.Position)
				assert.EqualValues(t, 2, bad.IntactOffset)
			})
		}
	})
}

// BenchmarkOpenDamagedLength measures opening a crashed partition whose
// second frame's length prefix is damaged (1 MiB to 2^31-1; 24 MiB ends
// inside the 32 MiB pre-sized ModeMmap segment), both write paths: torn
// (two records, the tail cut at every open, the damage written again
// between iterations, untimed) and corrupt (20,000 records, Open fails
// with ErrCorrupt). -benchmem's B/op is what Open allocated.
func BenchmarkOpenDamagedLength(b *testing.B) {
	for _, mode := range modes {
		for _, layout := range []struct {
			name string
			n    int
		}{{"torn", 2}, {"corrupt", 20000}} {
			for _, length := range damagedLengths[:4] {
				b.Run(fmt.Sprintf("%v/%s/len=%#x", mode, layout.name, length), func(b *testing.B) {
					dir, path, _ := crashWithLength(b, mode, layout.n, 1, length)
					damaged, err := os.ReadFile(path)
					require.NoError(b, err)
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						lg, err := log.Open(dir, log.WithMode(mode), log.WithSegmentBytes(untrustedSegmentBytes))
						require.NoError(b, err)
						_, err = lg.WriteTopic("events")
						require.Equal(b, layout.n > 2, err != nil, "err: %v", err)
						require.NoError(b, lg.Close())
						if layout.n == 2 {
							b.StopTimer()
							require.NoError(b, os.WriteFile(path, damaged, 0o644))
							forgetRecoveryPoint(b, dir, "events", 0)
							b.StartTimer()
						}
					}
				})
			}
		}
	}
}
