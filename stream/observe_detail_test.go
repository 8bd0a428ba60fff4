package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reugn/go-streams/flow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// inFlight returns the records in flight of each stage of snap.
func inFlight(snap stream.Snapshot) []int64 {
	out := make([]int64, len(snap.Stages))
	for i, st := range snap.Stages {
		out[i] = st.InFlight
	}
	return out
}

// TestObserveCountsRecordsInFlightInTheStageThatHoldsThem ensures a
// stage's records in flight are those that entered it and were not handed
// on: a sequential map blocked on record 5 of a batch of 10 holds the 10,
// the stage before it none; a Parallel stage whose workers block holds
// every record it took (in its workers, its queue and its push), the map
// before it none; a Batch of 4 holds the 2 records of its open batch.
// Once released and finished, no stage holds any.
func TestObserveCountsRecordsInFlightInTheStageThatHoldsThem(t *testing.T) {
	t.Run("sequential", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			p := stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(10))).
				Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("before")).
				Map(func(ctx context.Context, v int) (int, error) {
					if v == 5 {
						<-release
					}
					return v, nil
				}, stream.Name("blocked"))
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			synctest.Wait() // the map blocks on record 5
			assert.Equal(t, []int64{0, 10}, inFlight(p.Observe()))
			close(release)
			require.NoError(t, <-done)
			assert.Equal(t, []int64{0, 0}, inFlight(p.Observe()))
		})
	})
	t.Run("parallel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			p := stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(10))).
				Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("before")).
				Map(func(ctx context.Context, v int) (int, error) {
					<-release
					return v, nil
				}, stream.Name("workers"), stream.Parallel(2)).
				Tap(func(context.Context, int) error { return nil }, stream.Name("after"))
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			synctest.Wait() // both workers block, the queue is full, the push waits
			assert.Equal(t, []int64{0, 10, 0}, inFlight(p.Observe()))
			close(release)
			require.NoError(t, <-done)
			assert.Equal(t, []int64{0, 0, 0}, inFlight(p.Observe()))
		})
	})
	t.Run("finished in the stage", func(t *testing.T) {
		// Records filtered, skipped or dead-lettered left the stage too.
		errOdd := errors.New("odd")
		p := stream.From[int](streamtest.Slice(ints(100), streamtest.BatchSize(7))).
			Filter(func(_ context.Context, v int) (bool, error) { return v%3 != 0, nil }).
			Map(func(_ context.Context, v int) (int, error) {
				if v%5 == 0 {
					return 0, errOdd
				}
				return v, nil
			}, stream.Skip()).
			Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }, stream.Parallel(3)).
			To(sinkFunc[int](func(_ context.Context, vs []int) error {
				if len(vs) > 2 {
					return errOdd
				}
				return nil
			}), stream.Skip())
		require.NoError(t, p.Run(context.Background()))
		snap := p.Observe()
		assert.Equal(t, []int64{0, 0, 0, 0}, inFlight(snap))
		assert.NotZero(t, snap.Stages[3].Skipped, "the sink skipped batches")
	})
	t.Run("batch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := stream.Batch(stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(10), streamtest.Follow())), 4, 0).
				Tap(func(context.Context, []int) error { return nil })
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			synctest.Wait() // two batches of 4 handed on, 2 records wait for more
			snap := p.Observe()
			assert.Equal(t, []int64{2, 0}, inFlight(snap))
			assert.Equal(t, int64(2), snap.Stages[0].Out)
			cancel()
			require.NoError(t, <-done)
		})
	})
}

// wmAt is a watermark in ms: winT0 plus d.
func wmAt(d time.Duration) int64 { return winT0.Add(d).UnixMilli() }

