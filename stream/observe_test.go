package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/metrictest"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// TestObserveCountsEqualStatsAndKeepsCheckpointsAndErrors ensures a
// snapshot's stage counts are Stats', its checkpoint history holds the last
// 10 rounds (the last with the final position) and its errors the failed
// records with their lineage.
func TestObserveCountsEqualStatsAndKeepsCheckpointsAndErrors(t *testing.T) {
	errBad := errors.New("bad record")
	p := stream.From[int](streamtest.Slice(ints(30), streamtest.BatchSize(2))).
		Map(func(_ context.Context, v int) (int, error) {
			if v%10 == 3 {
				return 0, errBad
			}
			return v, nil
		}, stream.Skip()).
		Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
		Checkpointing(&checkpoint.MemoryStore{}, stream.CheckpointEachBatch())
	before := p.Observe()
	require.Len(t, before.Stages, 2)
	assert.False(t, before.Running)
	require.NoError(t, p.Run(context.Background()))

	snap := p.Observe()
	stats := p.Stats()
	require.Len(t, snap.Stages, len(stats))
	for i, st := range snap.Stages {
		assert.Equal(t, stats[i], st.StageStats, "stage %d", i)
		assert.Equal(t, i, st.Index)
	}
	assert.Equal(t, int64(3), snap.Stages[0].Skipped)

	require.Len(t, snap.Checkpoints, 10, "15 saves, the last 10 kept")
	last := snap.Checkpoints[9]
	assert.Empty(t, last.Err)
	assert.Equal(t, []checkpoint.TopicPosition{{Topic: streamtest.Topic, Partition: streamtest.Partition,
		Position: checkpoint.Position{Offset: 30, Epoch: last.Positions[0].Position.Epoch}}}, last.Positions)

	require.Len(t, snap.Errors, 3)
	for i, e := range snap.Errors {
		assert.Equal(t, "map", e.Stage)
		assert.Equal(t, streamtest.Topic, e.Topic)
		assert.Equal(t, streamtest.Partition, e.Partition)
		assert.Equal(t, int64(10*i+3), e.Offset)
		assert.Equal(t, 1, e.Attempt)
		assert.Equal(t, "bad record", e.Err)
	}

	require.Len(t, snap.Partitions, 1, "the last sample stays after Run returned")
	assert.Equal(t, int64(30), snap.Partitions[0].Position)
	assert.False(t, snap.Partitions[0].Stalled)
}

// TestObserveMeasuresBusyBackPressuredAndIdle ensures the busy,
// back-pressured and idle milliseconds per second are measured where
// records are handed on: a map that takes 10 ms a record before a sink
// that takes 30 ms is busy 250 ms of a second and back-pressured 750; the
// sink is busy 750 and idle 250. Fake time (synctest) makes them exact but
// for the accounting per batch: a batch's time counts in the second it
// ends in, so a second may hold one batch (40 ms) more or less.
func TestObserveMeasuresBusyBackPressuredAndIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p := stream.From[int](streamtest.Slice(ints(1000), streamtest.BatchSize(1))).
			Map(func(_ context.Context, v int) (int, error) {
				time.Sleep(10 * time.Millisecond)
				return v, nil
			}).
			To(sinkFunc[int](func(context.Context, []int) error {
				time.Sleep(30 * time.Millisecond)
				return nil
			}))
		p.Observe() // turns the timing on
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(3500 * time.Millisecond) // three samples, the rates of the third
		snap := p.Observe()
		cancel()
		require.NoError(t, <-done)

		m, s := snap.Stages[0], snap.Stages[1]
		assert.InDelta(t, 25, m.InPerSecond, 1, "a record each 40 ms")
		assert.InDelta(t, 250, m.BusyMsPerSecond, 45)
		assert.InDelta(t, 750, m.BackPressuredMsPerSecond, 45)
		assert.InDelta(t, 0, m.IdleMsPerSecond, 45)
		assert.InDelta(t, 750, s.BusyMsPerSecond, 45)
		assert.InDelta(t, 0, s.BackPressuredMsPerSecond, 45)
		assert.InDelta(t, 250, s.IdleMsPerSecond, 45)
		for _, st := range snap.Stages {
			assert.True(t, st.Timed)
			assert.InDelta(t, 1000, st.BusyMsPerSecond+st.BackPressuredMsPerSecond+st.IdleMsPerSecond, 0.001)
		}
	})
}

