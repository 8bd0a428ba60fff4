package log

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitersFlagProtocol ensures the ModeMmap handshake works as
// follow.go describes: a sleeping follower of a read-only log holds both
// watches and has raised the flag the writer sees, the writer's append
// clears it (the signal), and a partition nobody follows keeps the flag
// down, so its appends cost no signal.
func TestWaitersFlagProtocol(t *testing.T) {
	dir := t.TempDir()
	lg, err := Open(dir, WithMode(ModeMmap))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 1)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tp.Partition(0)
	ro, err := Open(dir, ReadOnly(), WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rtp, err := ro.Topic("events")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rtp.Partition(0)
	flag := func() uint32 { return atomic.LoadUint32(w.xproc.waiters.flag()) }

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := r.Follow(0).Next(ctx, 1<<20)
		got <- err
	}()
	require.Eventually(t, func() bool { return flag() != 0 }, 10*time.Second, time.Millisecond,
		"the follower never raised the flag")
	r.xproc.mu.Lock()
	dirWatched, fileWatched, followers := r.xproc.dirWatch != nil, r.xproc.fileWatch != nil, r.xproc.followers
	r.xproc.mu.Unlock()
	if !dirWatched || !fileWatched || followers != 1 {
		t.Fatalf("sleeping follower: dir watched %t, file watched %t, followers %d", dirWatched, fileWatched, followers)
	}
	if _, err := w.Append(ctx, Record{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if f := flag(); f != 0 {
		t.Fatalf("flag %d after the signal, want 0", f)
	}
	for range 100 {
		if _, err := w.Append(ctx, Record{Value: []byte("y")}); err != nil {
			t.Fatal(err)
		}
	}
	if f := flag(); f != 0 {
		t.Fatalf("flag %d with nobody following, want 0", f)
	}
}

// TestCrossProcessSignalRunsOnChange ensures a crossProcess works on its
// own, with no Partition around it: a reader's armed follower raises the
// flag of the waiters file a writer's crossProcess created, the writer's
// signal clears it, and the reader's watch hands the change to its
// onChange callback (the partition's refresh and wake-up).
func TestCrossProcessSignalRunsOnChange(t *testing.T) {
	dir := t.TempDir()
	writer := &crossProcess{dir: dir, mmap: true, pollInterval: time.Hour, readOnly: func() bool { return false }}
	writer.openWaitersLocked(true)
	require.NotNil(t, writer.waiters, "the writer did not create the waiters file")
	defer writer.closeFollowLocked()

	changed := make(chan struct{}, 1)
	reader := &crossProcess{dir: dir, mmap: true, pollInterval: time.Hour, readOnly: func() bool { return true },
		onChange: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}
	defer reader.closeFollowLocked()
	defer reader.enterWait()()
	reader.armFollow()
	reader.mu.Lock()
	dirWatched, fileWatched := reader.dirWatch != nil, reader.fileWatch != nil
	reader.mu.Unlock()
	require.True(t, dirWatched && fileWatched, "armed follower: dir watched %t, file watched %t", dirWatched, fileWatched)
	flag := func() uint32 { return atomic.LoadUint32(writer.waiters.flag()) }
	require.EqualValues(t, 1, flag(), "the armed follower did not raise the flag")

	writer.signalFollowersLocked()
	require.EqualValues(t, 0, flag(), "the signal did not clear the flag")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the signal never reached the reader's onChange")
	}
}
