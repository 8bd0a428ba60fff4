package log

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errInjected = errors.New("injected I/O error")

// failingWriter wraps a segment's write path and fails writes or syncs on
// demand.
type failingWriter struct {
	segmentWriter
	failWrite, failSync bool
}

func (f *failingWriter) write(frames []byte, pos int64) error {
	if f.failWrite {
		return errInjected
	}
	return f.segmentWriter.write(frames, pos)
}

func (f *failingWriter) sync() error {
	if f.failSync {
		return errInjected
	}
	return f.segmentWriter.sync()
}

// injectFailures wraps the active segment's write path of partition 0 of a
// new topic in dir.
func injectFailures(t *testing.T, dir string) (*Log, *Partition, *failingWriter) {
	t.Helper()
	lg, err := Open(dir)
	require.NoError(t, err)
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(context.Background(), Record{Value: []byte("before")})
	require.NoError(t, err)
	fw := &failingWriter{segmentWriter: p.segs.active().w}
	p.segs.active().w = fw
	return lg, p, fw
}

// TestFailedSyncFailsThePartitionUntilReopened ensures a failed sync is
// returned to every AckSynced appender it would have covered and to every
// later append, Sync and Close (a failed fsync cannot be retried safely),
// and that reopening recovers.
func TestFailedSyncFailsThePartitionUntilReopened(t *testing.T) {
	dir := t.TempDir()
	lg, p, fw := injectFailures(t, dir)
	fw.failSync = true
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := p.AppendAck(context.Background(), AckSynced, Record{Value: []byte("x")})
			assert.ErrorIs(t, err, errInjected)
		})
	}
	wg.Wait()
	_, err := p.Append(context.Background(), Record{Value: []byte("later")})
	require.ErrorIs(t, err, errInjected)
	assert.Contains(t, err.Error(), "an earlier write or sync failed, reopen to recover")
	require.ErrorIs(t, p.Sync(), errInjected)
	require.ErrorIs(t, p.Truncate(0), errInjected)
	require.ErrorIs(t, lg.Close(), errInjected)

	lg, err = Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.Topic("events")
	require.NoError(t, err)
	p, _ = tp.Partition(0)
	// The frames of the first round were written (only their sync failed);
	// those still pending when it failed were dropped.
	assert.True(t, p.HighWatermark() >= 2 && p.HighWatermark() <= 9, "next offset %d", p.HighWatermark())
	_, err = p.AppendAck(context.Background(), AckSynced, Record{Value: []byte("again")})
	require.NoError(t, err)
}

// TestFailedWriteDropsWhatFollowsIt ensures a failed group write fails the
// appenders in it, drops frames accepted after it (their offsets follow the
// lost ones), and leaves the log as it was before it.
func TestFailedWriteDropsWhatFollowsIt(t *testing.T) {
	dir := t.TempDir()
	lg, p, fw := injectFailures(t, dir)
	fw.failWrite = true
	_, err := p.AppendAck(context.Background(), AckWritten, Record{Value: []byte("lost")})
	require.ErrorIs(t, err, errInjected)
	_, err = p.AppendAck(context.Background(), AckNone, Record{Value: []byte("refused")})
	require.ErrorIs(t, err, errInjected)
	assert.EqualValues(t, 1, p.HighWatermark())
	require.ErrorIs(t, lg.Close(), errInjected)

	lg, err = Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.Topic("events")
	require.NoError(t, err)
	p, _ = tp.Partition(0)
	assert.EqualValues(t, 1, p.HighWatermark())
}

// TestPointTakenBeforeTruncateIsNotSaved ensures a recovery point a sync
// round took before a Truncate, saved after it, cannot raise the point
// above the truncated end (the next open would take the cut records for
// lost ones and fail).
func TestPointTakenBeforeTruncateIsNotSaved(t *testing.T) {
	dir := t.TempDir()
	lg, err := Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, _ := tp.Partition(0)
	for range 10 {
		_, err := p.AppendAck(context.Background(), AckSynced, Record{Value: []byte("x")})
		require.NoError(t, err)
	}
	p.w.mu.Lock()
	at, lowered := p.w.syncedAt, p.rp.lowered.Load()
	p.w.mu.Unlock()
	require.EqualValues(t, 10, at.Offset)
	require.NoError(t, p.Truncate(5))
	require.NoError(t, p.rp.notePoint(at, lowered, true))
	pt, err := loadRecoveryPoint(p.dir)
	require.NoError(t, err)
	assert.EqualValues(t, 5, pt.Offset)
}