// TestObserveTimingCostsNoAllocationPerRecord ensures the busy and
// back-pressure accounting of a map and a sink allocates nothing per
// record: 10,000 records in batches of one allocate no more than 100 do.
func TestObserveTimingCostsNoAllocationPerRecord(t *testing.T) {
	run := func(n int) float64 {
		values := ints(n)
		return testing.AllocsPerRun(5, func() {
			p := stream.From[int](streamtest.Slice(values, streamtest.BatchSize(1))).
				Map(func(_ context.Context, v int) (int, error) { return v, nil }).
				To(sinkFunc[int](func(context.Context, []int) error { return nil }))
			p.Observe() // turns the timing on
			require.NoError(t, p.Run(context.Background()))
		})
	}
	small, large := run(100), run(10_000)
	t.Logf("allocations per run: %v for 100 records, %v for 10,000", small, large)
	assert.LessOrEqual(t, large, small+50, "allocations grow with records: %v for 100, %v for 10,000", small, large)
}

// lockedBuffer is a bytes.Buffer for a logger written from the pipeline's
// goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestObserveFlagsAStalledPartitionAndClearsIt ensures a partition with
// lag whose handler blocks forever on one record is flagged stalled (in the
// snapshot, the metric strom.partition.stalled and one Warn log) within the
// limit plus 5 s, and cleared (Info log, metric 0) once the record is
// released. Fake time (synctest): no test waits 30 s.
func TestObserveFlagsAStalledPartitionAndClearsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs lockedBuffer
		mp, reader := metrictest.Provider(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		release := make(chan struct{})
		src := hwmSource{streamtest.Slice(ints(10), streamtest.Follow(), streamtest.BatchSize(10)), 10}
		p := stream.From[int](src, stream.WithMeterProvider(mp), stream.WithName("billing"),
			stream.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))).
			Map(func(ctx context.Context, v int) (int, error) {
				if v == 5 {
					select {
					case <-release:
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				}
				return v, nil
			})
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait() // the map blocks on record 5
		start := time.Now()
		stalled := func() (stream.PartitionSnapshot, int64) {
			snap := p.Observe()
			m := metrictest.Collect(t, reader)
			v, _ := m.Int(stream.MetricPartitionStalled, partitionAttrs...)
			if len(snap.Partitions) == 0 {
				return stream.PartitionSnapshot{}, v // not sampled yet
			}
			require.Len(t, snap.Partitions, 1)
			return snap.Partitions[0], v
		}
		part, metric := stalled()
		assert.Equal(t, int64(0), metric)
		for !part.Stalled {
			require.Less(t, time.Since(start), stream.DefaultStallAfter+5*time.Second, "not flagged in time")
			time.Sleep(100 * time.Millisecond)
			part, _ = stalled()
		}
		assert.GreaterOrEqual(t, time.Since(start), stream.DefaultStallAfter, "flagged too early")
		part, metric = stalled()
		assert.Equal(t, int64(1), metric)
		assert.Equal(t, int64(0), part.Position)
		assert.Equal(t, int64(10), part.Lag)
		assert.GreaterOrEqual(t, part.SinceProgress, stream.DefaultStallAfter)
		time.Sleep(10 * time.Second)
		assert.Equal(t, 1, strings.Count(logs.String(), "partition stalled"), "logged once per episode: %s", logs.String())

		close(release)
		synctest.Wait()
		for part.Stalled {
			time.Sleep(100 * time.Millisecond)
			part, _ = stalled()
		}
		part, metric = stalled()
		assert.Equal(t, int64(0), metric)
		assert.Equal(t, int64(10), part.Position)
		assert.Equal(t, int64(0), part.Lag)
		assert.Equal(t, 1, strings.Count(logs.String(), "partition resumed"), logs.String())
		cancel()
		require.NoError(t, <-done)
	})
}

// TestStallAfterNegativeTurnsStallsOff ensures StallAfter(-1) flags no
// stall however long a partition waits.
func TestStallAfterNegativeTurnsStallsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := hwmSource{streamtest.Slice(ints(10), streamtest.Follow(), streamtest.BatchSize(10)), 10}
		p := stream.From[int](src, stream.StallAfter(-1)).
			Map(func(ctx context.Context, v int) (int, error) {
				if v == 5 {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return v, nil
			})
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(2 * stream.DefaultStallAfter)
		snap := p.Observe()
		require.Len(t, snap.Partitions, 1)
		assert.False(t, snap.Partitions[0].Stalled)
		assert.Equal(t, time.Duration(0), snap.StallAfter)
		cancel()
		require.NoError(t, <-done)
	})
}

