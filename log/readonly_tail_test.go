package log_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// writeAt overwrites the bytes of path at pos with b.
func writeAt(t *testing.T, path string, pos int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
}

// readAt returns n bytes of path at pos.
func readAt(t *testing.T, path string, pos int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, pos)
	require.NoError(t, err)
	return b
}

// lengthPrefix encodes a frame length prefix.
func lengthPrefix(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

// openReadOnlyPartition opens dir read-only (with opts), as a reader in
// another process would, and returns partition 0 of topic events, or the
// error of the open.
func openReadOnlyPartition(t *testing.T, dir string, opts ...log.Option) (*log.Partition, error) {
	t.Helper()
	ro := openLog(t, dir, append([]log.Option{log.ReadOnly()}, opts...)...)
	tp, err := ro.Topic("events")
	if err != nil {
		return nil, err
	}
	return tp.Partition(0)
}

// midSegmentDamage is a damage to the frame at byte at of the segment at
// path, with frames of offsets 11 and later (counted from the damaged one,
// offset 0 here) left intact behind it; reason is how the walk names the
// stop, behind the offset of the first intact frame after it.
type midSegmentDamage struct {
	name   string
	damage func(t *testing.T, path string, at int64)
	reason string
	behind int64 // the first intact frame after the damage, relative to the damaged one
}

var midSegmentDamages = []midSegmentDamage{
	{"crc mismatch", func(t *testing.T, path string, at int64) { flipByte(t, path, at+8+20) }, "crc mismatch", 1},
	{"zeroed block", func(t *testing.T, path string, at int64) {
		// a block never written back, as after a power loss: three frames
		writeAt(t, path, at, make([]byte, 3*56))
	}, "zero length prefix", 3},
	{"length past end of file", func(t *testing.T, path string, at int64) {
		// runs past the end by a few bytes: below the largest frame
		writeAt(t, path, at, lengthPrefix(uint32(fileSize(t, path)-at)))
	}, "length past end of file", 1},
	{"length byte flipped high", func(t *testing.T, path string, at int64) {
		// 0x7f000030: larger than any frame may be, and than the file
		writeAt(t, path, at+3, []byte{0x7f})
	}, "length past end of file", 1},
}

// TestReadOnlyOpenReportsMidSegmentDamageOfEveryKind ensures a log opened
// read-only (strom consume, a read-only follower) over a last segment
// damaged in the middle, with intact records behind the damage, fails with
// a *CorruptError (ErrCorrupt) naming the segment, the byte position and
// the offset of the damaged frame, whatever the damage: a CRC mismatch, a
// zeroed block (a zero length prefix), a length that runs past the end of
// the file. It must not read the damage as the end of the log and hide the
// records behind it. Each is checked on segments written in both modes,
// with the writer closed (the segment shrunk to its frames) and, for the
// read-only open, with the writer still open (a ModeMmap segment then is
// pre-sized, its zero tail behind the frames), in a partition of one
// segment and as the last of several (whose walk runs in parallel).
// A writable open without a recovery point to go by judges the same.
func TestReadOnlyOpenReportsMidSegmentDamageOfEveryKind(t *testing.T) {
	layouts := []struct {
		name     string
		segBytes int64
		records  int
		lastBase int64 // base offset of the last segment
	}{
		{"one segment", 64 << 10, 20, 0},
		{"last of three segments", 20 * 56, 56, 40}, // 20 frames of 56 bytes a segment
	}
	for _, d := range midSegmentDamages {
		t.Run(d.name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				for _, l := range layouts {
					for _, opener := range []string{"read-only, writer closed", "read-only, writer open", "writable"} {
						t.Run(l.name+"/"+opener, func(t *testing.T) {
							dir := t.TempDir()
							opts := []log.Option{log.WithMode(mode), log.WithSegmentBytes(l.segBytes)}
							lg := openLog(t, dir, opts...)
							appendN(t, openPartition(t, lg, "events", 1), 0, l.records) // frames of 56 bytes
							if opener != "read-only, writer open" {
								require.NoError(t, lg.Close())
							}
							forgetRecoveryPoint(t, dir, "events", 0) // not below the point: only the scan tells
							require.Len(t, segments(t, dir, "events", 0), int(l.lastBase/20)+1)
							path := segPath(dir, "events", 0, l.lastBase)
							starts := frameStarts(t, path)
							require.Len(t, starts, l.records-int(l.lastBase))
							at := starts[5]
							d.damage(t, path, at)

							var err error
							if opener == "writable" {
								err = openTopicErr(t, dir, opts...)
							} else {
								_, err = openReadOnlyPartition(t, dir)
							}
							require.ErrorIs(t, err, log.ErrCorrupt)
							var ce *log.CorruptError
							require.ErrorAs(t, err, &ce)
							assert.Equal(t, "events", ce.Topic)
							assert.EqualValues(t, 0, ce.Partition)
							assert.Equal(t, path, ce.Segment)
							assert.Equal(t, at, ce.Position, "the byte position of the damaged frame")
							assert.Equal(t, l.lastBase+5, ce.Offset)
							assert.Contains(t, ce.Reason, fmt.Sprintf("%s, followed by an intact frame of offset %d at byte %d",
								d.reason, l.lastBase+5+d.behind, starts[5+d.behind]))
						})
					}
				}
			})
		})
	}
}

