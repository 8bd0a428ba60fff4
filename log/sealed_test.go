package log_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// removeSealMarkers deletes every seal marker under dir, so the next Open
// walks every segment.
func removeSealMarkers(t *testing.T, dir string) {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "*", "*.sealed"))
	require.NoError(t, err)
	for _, path := range m {
		require.NoError(t, os.Remove(path))
	}
}

func sealMarkers(t *testing.T, dir, topic string, partition int) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, topic, "0", "*.sealed"))
	require.NoError(t, err)
	return m
}

// manySegments writes 100 records in 1 KiB segments and closes the log.
func manySegments(t *testing.T, mode log.Mode) (dir string, opts []log.Option) {
	t.Helper()
	dir = t.TempDir()
	opts = []log.Option{log.WithMode(mode), log.WithSegmentBytes(1024), log.WithIndexIntervalBytes(128)}
	lg := openLog(t, dir, opts...)
	p := openPartition(t, lg, "events", 1)
	appendN(t, p, 0, 100)
	require.NoError(t, lg.Close())
	return dir, opts
}

func openEventsPartition(t *testing.T, dir string, opts ...log.Option) (*log.Partition, error) {
	t.Helper()
	lg := openLog(t, dir, opts...)
	tp, err := lg.Topic("events")
	if err != nil {
		return nil, err
	}
	return tp.Partition(0)
}

// TestRollWritesSealMarkerForEverySealedSegment ensures each segment with a
// successor has a marker and the active one has none.
func TestRollWritesSealMarkerForEverySealedSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, _ := manySegments(t, mode)
		segs := segments(t, dir, "events", 0)
		require.Greater(t, len(segs), 3)
		var want []string
		for _, s := range segs[:len(segs)-1] {
			want = append(want, s[:len(s)-len(".log")]+".sealed")
		}
		assert.Equal(t, want, sealMarkers(t, dir, "events", 0))
	})
}

// TestOpenTrustsSealMarkerAndVerifiesOnFirstRead ensures Open does not walk
// a sealed segment that has a matching marker (a flipped byte in it does
// not fail Open), and that the segment's first read, which builds its
// index by walking it, reports the flipped byte as ErrCorrupt with its
// coordinates, every time, while other segments stay readable.
func TestOpenTrustsSealMarkerAndVerifiesOnFirstRead(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, opts := manySegments(t, mode)
		first := segments(t, dir, "events", 0)[0]
		starts := frameStarts(t, first)
		flipByte(t, first, starts[3]+8+20)

		p, err := openEventsPartition(t, dir, opts...)
		require.NoError(t, err, "a trusted sealed segment is not walked at Open")
		require.EqualValues(t, 100, p.HighWatermark())
		for range 2 {
			_, err = p.Read(0, 1)
			require.ErrorIs(t, err, log.ErrCorrupt)
			var ce *log.CorruptError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, first, ce.Segment)
			assert.Equal(t, starts[3], ce.Position)
			assert.EqualValues(t, 3, ce.Offset)
			assert.Equal(t, "crc mismatch", ce.Reason)
		}
		recs, err := p.Read(int64(len(starts)), 1)
		require.NoError(t, err, "the next segment is intact")
		assert.Equal(t, val(len(starts)), recs[0].Value)
	})
}

// TestBadSealMarkerFallsBackToWalking ensures a marker that is torn, of
// another segment, or that does not match its file's size or last frame
// is ignored: Open walks the segment (and so finds a flipped byte in it).
func TestBadSealMarkerFallsBackToWalking(t *testing.T) {
	damage := map[string]func(t *testing.T, marker, other, seg string){
		"torn": func(t *testing.T, marker, _, _ string) {
			flipByte(t, marker, 20)
		},
		"short": func(t *testing.T, marker, _, _ string) {
			require.NoError(t, os.Truncate(marker, 30))
		},
		"of another segment": func(t *testing.T, marker, other, _ string) {
			b, err := os.ReadFile(other)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(marker, b, 0o644))
		},
		"segment grew": func(t *testing.T, _, _, seg string) {
			f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 8))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
		"last frame differs": func(t *testing.T, _, _, seg string) {
			starts := frameStarts(t, seg)
			flipByte(t, seg, starts[len(starts)-1]+5) // the last frame's CRC
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode log.Mode) {
				dir, opts := manySegments(t, mode)
				segs := segments(t, dir, "events", 0)
				markers := sealMarkers(t, dir, "events", 0)
				fn(t, markers[0], markers[1], segs[0])
				flipByte(t, segs[0], frameStarts(t, segs[0])[2]+8+20)
				_, err := openEventsPartition(t, dir, opts...)
				require.ErrorIs(t, err, log.ErrCorrupt, "the segment was walked")
			})
		})
	}
}

