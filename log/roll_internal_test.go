package log

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncAfterARollWaitsForTheSealedSegment ensures a roll's sync of the
// sealed segment, now done by a sealer off the append path, still comes
// before any sync that claims the records: appends that roll return while
// the sealer is held, but AckSynced, Sync and the recovery point wait for it,
// and its seal marker is on disk once they return.
func TestSyncAfterARollWaitsForTheSealedSegment(t *testing.T) {
	for _, mode := range []Mode{ModeFile, ModeMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			lg, err := Open(dir, WithMode(mode), WithSegmentBytes(1024))
			require.NoError(t, err)
			defer lg.Close()
			tp, err := lg.CreateTopic("events", 1)
			require.NoError(t, err)
			p, _ := tp.Partition(0)

			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hook := func() {
				once.Do(func() { close(entered) })
				<-release
			}
			sealerHook.Store(&hook)
			defer sealerHook.Store(nil)
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })

			ctx := context.Background()
			for i := 0; p.segs.len() < 2; i++ { // 56-byte frames: 18 fill a segment
				_, err := p.Append(ctx, Record{Value: []byte("value-0000")})
				require.NoError(t, err)
			}
			<-entered // the first roll's sealer is held; the append that rolled returned
			first := p.segs.at(0)
			_, err = os.Stat(filepath.Join(p.dir, sealedName(first.base)))
			require.ErrorIs(t, err, os.ErrNotExist, "no marker before the sealer ran")

			synced := make(chan error, 1)
			go func() { synced <- p.Sync() }()
			select {
			case err := <-synced:
				t.Fatalf("Sync returned (%v) while the sealed segment was not yet synced", err)
			case <-time.After(50 * time.Millisecond):
			}
			p.w.mu.Lock()
			syncedTo := p.w.syncedTo
			p.w.mu.Unlock()
			assert.Less(t, syncedTo, first.next, "the sealed segment's records do not count as synced")

			releaseOnce.Do(func() { close(release) })
			require.NoError(t, <-synced)
			_, err = os.Stat(filepath.Join(p.dir, sealedName(first.base)))
			require.NoError(t, err, "the marker is written before the records count as synced")
			p.w.mu.Lock()
			assert.Equal(t, p.HighWatermark(), p.w.syncedTo)
			p.w.mu.Unlock()
		})
	}
}
