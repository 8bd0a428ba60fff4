package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reugn/go-streams/flow"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// fakeTxn is a Transactor and a TransactionalSink in one: what the sink
// writes is pending until EndTransaction commits it with positions, as a
// Kafka transaction would. It checks, at every end, the exactly-once
// invariant: the pending writes are exactly the records between the last
// committed position and the new one (none missing, none past it).
type fakeTxn struct {
	mu        sync.Mutex
	begun     bool
	pending   []int
	committed []int
	pos       int64
	ends      int
	violation error
}

func (f *fakeTxn) Load(context.Context, string, int32) (checkpoint.Position, bool, error) {
	return checkpoint.Position{}, false, nil
}

func (f *fakeTxn) Save(context.Context, string, int32, checkpoint.Position) error {
	return errors.New("fakeTxn: Save outside a transaction")
}

func (f *fakeTxn) BeginTransactions(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begun = true
	return nil
}

func (f *fakeTxn) EndTransaction(_ context.Context, positions []checkpoint.TopicPosition, commit bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends++
	if !commit {
		f.pending = nil
		return false, nil
	}
	next := f.pos
	for _, tp := range positions {
		next = tp.Position.Offset
	}
	seen := map[int]bool{}
	for _, v := range f.pending {
		if int64(v) < f.pos || int64(v) >= next || seen[v] {
			f.violation = fmt.Errorf("transaction %d commits output of record %d outside [%d, %d) or twice", f.ends, v, f.pos, next)
		}
		seen[v] = true
	}
	if int64(len(seen)) != next-f.pos && f.violation == nil {
		f.violation = fmt.Errorf("transaction %d commits position %d with %d of the %d outputs below it", f.ends, next, len(seen), next-f.pos)
	}
	f.committed = append(f.committed, f.pending...)
	f.pending, f.pos = nil, next
	return true, nil
}

func (f *fakeTxn) JoinTransaction(t stream.Transactor) error {
	if t != stream.Transactor(f) {
		return errors.New("fakeTxn joins only itself")
	}
	return nil
}

func (f *fakeTxn) Write(_ context.Context, vs []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.begun {
		return errors.New("fakeTxn: write before BeginTransactions")
	}
	f.pending = append(f.pending, vs...)
	return nil
}

func TestExactlyOnceNeverCommitsAPositionPastAnUnwrittenOutputUnderParallel(t *testing.T) {
	const n = 20000
	values := make([]int, n)
	for i := range values {
		values[i] = i
	}
	f := &fakeTxn{}
	s := stream.From(streamtest.Slice(values, streamtest.BatchSize(64)), stream.ExactlyOnce(stream.TransactionInterval(1))).
		Map(func(_ context.Context, v int) (int, error) {
			x := 0
			for i := range (v * 7919) % 3000 { // records finish out of order
				x += i
			}
			_ = x
			return v, nil
		}, stream.Parallel(8)).
		To(f).Checkpointing(f)
	require.NoError(t, s.Run(context.Background()))
	require.NoError(t, f.violation)
	require.Len(t, f.committed, n)
	require.Greater(t, f.ends, 1, "the interval ended transactions while records were in flight")
}

func TestExactlyOnceAbortsTheLastTransactionWhenRunEndsWithRecordsUnfinished(t *testing.T) {
	f := &fakeTxn{}
	ctx, cancel := context.WithCancel(context.Background())
	s := stream.From(streamtest.Slice([]int{0, 1, 2, 3}), stream.ExactlyOnce()).
		Map(func(ctx context.Context, v int) (int, error) {
			if v == 2 {
				cancel()
				<-ctx.Done()
				return v, ctx.Err()
			}
			return v, nil
		}).
		To(f).Checkpointing(f)
	err := s.Run(ctx)
	// A transactor that is not Assignable cannot rewind: the abort
	// stops the run, and nothing of it was committed.
	require.ErrorIs(t, err, stream.ErrTransactionAborted)
	require.Empty(t, f.committed)
}