// TestReadOnlyOpenEndsCleanlyWithNothingIntactBehind ensures a read-only
// open still reads the end of the log as the end where nothing intact lies
// behind it: the zero tail of a pre-sized ModeMmap segment, its writer open
// or gone (a crash leaves it pre-sized), and a torn last frame, zeroed or
// cut short by a crash. Every record before the end is read. (A crash tears
// only unsynced bytes: the torn frames are above the recovery point, which
// the test removes as forgetRecoveryPoint says; below it they are
// corruption, TestReadOnlyOpenFailsOnEndBelowRecoveryPoint.)
func TestReadOnlyOpenEndsCleanlyWithNothingIntactBehind(t *testing.T) {
	ends := map[string]func(t *testing.T, lg *log.Log, dir, path string){
		"pre-sized zero tail, writer open": func(t *testing.T, lg *log.Log, dir, path string) {},
		"pre-sized zero tail, writer gone": func(t *testing.T, lg *log.Log, dir, path string) {
			require.NoError(t, lg.Close())
			require.NoError(t, os.Truncate(path, 64<<10))
		},
		"last frame zeroed": func(t *testing.T, lg *log.Log, dir, path string) {
			require.NoError(t, lg.Close())
			writeAt(t, path, frameStarts(t, path)[19], make([]byte, 56))
			forgetRecoveryPoint(t, dir, "events", 0)
		},
		"last frame cut short": func(t *testing.T, lg *log.Log, dir, path string) {
			require.NoError(t, lg.Close())
			require.NoError(t, os.Truncate(path, frameStarts(t, path)[19]+20))
			forgetRecoveryPoint(t, dir, "events", 0)
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				dir := t.TempDir()
				lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(64<<10))
				appendN(t, openPartition(t, lg, "events", 1), 0, 20)
				path := segPath(dir, "events", 0, 0)
				end(t, lg, dir, path)
				if name == "pre-sized zero tail, writer open" && mode == log.ModeMmap {
					require.EqualValues(t, 64<<10, fileSize(t, path), "the active ModeMmap segment is pre-sized")
				}
				want := 20
				if name == "last frame zeroed" || name == "last frame cut short" {
					want = 19
				}

				p, err := openReadOnlyPartition(t, dir)
				require.NoError(t, err)
				assert.EqualValues(t, want, p.HighWatermark())
				all := readAll(t, p)
				require.Len(t, all, want)
				for i, r := range all {
					assert.Equal(t, val(i), r.Value)
				}
			})
		})
	}
}