// TestMissingSealMarkerIsWalked ensures a log without markers (written
// before they existed, or with them deleted) opens by walking, intact.
func TestMissingSealMarkerIsWalked(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, opts := manySegments(t, mode)
		removeSealMarkers(t, dir)
		p, err := openEventsPartition(t, dir, opts...)
		require.NoError(t, err)
		assert.Len(t, readAll(t, p), 100)
	})
}

// TestTrustedSegmentsServeEveryOffset ensures a reopen through markers
// serves every offset, by a single reader and by many reading the same
// sealed segments at once (the lazy index is built once), read-only too.
func TestTrustedSegmentsServeEveryOffset(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, opts := manySegments(t, mode)
		for _, ro := range []bool{false, true} {
			o := opts
			if ro {
				o = append(o, log.ReadOnly())
			}
			p, err := openEventsPartition(t, dir, o...)
			require.NoError(t, err)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for off := int64(g); off < 100; off += 7 {
						recs, err := p.Read(off, 1)
						if !assert.NoError(t, err) || !assert.NotEmpty(t, recs) {
							return
						}
						assert.Equal(t, off, recs[0].Offset)
						assert.Equal(t, val(int(off)), recs[0].Value)
					}
				})
			}
			wg.Wait()
			all := readAll(t, p)
			require.Len(t, all, 100)
			for i, r := range all {
				require.EqualValues(t, i, r.Offset)
			}
		}
	})
}

// TestTruncateIntoSealedSegmentKeepsMarkersHonest ensures truncating into a
// sealed (trusted, not yet indexed) segment, appending past the old end and
// reopening serves exactly the new records: no marker of the old history
// is trusted for the new files.
func TestTruncateIntoSealedSegmentKeepsMarkersHonest(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, opts := manySegments(t, mode)
		lg := openLog(t, dir, opts...)
		tp, err := lg.Topic("events")
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		require.NoError(t, p.Truncate(5))
		for i := 5; i < 130; i++ {
			_, err := p.Append(context.Background(), log.Record{Value: append([]byte("new-"), val(i)...)})
			require.NoError(t, err)
		}
		_, p = reopen(t, lg, opts...)
		all := readAll(t, p)
		require.Len(t, all, 130)
		for i, r := range all {
			require.EqualValues(t, i, r.Offset)
			want := val(i)
			if i >= 5 {
				want = append([]byte("new-"), want...)
			}
			require.Equal(t, want, r.Value)
		}
		segs := segments(t, dir, "events", 0)
		assert.Len(t, sealMarkers(t, dir, "events", 0), len(segs)-1, "no orphan markers")
	})
}

// TestAppendDoesNotWaitForTheFirstReadOfASealedSegment ensures the first
// read of a segment trusted by its seal marker, which walks the segment to
// build its index, holds no lock an append needs: appends complete while
// that walk is held still, and the read then returns the right records.
func TestAppendDoesNotWaitForTheFirstReadOfASealedSegment(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir, opts := manySegments(t, mode)
		p, err := openEventsPartition(t, dir, opts...)
		require.NoError(t, err)

		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		restore := log.SetIndexBuild(func() {
			once.Do(func() {
				close(entered)
				<-release
			})
		})
		defer restore()
		read := make(chan []log.Record, 1)
		go func() {
			recs, err := p.Read(0, 1<<10)
			assert.NoError(t, err)
			read <- recs
		}()
		<-entered // the first read is walking segment 0, held still

		appended := make(chan error, 1)
		go func() {
			_, err := p.Append(context.Background(), log.Record{Value: val(100)})
			appended <- err
		}()
		select {
		case err := <-appended:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("an append waited for the first read of a sealed segment")
		}
		close(release)
		recs := <-read
		require.NotEmpty(t, recs)
		for i, r := range recs {
			assert.Equal(t, val(i), r.Value)
		}
		assert.EqualValues(t, 101, p.HighWatermark())
	})
}
