package log_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// richRecord returns record i of the NextInto tests: keys nil, empty or
// set, values nil, empty or set, and zero to two headers, some with nil
// values.
func richRecord(i int) log.Record {
	r := log.Record{Timestamp: int64(1000 + i), Value: []byte(fmt.Sprintf("value-%d", i))}
	switch i % 3 {
	case 1:
		r.Key = []byte{}
		r.Value = nil
	case 2:
		r.Key = []byte(fmt.Sprintf("key-%d", i))
		r.Value = []byte{}
	}
	for h := range i % 3 {
		hv := []byte(fmt.Sprintf("hv-%d-%d", i, h))
		if (i+h)%4 == 0 {
			hv = nil
		}
		r.Headers = append(r.Headers, log.Header{Key: fmt.Sprintf("hk-%d-%d", i, h), Value: hv})
	}
	return r
}

func requireRecord(t *testing.T, want log.Record, got log.Record, off int64) {
	t.Helper()
	require.Equal(t, off, got.Offset)
	require.Equal(t, want.Timestamp, got.Timestamp)
	require.Equal(t, want.Key == nil, got.Key == nil, "offset %d: nil key", off)
	require.Equal(t, string(want.Key), string(got.Key))
	require.Equal(t, want.Value == nil, got.Value == nil, "offset %d: nil value", off)
	require.Equal(t, string(want.Value), string(got.Value))
	require.Len(t, got.Headers, len(want.Headers))
	for h := range want.Headers {
		require.Equal(t, want.Headers[h].Key, got.Headers[h].Key)
		require.Equal(t, want.Headers[h].Value == nil, got.Headers[h].Value == nil)
		require.Equal(t, string(want.Headers[h].Value), string(got.Headers[h].Value))
	}
}

// TestNextIntoAppendsAndKeepsBatchesValid ensures NextInto appends each
// batch after dst's elements, leaves those alone, and that by default every
// batch's keys, values and headers stay intact after later calls that reuse
// the same []Record.
func TestNextIntoAppendsAndKeepsBatchesValid(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(4096))
		p := openPartition(t, lg, "events", 1)
		const n = 300
		for i := range n {
			_, err := p.Append(context.Background(), richRecord(i))
			require.NoError(t, err)
		}
		r := p.Replay(0)
		sentinel := log.Record{Key: []byte("mine"), Offset: -7}
		buf := []log.Record{sentinel}
		var kept []log.Record
		for {
			var err error
			got, err := r.NextInto(context.Background(), buf[:1], 500)
			if errors.Is(err, io.EOF) {
				require.Len(t, got, 1)
				break
			}
			require.NoError(t, err)
			require.Greater(t, len(got), 1)
			require.Equal(t, sentinel.Offset, got[0].Offset)
			require.Equal(t, "mine", string(got[0].Key))
			kept = append(kept, got[1:]...) // the Records are copied, their bytes are not
			buf = got
		}
		require.Len(t, kept, n)
		for i, rec := range kept {
			requireRecord(t, richRecord(i), rec, int64(i))
			require.Equal(t, "events", rec.Topic)
		}
	})
}

// TestNextIntoReuseBytes ensures a Reader with SetReuseBytes returns the
// right records batch by batch, its header keys staying valid after later
// calls.
func TestNextIntoReuseBytes(t *testing.T) {
	lg := openLog(t, t.TempDir(), log.WithSegmentBytes(4096))
	p := openPartition(t, lg, "events", 1)
	const n = 300
	for i := range n {
		_, err := p.Append(context.Background(), richRecord(i))
		require.NoError(t, err)
	}
	r := p.Replay(0)
	r.SetReuseBytes(true)
	var batch []log.Record
	var keys []string
	next := int64(0)
	for {
		var err error
		batch, err = r.NextInto(context.Background(), batch[:0], 700)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, rec := range batch {
			requireRecord(t, richRecord(int(next)), rec, next)
			for _, h := range rec.Headers {
				keys = append(keys, h.Key)
			}
			next++
		}
	}
	require.EqualValues(t, n, next)
	var want []string
	for i := range n {
		for _, h := range richRecord(i).Headers {
			want = append(want, h.Key)
		}
	}
	require.Equal(t, want, keys)
}

// TestNextIntoAllocatesPerBatchNotPerRecord ensures a 1 MiB batch of small
// records with headers costs a few allocations, not one per record.
func TestNextIntoAllocatesPerBatchNotPerRecord(t *testing.T) {
	lg := openLog(t, t.TempDir())
	p := openPartition(t, lg, "events", 1)
	recs := make([]log.Record, 1000)
	for i := range recs {
		recs[i] = log.Record{Value: make([]byte, 64), Timestamp: 1,
			Headers: []log.Header{{Key: "a", Value: []byte("1")}, {Key: "b"}}}
	}
	for range 20 {
		_, err := p.Append(context.Background(), recs...)
		require.NoError(t, err)
	}
	ctx := context.Background()
	for _, reuse := range []bool{false, true} {
		r := p.Replay(0)
		r.SetReuseBytes(reuse)
		batch, err := r.NextInto(ctx, nil, 1<<20)
		require.NoError(t, err)
		require.Greater(t, len(batch), 5000)
		// AllocsPerRun reads the process's malloc count, which also
		// counts the log's own background goroutines (the writer's
		// recovery point and syncs after the appends above): under load
		// one of theirs landed in a 5-run window and made it 5 per run.
		// Over 50 runs (integer division) a stray one is not counted.
		allocs := testing.AllocsPerRun(50, func() {
			r.SetPosition(0)
			batch, err = r.NextInto(ctx, batch[:0], 1<<20)
			if err != nil {
				panic(err)
			}
		})
		require.LessOrEqual(t, allocs, 4.0, "reuse=%v: %v allocations for a batch of %d records", reuse, allocs, len(batch))
	}
}

// TestReadReportsAFrameChangedAfterItWasVerified ensures a read still CRC
// checks every frame it returns: a byte flipped in a record's body after
// the log was opened fails the read with a *CorruptError naming the frame.
func TestReadReportsAFrameChangedAfterItWasVerified(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		p := openPartition(t, lg, "events", 1)
		appendN(t, p, 0, 10) // 56-byte frames
		f, err := os.OpenFile(segPath(dir, "events", 0, 0), os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte{0xff}, 3*56+40) // in the value of offset 3
		require.NoError(t, err)
		recs, err := p.Read(0, 1<<20)
		var ce *log.CorruptError
		require.ErrorAs(t, err, &ce)
		require.EqualValues(t, 3*56, ce.Position)
		require.EqualValues(t, 3, ce.Offset)
		require.Equal(t, "frame changed after it was verified", ce.Reason)
		require.Len(t, recs, 3)

		var batch []log.Record
		r := p.Replay(0)
		batch, err = r.NextInto(context.Background(), batch, 1<<20)
		require.ErrorIs(t, err, log.ErrCorrupt)
		require.Empty(t, batch)
	})
}