// TestReadOnlyOpenWaitsOutAWriteInFlight ensures a stop with intact frames
// behind it that a write in flight explains is not reported as damage: a
// ModeMmap group write whose reader saw a frame's length still zero and the
// lengths of later frames of the group already stored, and a ModeFile
// pwrite whose reader copied a page of the frame before the writer filled
// it and a later page after. The write completes while the read-only open
// waits to read the stop again, and the open then has every record.
func TestReadOnlyOpenWaitsOutAWriteInFlight(t *testing.T) {
	inFlight := map[string]int64{
		"length not yet published": 0,      // the length prefix zero
		"body half copied":         8 + 20, // a body byte still as before
	}
	for name, pos := range inFlight {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				dir := t.TempDir()
				lg := openLog(t, dir, log.WithMode(mode))
				appendN(t, openPartition(t, lg, "events", 1), 0, 20)
				require.NoError(t, lg.Close())
				path := segPath(dir, "events", 0, 0)
				at := frameStarts(t, path)[10] + pos
				written := readAt(t, path, at, 4)
				if pos == 0 {
					writeAt(t, path, at, make([]byte, 4))
				} else {
					flipByte(t, path, at)
				}
				rechecked := false
				defer log.SetReadOnlyRecheck(func() {
					rechecked = true
					writeAt(t, path, at, written) // the write completes
				})()

				p, err := openReadOnlyPartition(t, dir)
				require.NoError(t, err)
				assert.True(t, rechecked, "the open read the stop again before it judged")
				assert.EqualValues(t, 20, p.HighWatermark())
				assert.Len(t, readAll(t, p), 20)
			})
		})
	}
}

// TestReadOnlyOpensBesideALiveWriterNeverSeeCorruption ensures read-only
// opens and a read-only follower racing a live writer, whose concurrent
// appenders are written in groups across segment rolls, never see
// ErrCorrupt: every open reads a contiguous prefix of the records, and the
// follower gets every record, in order.
func TestReadOnlyOpensBesideALiveWriterNeverSeeCorruption(t *testing.T) {
	const appenders, perAppender = 4, 2500
	const total = appenders * perAppender
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(32<<10))
		w := openPartition(t, lg, "events", 1)

		ro := openLog(t, dir, log.ReadOnly())
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		rp, err := tp.Partition(0)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		followed := followAll(ctx, rp, total, nil)

		var wg sync.WaitGroup
		errs := make(chan error, appenders)
		for a := range appenders {
			wg.Go(func() {
				for i := range perAppender {
					// sizes vary, so frames straddle pages and chunk edges
					v := make([]byte, (a*perAppender+i)%300)
					if _, err := w.Append(ctx, log.Record{Value: v}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()

		opens := 0
		for finished := false; !finished; opens++ {
			select {
			case <-done:
				finished = true // one more open, of the finished log
			default:
			}
			lg, err := log.Open(dir, log.ReadOnly())
			require.NoError(t, err)
			p, err := func() (*log.Partition, error) {
				tp, err := lg.Topic("events")
				if err != nil {
					return nil, err
				}
				return tp.Partition(0)
			}()
			if err == nil {
				next := p.HighWatermark()
				for off := p.StartOffset(); off < next && err == nil; {
					var recs []log.Record
					if recs, err = p.Read(off, 1<<20); err == nil {
						require.NotEmpty(t, recs, "open %d: nothing at offset %d below %d", opens, off, next)
						for _, r := range recs {
							require.Equal(t, off, r.Offset, "open %d", opens)
							off++
						}
					}
				}
			}
			require.NoError(t, lg.Close())
			require.False(t, errors.Is(err, log.ErrCorrupt), "open %d beside a live writer: %v", opens, err)
			require.NoError(t, err, "open %d", opens)
		}
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, <-followed)
		require.EqualValues(t, total, w.HighWatermark())
		t.Logf("%d read-only opens beside the writer", opens)
	})
}

// followAll follows p from offset 0 on a goroutine until it has read total
// records, requiring dense offsets and, when check is not nil, check(rec,
// offset) == nil for each, and sends nil, or the first failure, on the
// returned channel.
func followAll(ctx context.Context, p *log.Partition, total int64, check func(rec log.Record, n int64) error) <-chan error {
	followed := make(chan error, 1)
	go func() {
		r := p.Follow(0)
		for n := int64(0); n < total; {
			recs, err := r.Next(ctx, 1<<20)
			if err != nil {
				followed <- fmt.Errorf("follower at offset %d: %w", n, err)
				return
			}
			for _, rec := range recs {
				if rec.Offset != n {
					followed <- fmt.Errorf("follower got offset %d, want %d", rec.Offset, n)
					return
				}
				if check != nil {
					if err := check(rec, n); err != nil {
						followed <- err
						return
					}
				}
				n++
			}
		}
		followed <- nil
	}()
	return followed
}
