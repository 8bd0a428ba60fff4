package stream

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// scriptSource returns the scripted results of Read in turn, then io.EOF,
// and resumes without moving.
type scriptSource struct {
	reads []error // nil = one record at the next offset
	n     int
	next  int64
}

func (s *scriptSource) Read(context.Context) ([]Element[int], error) {
	if s.n >= len(s.reads) {
		return nil, io.EOF
	}
	err := s.reads[s.n]
	s.n++
	if err != nil {
		return nil, err
	}
	s.next++
	return []Element[int]{{Value: int(s.next - 1), Topic: "t", Offset: s.next - 1}}, nil
}

func (s *scriptSource) Close() error { return nil }

func (s *scriptSource) Resume(context.Context, checkpoint.Store) error { return nil }

// TestBackoffDoublesUpToMaxAndResetsAfterABatch ensures the waits between
// attempts grow min, 2min, 4min, capped at max, and start again at min once a
// batch has been handled.
func TestBackoffDoublesUpToMaxAndResetsAfterABatch(t *testing.T) {
	fail := errors.New("down")
	src := &scriptSource{reads: []error{fail, fail, fail, fail, fail, nil, fail, fail}}
	var waits []time.Duration
	record := consumeOptionFunc(func(c *consumeConfig) {
		c.wait = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	})

	err := ConsumeForever(context.Background(), src, &checkpoint.MemoryStore{},
		func(context.Context, int) error { return nil },
		WithBackoff(10*time.Millisecond, 50*time.Millisecond), record)

	require.NoError(t, err)
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 50 * ms, 50 * ms, 10 * ms, 20 * ms}, waits)
}

// TestBackoffDefaults ensures the documented defaults, and that a bad range is
// repaired rather than rejected.
func TestBackoffDefaults(t *testing.T) {
	c := newConsumeConfig(nil)
	assert.Equal(t, 100*time.Millisecond, c.minBackoff)
	assert.Equal(t, 5*time.Second, c.maxBackoff)

	c = newConsumeConfig([]ConsumeOption{WithBackoff(0, time.Millisecond)})
	assert.Equal(t, 100*time.Millisecond, c.minBackoff)
	assert.Equal(t, 100*time.Millisecond, c.maxBackoff)

	assert.Equal(t, time.Duration(1<<62), backoff(time.Second, 1<<62, 200), "no overflow")
}
