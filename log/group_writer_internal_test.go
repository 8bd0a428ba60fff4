package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeStore is a frameStore with no segments: it records the offsets and
// epochs of the frames of each write, holds the first write until release
// is closed, and fails every write once fail is set.
type fakeStore struct {
	mu      sync.Mutex
	writes  [][]int64 // offsets, one slice per writeFrames call
	epochs  []int32   // the epoch of every frame written
	at      point
	entered chan struct{}
	release chan struct{}
	fail    error
}

func (f *fakeStore) writeFrames(frames []byte, n int, _ bool) (int, point, error) {
	f.mu.Lock()
	first, fail := len(f.writes) == 0, f.fail
	f.mu.Unlock()
	if first {
		close(f.entered)
		<-f.release
	}
	if fail != nil {
		return 0, f.at, fail
	}
	var offs []int64
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(frames) > 0 {
		bodyLen, _ := frameHeader(frames)
		body := frames[frameHeaderBytes : frameHeaderBytes+int(bodyLen)]
		offs = append(offs, bodyOffset(body))
		f.epochs = append(f.epochs, int32(binary.LittleEndian.Uint32(body[4:])))
		size := padded(frameHeaderBytes + int(bodyLen))
		f.at.Position += int64(size)
		frames = frames[size:]
	}
	f.at.Offset += int64(len(offs))
	if len(offs) != n {
		return 0, f.at, fmt.Errorf("writeFrames: %d frames, told %d", len(offs), n)
	}
	f.writes = append(f.writes, offs)
	return n, f.at, nil
}

// newTestWriter starts a groupWriter on its own, over store, at offset 0.
func newTestWriter(t *testing.T, store frameStore, epoch int32) *groupWriter {
	t.Helper()
	w := &groupWriter{}
	dir := t.TempDir()
	w.start(writerSetup{topic: "events", cfg: &config{}, dir: dir, store: store,
		rp: &recoveryPoints{dir: dir}, epoch: func() int32 { return epoch }}, &segment{})
	return w
}

// TestGroupWriterGroupsAppendersWhileAWriteRuns drives the group writer
// alone, through its frameStore: appenders that arrive while the first
// write runs are written together by one write, in offset order, each
// frame stamped with the epoch the writer was given.
func TestGroupWriterGroupsAppendersWhileAWriteRuns(t *testing.T) {
	store := &fakeStore{entered: make(chan struct{}), release: make(chan struct{})}
	w := newTestWriter(t, store, 7)
	rec := []Record{{Value: []byte("v")}}
	size := frameSize(&rec[0])

	errs := make(chan error, 9)
	go func() { _, err := w.append(AckWritten, rec, 1, false, size); errs <- err }()
	<-store.entered // the first appender writes offset 0 and is held
	for range 8 {
		go func() { _, err := w.append(AckWritten, rec, 1, false, size); errs <- err }()
	}
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.pendRecs == 8
	}, 10*time.Second, time.Millisecond, "the other appenders wait with their frames pending")
	close(store.release)
	for range 9 {
		require.NoError(t, <-errs)
	}

	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, [][]int64{{0}, {1, 2, 3, 4, 5, 6, 7, 8}}, store.writes, "one write for the first, one for the rest")
	for _, e := range store.epochs {
		assert.EqualValues(t, 7, e)
	}
	assert.EqualValues(t, 2, w.writeCalls.Load())
}

// TestGroupWriterFailedStoreWriteIsSticky ensures a write its store fails
// fails the appender, and every later append, Sync and close, naming the
// topic and partition.
func TestGroupWriterFailedStoreWriteIsSticky(t *testing.T) {
	errDisk := errors.New("disk on fire")
	store := &fakeStore{entered: make(chan struct{}), release: make(chan struct{}), fail: errDisk}
	close(store.release)
	w := newTestWriter(t, store, 1)
	rec := []Record{{Value: []byte("v")}}
	_, err := w.append(AckWritten, rec, 1, false, frameSize(&rec[0]))
	require.ErrorIs(t, err, errDisk)
	_, err = w.append(AckNone, rec, 1, false, frameSize(&rec[0]))
	require.ErrorIs(t, err, errDisk)
	assert.Contains(t, err.Error(), "topic events partition 0: an earlier write or sync failed")
	require.ErrorIs(t, w.sync(), errDisk)
	require.ErrorIs(t, w.close(), errDisk)
}

// appendRecords appends n one-record calls with ack and fails the test on an error.
func appendRecords(t *testing.T, w *groupWriter, ack Ack, n int) {
	t.Helper()
	rec := []Record{{Value: []byte("v")}}
	for range n {
		_, err := w.append(ack, rec, 1, false, frameSize(&rec[0]))
		require.NoError(t, err)
	}
}

// TestGroupWriterDropsFramesAcceptedWhileATruncateHeldTheWriterRole ensures
// the frames appenders encode while a Truncate holds the writer role (their
// offsets follow the old end) are dropped when it cuts the log: they were
// written after the cut's new records before, at offsets that did not follow
// them, which a reader walking the segment took for corruption ("unexpected
// offset"), found by TestStressEveryPartOfAPartitionAtOnceUnderTheRaceDetector.
func TestGroupWriterDropsFramesAcceptedWhileATruncateHeldTheWriterRole(t *testing.T) {
	store := &fakeStore{entered: make(chan struct{}), release: make(chan struct{})}
	close(store.release)
	w := newTestWriter(t, store, 0)
	appendRecords(t, w, AckWritten, 10) // offsets 0 to 9

	require.NoError(t, w.acquireWriter()) // a Truncate to offset 5 begins
	rec := []Record{{Value: []byte("v")}}
	off, err := w.append(AckNone, rec, 1, false, frameSize(&rec[0]))
	require.NoError(t, err)
	require.EqualValues(t, 10, off, "accepted at the old end while the cut runs")
	w.releaseWriter(&point{Offset: 5}) // the cut is made

	off, err = w.append(AckWritten, rec, 1, false, frameSize(&rec[0]))
	require.NoError(t, err)
	require.EqualValues(t, 5, off)
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, []int64{5}, store.writes[len(store.writes)-1], "the last write holds offset 5 alone, not the dropped frame of offset 10 before it")
}

// TestGroupWriterSyncRoundOutlivesATruncateBelowItsEnd ensures a sync round
// that waits for the writer role while a Truncate cuts below the round's end
// syncs what is left instead of failing: its appender, whose record was cut,
// gets ErrTruncated, and the partition goes on (before, ErrTruncated became
// the partition's sticky error: every later append and Close failed).
func TestGroupWriterSyncRoundOutlivesATruncateBelowItsEnd(t *testing.T) {
	store := &fakeStore{entered: make(chan struct{}), release: make(chan struct{})}
	close(store.release)
	w := newTestWriter(t, store, 0)
	appendRecords(t, w, AckWritten, 10)

	require.NoError(t, w.acquireWriter()) // a Truncate to offset 5 begins
	synced := make(chan error, 1)
	go func() {
		rec := []Record{{Value: []byte("v")}}
		_, err := w.append(AckSynced, rec, 1, false, frameSize(&rec[0]))
		synced <- err
	}()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.round != nil && w.maxWaitEnd == 11
	}, 10*time.Second, time.Millisecond, "the AckSynced appender leads a round that waits for the writer role")
	w.releaseWriter(&point{Offset: 5}) // the cut is made

	require.ErrorIs(t, <-synced, ErrTruncated, "its record was cut before its sync")
	appendRecords(t, w, AckWritten, 1)
	appendRecords(t, w, AckSynced, 1)
	require.NoError(t, w.sync())
	require.NoError(t, w.close())
}
