package log

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWaitersWakeClosesOnlyAHandedOutChannel ensures wake closes the
// channel a waiter took, once, and that a wake with nobody waiting leaves
// the channel as it is (no new channel per append: see wake).
func TestWaitersWakeClosesOnlyAHandedOutChannel(t *testing.T) {
	w := waiters{ch: make(chan struct{})}
	idle := w.ch
	w.wake()
	require.True(t, idle == w.ch, "a wake with nobody waiting replaced the channel")

	ch := w.channel()
	select {
	case <-ch:
		t.Fatal("the channel was closed before any wake")
	default:
	}
	w.wake()
	<-ch // closed by the wake; blocks (and the test times out) if not
	next := w.channel()
	require.False(t, next == ch, "the channel after a wake is the closed one")
	select {
	case <-next:
		t.Fatal("the new channel is closed before the next wake")
	default:
	}
	w.wake()
	<-next
}
