package stream

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// SnapshotMarks decodes the state of a pipeline with stateful stages (the
// bytes saved under their names) and returns the kind of its most upstream
// stage (StageAggregate, StageReduce,
// StageWindow) and, per "topic/partition", the next offset the snapshot
// covers: every record below it reached the stage before the snapshot and
// is in it. For the tests of package stream_test, which check that no
// position saved passes what the state saved before it covers.
func SnapshotMarks(data []byte) (kind string, next map[string]int64, err error) {
	// The pipeline's state holds every stateful stage's snapshot, upstream
	// first: the first stage is the one records reach first.
	var ps pipelineState
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&ps); err != nil {
		return "", nil, err
	}
	if len(ps.Stages) == 0 {
		return "", nil, fmt.Errorf("no stage in the state")
	}
	dec := gob.NewDecoder(bytes.NewReader(ps.Stages[0].Data))
	var h stateHeader
	if err := dec.Decode(&h); err != nil {
		return "", nil, err
	}
	// gob matches fields by name: the body of every kind has Parts.
	var body struct{ Parts []partFile }
	if err := dec.Decode(&body); err != nil {
		return "", nil, err
	}
	next = make(map[string]int64, len(body.Parts))
	for _, p := range body.Parts {
		next[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Next
	}
	return h.Kind, next, nil
}

// capture is an outlet that keeps a copy of every element it is pushed and
// hands them on.
type capture[T any] struct {
	down  outlet[T]
	elems []Element[T]
}

func (c *capture[T]) push(ctx context.Context, elems []Element[T]) error {
	c.elems = append(c.elems, elems...)
	return c.down.push(ctx, elems)
}

func (c *capture[T]) close(ctx context.Context) error { return c.down.close(ctx) }

// sliceSource yields its elements in batches of two, then io.EOF.
type sliceSource[T any] struct{ elems []Element[T] }

func (s *sliceSource[T]) Read(context.Context) ([]Element[T], error) {
	if len(s.elems) == 0 {
		return nil, io.EOF
	}
	n := min(2, len(s.elems))
	b := s.elems[:n:n]
	s.elems = s.elems[n:]
	return b, nil
}

func (s *sliceSource[T]) Close() error { return nil }

func TestAggregateUpdateHasTheLineageAndTimestampOfItsRecord(t *testing.T) {
	var in []Element[string]
	for i, v := range []string{"a", "b", "a", "c", "a"} {
		in = append(in, Element[string]{Value: v, Topic: "words", Partition: 3, Offset: int64(10 + 2*i),
			Epoch: 4, Timestamp: int64(1000 * i)})
	}
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			s := From[string](&sliceSource[string]{elems: append([]Element[string](nil), in...)})
			counts := Aggregate(KeyBy(s, func(v string) string { return v }), Count[string]())
			c := &capture[KV[string, int64]]{}
			out := chain(counts, func(_ *runtime, down outlet[KV[string, int64]]) outlet[KV[string, int64]] {
				c.down = down
				return c
			})
			var store checkpoint.MemoryStore
			if withStore {
				out = out.Checkpointing(&store)
			}
			require.NoError(t, out.Run(context.Background()))

			require.Len(t, c.elems, len(in))
			wantN := map[string]int64{}
			for i, e := range c.elems {
				wantN[in[i].Value]++
				assert.Equal(t, KV[string, int64]{in[i].Value, wantN[in[i].Value]}, e.Value)
				assert.Equal(t, in[i].Topic, e.Topic)
				assert.Equal(t, in[i].Partition, e.Partition)
				assert.Equal(t, in[i].Offset, e.Offset)
				assert.Equal(t, in[i].Epoch, e.Epoch)
				assert.Equal(t, in[i].Timestamp, e.Timestamp)
			}
			if withStore {
				pos, ok, err := store.Load(context.Background(), "words", 3)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, int64(19), pos.Offset, "every record finished: its update downstream and its snapshot")
				data, ok, err := store.LoadState(context.Background(), StageAggregate)
				require.NoError(t, err)
				require.True(t, ok)
				kind, next, err := SnapshotMarks(data)
				require.NoError(t, err)
				assert.Equal(t, StageAggregate, kind)
				assert.Equal(t, map[string]int64{"words/3": 19}, next)
			}
		})
	}
}
