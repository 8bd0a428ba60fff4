package log

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTruncateDropsFramesAppendedWhileItHeldTheWriterRole pins the
// interleaving that wrote frames of repeated offsets in the stress test:
// a Truncate holds the writer role while it waits for a sealer, an AckNone
// append meanwhile encodes its frame at the next offset and leaves it
// pending, and the Truncate then set the writer's next offset back to the
// end it left, the pending frame kept. The next append was numbered from
// there again: two frames of one offset in the file (a writer's reopen or a
// read-only reader reports the second as corruption, and the high
// watermark counts a record no read finds). A Truncate that cut nothing
// (offset at the end, or out of range) must leave the pending frame and its
// offset alone; one that cut must drop it (it was numbered above the old
// end), so the next append continues at the cut.
func TestTruncateDropsFramesAppendedWhileItHeldTheWriterRole(t *testing.T) {
	for _, tc := range []struct {
		name string
		back int64 // Truncate at HighWatermark - back (-1: above it, out of range)
	}{{"nothing cut", 0}, {"out of range", -1}, {"cut", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			lg, err := Open(t.TempDir(), WithSegmentBytes(1024), CreateIfMissing())
			require.NoError(t, err)
			defer lg.Close()
			tp, err := lg.CreateTopic("events", 1)
			require.NoError(t, err)
			p, _ := tp.Partition(0)

			entered, release := make(chan struct{}), make(chan struct{})
			var once, releaseOnce sync.Once
			hook := func() {
				once.Do(func() { close(entered) })
				<-release
			}
			sealerHook.Store(&hook)
			defer sealerHook.Store(nil)
			defer releaseOnce.Do(func() { close(release) })

			ctx := context.Background()
			val := func(i int) []byte { return fmt.Appendf(nil, "value-%04d", i) }
			n := 0
			for ; p.segs.len() < 2; n++ {
				_, err := p.Append(ctx, Record{Value: val(n)})
				require.NoError(t, err)
			}
			<-entered // the roll's sealer is held: a Truncate waits for it holding the writer role
			hw := p.HighWatermark()
			truncated := make(chan error, 1)
			go func() { truncated <- p.Truncate(hw - tc.back) }()
			deadline := time.Now().Add(10 * time.Second)
			for { // until the Truncate holds the writer role
				p.w.mu.Lock()
				writing := p.w.writing
				p.w.mu.Unlock()
				if writing {
					break
				}
				require.True(t, time.Now().Before(deadline), "Truncate never took the writer role")
				runtime.Gosched()
			}
			pendingOff, err := p.AppendAck(ctx, AckNone, Record{Value: val(n)}) // pending behind the Truncate
			require.NoError(t, err)
			require.Equal(t, hw, pendingOff)
			releaseOnce.Do(func() { close(release) })
			err = <-truncated
			var oor *OffsetOutOfRangeError
			require.True(t, err == nil || (tc.back < 0 && errors.As(err, &oor)), "truncate: %v", err)

			next, err := p.Append(ctx, Record{Value: val(n + 1)})
			require.NoError(t, err)
			if tc.back > 0 {
				require.Equal(t, hw-tc.back, next, "the append continues at the cut")
			} else {
				require.Equal(t, hw+1, next, "the append follows the pending one")
			}
			require.NoError(t, p.Sync())
			// Every offset below the high watermark reads back as itself.
			for off := p.StartOffset(); off < p.HighWatermark(); off++ {
				recs, err := p.Read(off, 1)
				require.NoError(t, err, "offset %d", off)
				require.NotEmpty(t, recs, "offset %d is below the high watermark %d but reads nothing", off, p.HighWatermark())
				require.Equal(t, off, recs[0].Offset)
			}
			require.Equal(t, next+1, p.HighWatermark())
		})
	}
}