// blockingWriter wraps a segment's write path; its syncs wait for release.
type blockingWriter struct {
	segmentWriter
	entered chan struct{}
	release chan struct{}
}

func (b *blockingWriter) sync() error {
	b.entered <- struct{}{}
	<-b.release
	return b.segmentWriter.sync()
}

// TestSyncedAppendTruncatedBeforeItsSyncDoesNotHang ensures AckSynced
// appends whose records a concurrent Truncate removes return (ErrTruncated,
// or nil when their sync was recorded before the cut began) instead of
// waiting, or syncing, for ever.
func TestSyncedAppendTruncatedBeforeItsSyncDoesNotHang(t *testing.T) {
	lg, err := Open(t.TempDir(), WithMode(ModeFile))
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, _ := tp.Partition(0)
	ctx := context.Background()
	_, err = p.Append(ctx, Record{Value: []byte("kept")})
	require.NoError(t, err)
	bw := &blockingWriter{segmentWriter: p.segs.active().w, entered: make(chan struct{}, 100), release: make(chan struct{})}
	p.segs.active().w = bw

	first := make(chan error, 1)
	go func() { _, err := p.AppendAck(ctx, AckSynced, Record{Value: []byte("b")}); first <- err }()
	<-bw.entered // a round syncs offsets below 2, and blocks
	second := make(chan error, 1)
	go func() { _, err := p.AppendAck(ctx, AckSynced, Record{Value: []byte("a")}); second <- err }()
	waitFor(t, p, func() bool { return p.w.assigned == 3 })
	truncated := make(chan error, 1)
	go func() { truncated <- p.Truncate(1) }()
	waitFor(t, p, func() bool { return p.w.writing && p.w.written == 3 }) // Truncate holds the writer role
	close(bw.release)

	for name, ch := range map[string]chan error{"first": first, "second": second, "truncate": truncated} {
		select {
		case err := <-ch:
			if name != "truncate" && err != nil {
				require.ErrorIs(t, err, ErrTruncated, name) // both appends' records are cut
			} else {
				require.NoError(t, err, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s hangs", name)
		}
	}
	assert.EqualValues(t, 1, p.HighWatermark())
}

// waitFor polls cond under p's writer mutex until it holds.
func waitFor(t *testing.T, p *Partition, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.w.mu.Lock()
		defer p.w.mu.Unlock()
		return cond()
	}, 10*time.Second, time.Millisecond, "condition not reached")
}

// TestSyncRacingTruncateNeverClaimsCutRecords ensures a sync round that was
// running while a Truncate cut the log does not record the cut records as
// synced: the next AckSynced append at a reused offset still syncs.
func TestSyncRacingTruncateNeverClaimsCutRecords(t *testing.T) {
	lg, err := Open(t.TempDir(), WithMode(ModeFile))
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	p, _ := tp.Partition(0)
	ctx := context.Background()
	_, err = p.Append(ctx, Record{Value: []byte("kept")})
	require.NoError(t, err)
	bw := &blockingWriter{segmentWriter: p.segs.active().w, entered: make(chan struct{}, 100), release: make(chan struct{})}
	p.segs.active().w = bw

	synced := make(chan error, 1)
	go func() { _, err := p.AppendAck(ctx, AckSynced, Record{Value: []byte("cut")}); synced <- err }()
	<-bw.entered // the round syncs offsets 0 and 1, and blocks
	truncated := make(chan error, 1)
	go func() { truncated <- p.Truncate(1) }()
	waitFor(t, p, func() bool { return p.rp.lowered.Load() == 1 }) // Truncate waits for the sync
	close(bw.release)
	require.NoError(t, <-truncated)
	if err := <-synced; err != nil {
		require.ErrorIs(t, err, ErrTruncated)
	}
	p.w.mu.Lock()
	syncedTo := p.w.syncedTo
	p.w.mu.Unlock()
	require.LessOrEqual(t, syncedTo, int64(1), "nothing above the cut counts as synced")

	before := p.w.syncCalls.Load()
	off, err := p.AppendAck(ctx, AckSynced, Record{Value: []byte("reused")})
	require.NoError(t, err)
	require.EqualValues(t, 1, off)
	assert.Greater(t, p.w.syncCalls.Load(), before, "the record at the reused offset was synced")
}