// TestObserveShowsEachPartitionsWatermarkAndMarksIdleOnes ensures a
// snapshot gives an event-time Window's watermark, and per source partition
// its greatest event time less the OutOfOrderness, with the partitions the
// Window counts idle marked: partition 1 at 5 s holds the stage at 3 s
// while partition 0 is at 3 min; a minute of silence later partition 1 is
// idle and the stage's watermark is partition 0's. While a stage after the
// window blocks on its results (the window's lock held), Observe does not
// wait: it returns the last watermarks it read.
func TestObserveShowsEachPartitionsWatermarkAndMarksIdleOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &idleSource{in: make(chan []stream.Element[winAttempt])}
		release := make(chan struct{})
		p := winCountByIP(stream.From[winAttempt](src), stream.Tumbling(time.Minute),
			stream.Idleness(time.Minute), stream.OutOfOrderness(2*time.Second)).
			To(sinkFunc[winResult](func(context.Context, []winResult) error {
				<-release
				return nil
			}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()

		src.in <- idleBatch(1, 0, "b", 5*time.Second)
		synctest.Wait()
		time.Sleep(30 * time.Second)
		src.in <- idleBatch(0, 0, "a", 0, 10*time.Second, 3*time.Minute)
		synctest.Wait()
		time.Sleep(time.Second) // a sample of the partitions
		synctest.Wait()

		type wm struct {
			topic     string
			partition int32
			ms        int64
			has, idle bool
		}
		watermarks := func(snap stream.Snapshot) []wm {
			var out []wm
			for _, ps := range snap.Partitions {
				require.Len(t, ps.Watermarks, 1, "one event-time stage")
				w := ps.Watermarks[0]
				assert.Equal(t, 0, w.Index)
				assert.Equal(t, snap.Stages[0].Name, w.Stage)
				out = append(out, wm{ps.Topic, ps.Partition, w.Watermark, w.HasWatermark, w.Idle})
			}
			return out
		}
		snap := p.Observe()
		win := snap.Stages[0]
		assert.True(t, win.EventTime)
		assert.False(t, snap.Stages[1].EventTime, "the sink has no watermark")
		require.True(t, win.HasWatermark)
		assert.Equal(t, wmAt(3*time.Second), win.Watermark, "partition 1 holds it: 5 s less 2 s")
		before := []wm{
			{"t", 0, wmAt(3*time.Minute - 2*time.Second), true, false},
			{"t", 1, wmAt(3 * time.Second), true, false},
		}
		assert.Equal(t, before, watermarks(snap))

		time.Sleep(30 * time.Second) // partition 1 silent a minute: idle, the windows fire
		synctest.Wait()              // the sink blocks with the window's results
		snap = p.Observe()           // returns: the last watermarks read
		assert.Equal(t, before, watermarks(snap))
		assert.Equal(t, wmAt(3*time.Second), snap.Stages[0].Watermark)

		close(release)
		synctest.Wait()
		snap = p.Observe()
		assert.Equal(t, wmAt(3*time.Minute-2*time.Second), snap.Stages[0].Watermark, "partition 0's")
		assert.Equal(t, []wm{
			{"t", 0, wmAt(3*time.Minute - 2*time.Second), true, false},
			{"t", 1, wmAt(3 * time.Second), true, true},
		}, watermarks(snap))

		cancel()
		require.NoError(t, <-done)
		after := p.Observe()
		assert.Equal(t, snap.Stages[0].Watermark, after.Stages[0].Watermark, "the last read stays after Run returned")
		assert.Equal(t, watermarks(snap), watermarks(after))
	})
}