// TestMonitorObservesTheLatestPipelineRun ensures a Monitor shows nothing
// before a pipeline built with ObservedBy runs, then the pipeline whose Run
// started last, as ConsumeForever's rebuilt pipelines need.
func TestMonitorObservesTheLatestPipelineRun(t *testing.T) {
	var m stream.Monitor
	before := m.Observe()
	assert.Empty(t, before.Stages)
	assert.False(t, before.Time.IsZero(), "the time of the call, not year 1 (a page showed 0001-01-01)")
	assert.False(t, before.Running)
	b, err := json.Marshal(before)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "null", "empty lists, as a pipeline's: %s", b)
	first := stream.From[int](streamtest.Slice(ints(4)), stream.ObservedBy(&m)).
		Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("first"))
	assert.Empty(t, m.Observe().Stages, "not before Run")
	require.NoError(t, first.Run(context.Background()))
	snap := m.Observe()
	require.Len(t, snap.Stages, 1)
	assert.Equal(t, "first", snap.Stages[0].Name)
	assert.Equal(t, int64(4), snap.Stages[0].In)

	second := stream.From[int](streamtest.Slice(ints(2)), stream.ObservedBy(&m)).
		Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("second"))
	require.NoError(t, second.Run(context.Background()))
	snap = m.Observe()
	require.Len(t, snap.Stages, 1)
	assert.Equal(t, "second", snap.Stages[0].Name)
	assert.Equal(t, int64(2), snap.Stages[0].In)
	var _ stream.Observer = &m
	var _ stream.Observer = second
}

// BenchmarkObservedThreeStages runs a map, a filter and a sink over
// 100,000 records in batches of one (the worst case for the accounting per
// batch: two clock reads per stage boundary per record) and of 500,
// observed (timing on) or not, reporting ns/record and allocs/op.
func BenchmarkObservedThreeStages(b *testing.B) {
	for _, batch := range []int{1, 500} {
		for _, observed := range []bool{false, true} {
			b.Run("batch="+strconv.Itoa(batch)+"/observed="+strconv.FormatBool(observed), func(b *testing.B) {
				benchThreeStages(b, batch, observed)
			})
		}
	}
}

func benchThreeStages(b *testing.B, batch int, observed bool) {
	values := ints(100_000)
	b.ReportAllocs()
	for b.Loop() {
		p := stream.From[int](streamtest.Slice(values, streamtest.BatchSize(batch))).
			Map(func(_ context.Context, v int) (int, error) { return v + 1, nil }).
			Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
			To(sinkFunc[int](func(context.Context, []int) error { return nil }))
		if observed {
			p.Observe()
		}
		if err := p.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(values)), "ns/record")
}

// TestObserveCountsAPushThatHasNotEndedAsBusyOrBackPressured ensures a stage
// blocked in its function (a handler stuck on one record) reads busy, and
// the stage before a blocked one back-pressured, while the push has not
// ended: timed only at its end, a stuck push read idle 1000 ms/s for as
// long as it lasted. Batches of one (timed one in 16 once quick) and of 100
// (each timed).
func TestObserveCountsAPushThatHasNotEndedAsBusyOrBackPressured(t *testing.T) {
	for _, batch := range []int{1, 100} {
		for _, blocked := range []string{"map", "sink"} {
			t.Run(blocked+"/batch="+strconv.Itoa(batch), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					hold := func(ctx context.Context) error {
						<-ctx.Done()
						return ctx.Err()
					}
					p := stream.From[int](streamtest.Slice(ints(1000), streamtest.BatchSize(batch))).
						Map(func(ctx context.Context, v int) (int, error) {
							if blocked == "map" && v == 500 {
								return 0, hold(ctx)
							}
							return v, nil
						}).
						To(sinkFunc[int](func(ctx context.Context, vs []int) error {
							if blocked == "sink" && slices.Contains(vs, 500) {
								return hold(ctx)
							}
							return nil
						}))
					p.Observe() // turns the timing on
					done := make(chan error, 1)
					go func() { done <- p.Run(ctx) }()
					time.Sleep(3500 * time.Millisecond) // three samples while it is stuck
					snap := p.Observe()
					cancel()
					<-done

					m, s := snap.Stages[0], snap.Stages[1]
					if blocked == "map" {
						assert.GreaterOrEqual(t, m.BusyMsPerSecond, 990.0, "the map is stuck in its function: %+v", m)
						assert.GreaterOrEqual(t, s.IdleMsPerSecond, 990.0, "the sink has nothing to do: %+v", s)
					} else {
						assert.GreaterOrEqual(t, m.BackPressuredMsPerSecond, 990.0, "the map waits on the sink: %+v", m)
						assert.GreaterOrEqual(t, s.BusyMsPerSecond, 990.0, "the sink is stuck in its function: %+v", s)
					}
				})
			})
		}
	}
}
