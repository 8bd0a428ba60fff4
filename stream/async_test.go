package stream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// heldSink is an AsyncSink that keeps each batch's ack until released, and
// fails the batch holding failValue.
type heldSink struct {
	mu        sync.Mutex
	pending   []func(int, error)
	batches   [][]int
	failValue int
	taken     chan struct{}
}

func newHeldSink() *heldSink { return &heldSink{failValue: -1, taken: make(chan struct{}, 100)} }

func (h *heldSink) Write(ctx context.Context, v []int) error { return errors.New("not used") }

func (h *heldSink) WriteAsync(_ context.Context, v []int, ack func(int, error)) error {
	h.mu.Lock()
	h.batches = append(h.batches, append([]int(nil), v...))
	i := -1
	for j, x := range v {
		if x == h.failValue {
			i = j
		}
	}
	if i >= 0 {
		h.mu.Unlock()
		ack(i, errors.New("broker said no"))
		h.taken <- struct{}{}
		return nil
	}
	h.pending = append(h.pending, ack)
	h.mu.Unlock()
	h.taken <- struct{}{}
	return nil
}

// release acknowledges every batch taken so far.
func (h *heldSink) release() {
	h.mu.Lock()
	p := h.pending
	h.pending = nil
	h.mu.Unlock()
	for _, ack := range p {
		ack(-1, nil)
	}
}

func (h *heldSink) Flush(ctx context.Context) error {
	for {
		h.mu.Lock()
		n := len(h.pending)
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// TestAsyncSinkPositionFollowsTheAcknowledgement proves a record written to
// an AsyncSink is finished only once the sink acknowledged it: the forced
// position stays 0 while every batch is taken but unacknowledged, reaches
// 10 after the acks, and Run returns only after they came.
func TestAsyncSinkPositionFollowsTheAcknowledgement(t *testing.T) {
	sink := newHeldSink()
	var store streamtest.RecordingStore
	s := stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(5))).To(sink).Checkpointing(&store)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	<-sink.taken
	<-sink.taken // both batches written, none acknowledged
	require.NoError(t, s.Checkpoint(context.Background()))
	_, saved := store.Position(streamtest.Topic, 0)
	assert.False(t, saved, "nothing acknowledged, nothing saved")
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before the acknowledgements", err)
	case <-time.After(50 * time.Millisecond):
	}
	sink.release()
	require.NoError(t, <-done)
	pos, _ := store.Position(streamtest.Topic, 0)
	assert.Equal(t, int64(10), pos)
}

// TestAsyncSinkFailureStopsBeforeTheFailedBatch proves a failed
// acknowledgement stops Run with a RecordError naming the failed record,
// and no position passes the failed batch.
func TestAsyncSinkFailureStopsBeforeTheFailedBatch(t *testing.T) {
	sink := newHeldSink()
	sink.failValue = 7
	var store streamtest.RecordingStore
	s := stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(5))).To(sink).Checkpointing(&store, stream.CheckpointEachBatch())
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	<-sink.taken
	sink.release()
	err := <-done
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, int64(7), re.Offset)
	pos, _ := store.Position(streamtest.Topic, 0)
	assert.LessOrEqual(t, pos, int64(5))

	// With Skip the failed batch counts as finished.
	sink = newHeldSink()
	sink.failValue = 7
	store = streamtest.RecordingStore{}
	s = stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(5))).To(sink, stream.Skip()).Checkpointing(&store)
	go func() { done <- s.Run(context.Background()) }()
	<-sink.taken
	sink.release()
	require.NoError(t, <-done)
	pos, _ = store.Position(streamtest.Topic, 0)
	assert.Equal(t, int64(10), pos)
	assert.Equal(t, int64(5), s.Stats()[0].Skipped)
}