func TestExactlyOnceRefusesWhatCannotTakePart(t *testing.T) {
	f := &fakeTxn{}
	src := func() *streamtest.SliceSource[int] { return streamtest.Slice([]int{1, 2, 3}) }
	fl := flow.NewMap(func(v int) int { return v }, 1)
	defer close(fl.In()) // Run refuses the pipeline before it starts the flow
	cases := []struct {
		name string
		s    *stream.Stream[int]
		want string
	}{
		{"a sink that cannot join", stream.From(src(), stream.ExactlyOnce()).To(streamtest.Collect[int]()).Checkpointing(f), `sink "sink"`},
		{"a store that is no transactor", stream.From(src(), stream.ExactlyOnce()).To(f).Checkpointing(checkpoint.NewMemoryStore()), "does not run transactions"},
		{"no store", stream.From(src(), stream.ExactlyOnce()).To(f), "no store"},
		{"a dead-letter sink that cannot join", stream.From(src(), stream.ExactlyOnce()).
			Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.DeadLetter(streamtest.Collect[stream.Failure]())).
			To(f).Checkpointing(f), "dead-letter sink"},
		{"a go-streams flow", stream.Via[int, int](stream.From(src(), stream.ExactlyOnce()), fl).To(f).Checkpointing(f), "go-streams flow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Run(context.Background())
			require.ErrorIs(t, err, stream.ErrNotExactlyOnce)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// positionsSpy is a source that records whether Run gave it positions.
type positionsSpy struct {
	*streamtest.SliceSource[int]
	given bool
}

func (p *positionsSpy) SetPositions(ps stream.Positions) {
	if ps != nil {
		p.given = true
	}
}

func TestExactlyOnceGivesASourceNoPositionsToCommitOutsideTheTransactions(t *testing.T) {
	f := &fakeTxn{}
	src := &positionsSpy{SliceSource: streamtest.Slice([]int{1, 2, 3})}
	require.NoError(t, stream.From[int](src, stream.ExactlyOnce()).To(f).Checkpointing(f).Run(context.Background()))
	require.False(t, src.given, "a consumer group would commit them at a revocation, past outputs an abort truncates")
	require.Len(t, f.committed, 3)

	atLeastOnce := &positionsSpy{SliceSource: streamtest.Slice([]int{1, 2, 3})}
	require.NoError(t, stream.From[int](atLeastOnce).To(streamtest.Collect[int]()).Checkpointing(checkpoint.NewMemoryStore()).Run(context.Background()))
	require.True(t, atLeastOnce.given)
}

// abortingTxn is a fakeTxn whose first commit fails (a commit the
// transactor cannot make, such as a sink that lost its writer lock).
type abortingTxn struct {
	*fakeTxn
	aborted bool
}

func (a *abortingTxn) EndTransaction(ctx context.Context, positions []checkpoint.TopicPosition, commit bool) (bool, error) {
	if !a.aborted && commit {
		a.aborted = true
		return a.fakeTxn.EndTransaction(ctx, positions, false)
	}
	return a.fakeTxn.EndTransaction(ctx, positions, commit)
}

func (a *abortingTxn) JoinTransaction(t stream.Transactor) error {
	if t != stream.Transactor(a) {
		return errors.New("abortingTxn joins only itself")
	}
	return nil
}

func TestForeverRunsAgainAfterAnAbortedTransaction(t *testing.T) {
	a := &abortingTxn{fakeTxn: &fakeTxn{}}
	runs := 0
	err := stream.Forever(context.Background(), func() stream.Runner {
		runs++
		// A new run starts from the committed position, as a source
		// resuming from the transactor would.
		from := int(a.pos)
		values := []int{}
		for v := from; v < 5; v++ {
			values = append(values, v)
		}
		src := streamtest.Slice(values)
		return stream.From(src, stream.ExactlyOnce()).To(a).Checkpointing(a)
	}, stream.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 2, runs)
	require.Equal(t, []int{0, 1, 2, 3, 4}, a.committed)
}