// TestObserveWithoutAnEventTimeStageHasNoWatermarks ensures a pipeline
// without a Window or JoinWindow shows no watermark: no stage is
// EventTime, and each partition's Watermarks is empty (and [] in JSON).
func TestObserveWithoutAnEventTimeStageHasNoWatermarks(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(4))).
		Map(func(_ context.Context, v int) (int, error) { return v, nil })
	require.NoError(t, p.Run(context.Background()))
	snap := p.Observe()
	require.Len(t, snap.Partitions, 1)
	assert.False(t, snap.Stages[0].EventTime)
	assert.Empty(t, snap.Partitions[0].Watermarks)
	b, err := json.Marshal(snap.Partitions[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"watermarks":[]`)
}

// TestSnapshotJSONNamesEveryFieldInCamelCase ensures the JSON of a
// snapshot names the stage counters and the checkpoint positions as the
// rest of it, in camelCase ("name", "in", "deadLettered", "position":
// {"offset"}), never with Go's capitals.
func TestSnapshotJSONNamesEveryFieldInCamelCase(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(4))).
		Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("double")).
		Checkpointing(&checkpoint.MemoryStore{})
	require.NoError(t, p.Run(context.Background()))
	b, err := json.Marshal(p.Observe())
	require.NoError(t, err)
	var m struct {
		Stages      []map[string]any `json:"stages"`
		Checkpoints []struct {
			Positions []map[string]any `json:"positions"`
		} `json:"checkpoints"`
	}
	require.NoError(t, json.Unmarshal(b, &m))
	require.Len(t, m.Stages, 1)
	st := m.Stages[0]
	assert.Equal(t, "double", st["name"])
	for _, k := range []string{"in", "out", "skipped", "deadLettered", "failed", "retried", "late", "inFlight",
		"timed", "index", "workers", "eventTime", "watermarkMs", "hasWatermark", "inPerSecond", "busyMsPerSecond"} {
		assert.Contains(t, st, k)
	}
	assert.EqualValues(t, 4, st["in"])
	require.NotEmpty(t, m.Checkpoints)
	pos := m.Checkpoints[len(m.Checkpoints)-1].Positions
	require.Len(t, pos, 1)
	assert.Equal(t, streamtest.Topic, pos[0]["topic"])
	assert.EqualValues(t, streamtest.Partition, pos[0]["partition"])
	assert.EqualValues(t, 4, pos[0]["position"].(map[string]any)["offset"])
	assertNoCapitalKeys(t, b)
}

// assertNoCapitalKeys fails if any object key in the JSON b starts with a
// capital letter.
func assertNoCapitalKeys(t *testing.T, b []byte) {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k != "" && k[0] >= 'A' && k[0] <= 'Z' {
					t.Errorf("JSON key %q is not camelCase", k)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}

// TestObserveShowsAJoinWindowsWatermarkPerInputPartition ensures a
// windowed join's watermark is shown as a Window's: per partition of
// either input its greatest event time less the OutOfOrderness, and the
// stage's the least of them.
func TestObserveShowsAJoinWindowsWatermarkPerInputPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		os := []order{{0, "k", 1000}, {1, "k", 2000}, {2, "k", 3000}}
		ps := []payment{{0, "k", 1500}, {1, "k", 2500}}
		ol := stream.From(streamtest.Slice(os, streamtest.OnTopic("left"), streamtest.Follow()))
		pl := stream.From(streamtest.Slice(ps, streamtest.OnTopic("right"), streamtest.Follow()))
		out := buildJoin("inner", ol, pl, time.Second, stream.OutOfOrderness(100*time.Millisecond), stream.Name("pay")).
			To(streamtest.Collect[joined]())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- out.Run(ctx) }()
		synctest.Wait()
		time.Sleep(time.Second) // a sample of the partitions
		synctest.Wait()

		snap := out.Observe()
		require.Len(t, snap.Stages, 2)
		join := snap.Stages[0]
		assert.Equal(t, "pay", join.Name)
		assert.True(t, join.EventTime)
		require.True(t, join.HasWatermark)
		assert.Equal(t, int64(2400), join.Watermark, "the right input's: 2500 less 100")
		require.Len(t, snap.Partitions, 2)
		for i, want := range map[int]int64{0: 2900, 1: 2400} {
			ps := snap.Partitions[i]
			require.Len(t, ps.Watermarks, 1, "%s/%d", ps.Topic, ps.Partition)
			w := ps.Watermarks[0]
			assert.Equal(t, stream.PartitionWatermark{Stage: "pay", Index: 0, Watermark: want, HasWatermark: true}, w, "%s/%d", ps.Topic, ps.Partition)
		}
		assert.Equal(t, "left", snap.Partitions[0].Topic)
		cancel()
		require.NoError(t, <-done)
	})
}

// stageNamed returns the stage of snap named name.
func stageNamed(t *testing.T, snap stream.Snapshot, name string) stream.StageSnapshot {
	t.Helper()
	for _, st := range snap.Stages {
		if st.Name == name {
			return st
		}
	}
	require.FailNow(t, "no stage "+name)
	return stream.StageSnapshot{}
}

// TestObserveTimesJoinsWithATableTablesAndVia ensures a join with a table,
// the table's own stage and Via are timed as the other stages are: a join
// handing each record to a sink that takes 10 ms is back-pressured nearly
// all of each second; a Via whose flow takes 10 ms a record is busy
// (accepting records into the flow) nearly all of it, as a Parallel stage.
// Fake time (synctest): the stages' own work takes no time.
func TestObserveTimesJoinsWithATableTablesAndVia(t *testing.T) {
	t.Run("join with a table", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tbl := usersOf([]user{{ID: "u1", Name: "one"}})
			clicks := make([]click, 1000)
			for i := range clicks {
				clicks[i] = click{User: "u1", N: i}
			}
			ks := stream.KeyBy(stream.From(streamtest.Slice(clicks, streamtest.OnTopic("clicks"), streamtest.BatchSize(1))),
				func(c click) string { return c.User })
			p := stream.JoinTable(ks, tbl, func(c click, u user) enriched { return enriched{N: c.N, Name: u.Name} }).
				To(sinkFunc[enriched](func(context.Context, []enriched) error {
					time.Sleep(10 * time.Millisecond)
					return nil
				}))
			p.Observe() // turns the timing on
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			time.Sleep(3500 * time.Millisecond)
			snap := p.Observe()
			cancel()
			require.NoError(t, <-done)

			join := stageNamed(t, snap, stream.StageJoinTable)
			table := stageNamed(t, snap, "users")
			for _, st := range []stream.StageSnapshot{join, table} {
				assert.True(t, st.Timed, st.Name)
				assert.InDelta(t, 1000, st.BusyMsPerSecond+st.BackPressuredMsPerSecond+st.IdleMsPerSecond, 0.001, st.Name)
			}
			assert.Greater(t, join.BackPressuredMsPerSecond, 900.0, "waits for the sink")
			assert.InDelta(t, 100, join.InPerSecond, 5, "a record each 10 ms")
			assert.InDelta(t, 1000, table.IdleMsPerSecond, 1, "its records were applied at the start")
		})
	})
	t.Run("via", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			slow := flow.NewMap(func(v int) int {
				time.Sleep(10 * time.Millisecond)
				return v
			}, 1)
			p := stream.Via[int, int](stream.From[int](streamtest.Slice(ints(1000), streamtest.BatchSize(1))), slow, stream.GoName("slow")).
				To(sinkFunc[int](func(context.Context, []int) error { return nil }))
			p.Observe()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			time.Sleep(3500 * time.Millisecond)
			snap := p.Observe()
			cancel()
			require.NoError(t, <-done)

			via := stageNamed(t, snap, "slow")
			assert.True(t, via.Timed)
			assert.Greater(t, via.BusyMsPerSecond, 900.0, "waits for the flow to take each record")
			assert.Less(t, via.BackPressuredMsPerSecond, 50.0, "the sink takes no time")
			assert.InDelta(t, 1000, via.BusyMsPerSecond+via.BackPressuredMsPerSecond+via.IdleMsPerSecond, 0.001)
		})
	})
}
