package stream_test

// Tests of the windowed stream-stream joins (JoinWindow, LeftJoinWindow,
// OuterJoinWindow): results against a nested loop over the inputs, late
// records, the watermark of two inputs, restarts at many crash points,
// the state's bound on a long stream, and misuse. The kill -9 test is in
// joinwindow_kill_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// order and payment are the two inputs' records: different types, joined
// by Key, each with an event time At (ms).
type order struct {
	ID  int
	Key string
	At  int64
}

type payment struct {
	ID  int
	Key string
	At  int64
}

// joined is a join's result: the IDs of its records, -1 for a missing one.
type joined struct{ L, R int }

func (j joined) String() string { return fmt.Sprintf("(%d,%d)", j.L, j.R) }

func orderTime(o order) time.Time     { return time.UnixMilli(o.At) }
func paymentTime(p payment) time.Time { return time.UnixMilli(p.At) }

// joinKinds are the three joins, by name.
var joinKinds = []string{"inner", "left", "outer"}

// joinInputs returns n orders and m payments over keys keys, step ms apart
// in event time on average, each up to jitter ms behind its place (out of
// order within jitter).
func joinInputs(seed uint64, n, m, keys int, step, jitter int64) ([]order, []payment) {
	rng := rand.New(rand.NewPCG(seed, 21))
	// Payments run at another pace when m != n, so that the records of a
	// key on the two inputs fall near each other and far apart.
	at := func(i int, step int64) int64 {
		t := int64(1_000_000) + int64(i)*step
		if jitter > 0 {
			t -= rng.Int64N(jitter + 1)
		}
		return t
	}
	os := make([]order, n)
	for i := range os {
		os[i] = order{ID: i, Key: fmt.Sprintf("k%d", rng.IntN(keys)), At: at(i, step)}
	}
	ps := make([]payment, m)
	for i := range ps {
		ps[i] = payment{ID: i, Key: fmt.Sprintf("k%d", rng.IntN(keys)), At: at(i, step*int64(n)/int64(max(m, 1)))}
	}
	return os, ps
}

// nestedLoop is the independent computation of a join: every pair of equal
// keys at most within apart, and for left and outer the records that have
// none, sorted.
func nestedLoop(kind string, os []order, ps []payment, within int64) []joined {
	var out []joined
	pMatched := make([]bool, len(ps))
	for _, o := range os {
		found := false
		for j, p := range ps {
			if o.Key == p.Key && o.At-p.At <= within && p.At-o.At <= within {
				out = append(out, joined{o.ID, p.ID})
				found, pMatched[j] = true, true
			}
		}
		if !found && kind != "inner" {
			out = append(out, joined{o.ID, -1})
		}
	}
	if kind == "outer" {
		for j, p := range ps {
			if !pMatched[j] {
				out = append(out, joined{-1, p.ID})
			}
		}
	}
	return sorted(out)
}

func sorted(js []joined) []joined {
	js = slices.Clone(js)
	slices.SortFunc(js, func(a, b joined) int {
		if a.L != b.L {
			return a.L - b.L
		}
		return a.R - b.R
	})
	return js
}

// dedup returns the distinct results of js, sorted.
func dedup(js []joined) []joined { return slices.Compact(sorted(js)) }

// buildJoin joins ol and pl with the join named kind, results as joined.
func buildJoin(kind string, ol *stream.Stream[order], pl *stream.Stream[payment], within time.Duration, opts ...stream.StateOption) *stream.Stream[joined] {
	lk := stream.KeyBy(ol, func(o order) string { return o.Key })
	rk := stream.KeyBy(pl, func(p payment) string { return p.Key })
	opts = append([]stream.StateOption{stream.JoinTimes(orderTime, paymentTime)}, opts...)
	switch kind {
	case "inner":
		return stream.JoinWindow(lk, rk, within, func(o order, p payment) joined { return joined{o.ID, p.ID} }, opts...)
	case "left":
		return stream.LeftJoinWindow(lk, rk, within, func(o order, p payment, ok bool) joined {
			if !ok {
				return joined{o.ID, -1}
			}
			return joined{o.ID, p.ID}
		}, opts...)
	default:
		return stream.OuterJoinWindow(lk, rk, within, func(o order, lok bool, p payment, rok bool) joined {
			j := joined{-1, -1}
			if lok {
				j.L = o.ID
			}
			if rok {
				j.R = p.ID
			}
			return j
		}, opts...)
	}
}

func TestJoinWindowInnerLeftAndOuterEqualANestedLoopOverTheInputs(t *testing.T) {
	const within = 40
	for seed := uint64(1); seed <= 4; seed++ {
		os, ps := joinInputs(seed, 700, 500, 6, 10, 60)
		for _, kind := range joinKinds {
			t.Run(fmt.Sprintf("%s/seed=%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				ol := stream.From(streamtest.Slice(os, streamtest.OnTopic("left"), streamtest.BatchSize(1+rng.IntN(40))))
				pl := stream.From(streamtest.Slice(ps, streamtest.OnTopic("right"), streamtest.BatchSize(1+rng.IntN(40))))
				sink := streamtest.Collect[joined]()
				store := checkpoint.NewMemoryStore()
				out := buildJoin(kind, ol, pl, within*time.Millisecond, stream.OutOfOrderness(60*time.Millisecond))
				require.NoError(t, out.To(sink).Checkpointing(store).Run(t.Context()))
				want := nestedLoop(kind, os, ps, within)
				require.NotEmpty(t, want)
				got := sink.Values()
				assert.Equal(t, want, sorted(got), "every result once, none else")
				for _, st := range out.Stats() {
					assert.Zero(t, st.Late, "records within the out-of-orderness are never late")
				}
				for topic, n := range map[string]int{"left": len(os), "right": len(ps)} {
					pos, found, err := store.Load(t.Context(), topic, 0)
					require.NoError(t, err)
					require.True(t, found, topic)
					assert.Equal(t, int64(n), pos.Offset, "every record of %s finished", topic)
				}
				if kind == "inner" {
					return
				}
				// A record's result without a partner comes after the
				// pairs of that record's key that the watermark let
				// through first: never a pair after its record's "no
				// partner" result (no spurious early result).
				alone := map[int]bool{}
				for _, j := range got {
					if j.R == -1 {
						alone[j.L] = true
					} else {
						require.False(t, alone[j.L], "order %d emitted without a partner, then joined", j.L)
					}
				}
			})
		}
	}
}

func TestJoinWindowDocDiagram(t *testing.T) {
	// The marble diagram of JoinWindow's doc, IDs the event times in
	// seconds, read in rounds of one record of each input.
	os := []order{{1, "a", 1000}, {3, "b", 3000}, {10, "a", 10_000}, {14, "c", 14_000}}
	ps := []payment{{2, "a", 2000}, {9, "b", 9000}, {11, "a", 11_000}, {15, "d", 15_000}}
	want := map[string][]joined{
		"inner": {{1, 2}, {10, 11}},
		"left":  {{1, 2}, {3, -1}, {10, 11}, {14, -1}},
		"outer": {{-1, 9}, {-1, 15}, {1, 2}, {3, -1}, {10, 11}, {14, -1}},
	}
	for _, kind := range joinKinds {
		l, r := stepped(os, ps, 1)
		sink := streamtest.Collect[joined]()
		require.NoError(t, buildJoin(kind, stream.From[order](l), stream.From[payment](r), 2*time.Second).To(sink).Run(t.Context()))
		assert.Equal(t, want[kind], sorted(sink.Values()), kind)
		assert.Equal(t, nestedLoop(kind, os, ps, 2000), want[kind], kind)
	}
}

// lockstep makes two sources read in rounds: the n-th Read of one returns
// only once the other has begun its n-th Read (so its n-1 batches went
// through the pipeline's sequential stages) or has ended. The join then
// sees the batches of round n of both inputs after those of round n-1.
type lockstep struct {
	mu      sync.Mutex
	reads   [2]int
	done    [2]bool
	changed chan struct{}
}

func newLockstep() *lockstep { return &lockstep{changed: make(chan struct{})} }

func (l *lockstep) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// stepSource is one side of a lockstep around a source.
type stepSource[T any] struct {
	*streamtest.SliceSource[T]
	ls   *lockstep
	side int
}

func (s *stepSource[T]) Read(ctx context.Context) ([]stream.Element[T], error) {
	l := s.ls
	l.mu.Lock()
	l.reads[s.side]++
	n := l.reads[s.side]
	l.notifyLocked()
	for l.reads[1-s.side] < n && !l.done[1-s.side] {
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	elems, err := s.SliceSource.Read(ctx)
	if errors.Is(err, io.EOF) {
		l.mu.Lock()
		l.done[s.side] = true
		l.notifyLocked()
		l.mu.Unlock()
	}
	return elems, err
}

// stepped returns two lockstep sources over os and ps, on topics left and
// right.
func stepped(os []order, ps []payment, batch int) (*stepSource[order], *stepSource[payment]) {
	ls := newLockstep()
	return &stepSource[order]{streamtest.Slice(os, streamtest.OnTopic("left"), streamtest.BatchSize(batch)), ls, 0},
		&stepSource[payment]{streamtest.Slice(ps, streamtest.OnTopic("right"), streamtest.BatchSize(batch)), ls, 1}
}

// lateCase is an input with late records: the third record of each input
// comes after the second of both moved the watermark to 10000.
func lateCase() ([]order, []payment) {
	return []order{{0, "a", 1000}, {1, "a", 10000}, {2, "a", 9500}, {3, "a", 9000}},
		[]payment{{0, "a", 1000}, {1, "a", 10000}, {2, "a", 9400}, {3, "a", 9999}}
}

func TestJoinWindowLateRecordsStopRunByDefaultGoToTheirSinksOrAreDropped(t *testing.T) {
	os, ps := lateCase()
	// within 1s, lateness 500ms: at watermark 10000 a record before 9500
	// is late (t + lateness < watermark): orders 3, payments 2.
	base := []stream.StateOption{stream.AllowedLateness(500 * time.Millisecond)}
	run := func(opts ...stream.StateOption) ([]joined, error, []stream.StageStats) {
		l, r := stepped(os, ps, 1)
		sink := streamtest.Collect[joined]()
		out := buildJoin("outer", stream.From[order](l), stream.From[payment](r), time.Second, append(base, opts...)...)
		err := out.To(sink).Run(t.Context())
		return sorted(sink.Values()), err, out.Stats()
	}

	_, err, _ := run()
	require.ErrorIs(t, err, stream.ErrLateRecord)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, []string{"left", "right"}, re.Topic)
	assert.ErrorContains(t, err, "stream.Late"+map[string]string{"left": "Left", "right": "Right"}[re.Topic]+"To", "the error names the option of the input")

	lateL := streamtest.Collect[order]()
	lateR := streamtest.Collect[payment]()
	got, err, stats := run(stream.LateLeftTo[order](lateL), stream.LateRightTo[payment](lateR))
	require.NoError(t, err)
	assert.Equal(t, []order{os[3]}, lateL.Values())
	assert.Equal(t, []payment{ps[2]}, lateR.Values())
	// The nested loop over the records that are not late.
	want := nestedLoop("outer", []order{os[0], os[1], os[2]}, []payment{ps[0], ps[1], ps[3]}, 1000)
	assert.Equal(t, want, got)
	assert.Equal(t, int64(2), stage(stats, stream.StageOuterJoinWindow).Late, "the join's stage counts both late records")

	got, err, stats = run(stream.DropLate())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	js := stage(stats, stream.StageOuterJoinWindow)
	assert.Equal(t, int64(2), js.Late)
	assert.Equal(t, int64(2), js.Skipped)
}

// stage returns the counts of the stage named name.
func stage(stats []stream.StageStats, name string) stream.StageStats {
	for _, st := range stats {
		if st.Name == name {
			return st
		}
	}
	return stream.StageStats{}
}

func TestJoinWindowRecordWhosePartnerWasReleasedIsLateNotJoinedWrong(t *testing.T) {
	// within 1s. Order a at 1s; then both inputs reach 2.5s, and the
	// watermark passes a's 1s + within: a is released, without a partner.
	// Then payment a at 1.9s comes: it would have joined order a, which is
	// gone (and emitted alone). Its own window has not closed (1.9s + 1s
	// is past the watermark), but it is late: 1.9s is behind the watermark
	// by more than the allowed lateness (0). Taken as on time, the outer
	// join would emit [a,∅] and [∅,a] where a nested loop has [a,a].
	os := []order{{0, "a", 1000}, {1, "x", 2500}}
	ps := []payment{{0, "c", 1000}, {1, "c", 2500}, {2, "a", 1900}}
	l, r := stepped(os, ps, 1)
	late := streamtest.Collect[payment]()
	sink := streamtest.Collect[joined]()
	out := buildJoin("outer", stream.From[order](l), stream.From[payment](r), time.Second, stream.LateRightTo[payment](late))
	require.NoError(t, out.To(sink).Run(t.Context()))
	assert.Equal(t, []payment{ps[2]}, late.Values())
	assert.Equal(t, nestedLoop("outer", os, ps[:2], 1000), sorted(sink.Values()), "the nested loop over the records that are not late")
}

func TestJoinWindowWatermarkWaitsForAnInputThatHasNotDeliveredYet(t *testing.T) {
	// Every order is read and joined before the first payment is read:
	// the orders alone must not move the watermark, or the payments
	// (whose times are those of the orders) would all be late.
	os, ps := joinInputs(5, 300, 300, 3, 10, 0)
	left := streamtest.Slice(os, streamtest.OnTopic("left"), streamtest.BatchSize(7))
	ended := make(chan struct{})
	right := &joinGatedSource[payment]{SliceSource: streamtest.Slice(ps, streamtest.OnTopic("right"), streamtest.BatchSize(7)), gate: ended}
	sink := streamtest.Collect[joined]()
	ol := stream.From[order](&endSignal[order]{SliceSource: left, ended: ended})
	out := buildJoin("outer", ol, stream.From[payment](right), 30*time.Millisecond)
	require.NoError(t, out.To(sink).Run(t.Context()))
	assert.Equal(t, nestedLoop("outer", os, ps, 30), sorted(sink.Values()))
}

// joinGatedSource's first Read waits until gate is closed.
type joinGatedSource[T any] struct {
	*streamtest.SliceSource[T]
	gate <-chan struct{}
}

func (s *joinGatedSource[T]) Read(ctx context.Context) ([]stream.Element[T], error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.SliceSource.Read(ctx)
}

// endSignal closes ended when its source returns io.EOF.
type endSignal[T any] struct {
	*streamtest.SliceSource[T]
	ended chan struct{}
	once  sync.Once
}

func (s *endSignal[T]) Read(ctx context.Context) ([]stream.Element[T], error) {
	elems, err := s.SliceSource.Read(ctx)
	if errors.Is(err, io.EOF) {
		s.once.Do(func() { close(s.ended) })
	}
	return elems, err
}

func TestJoinWindowInputThatEndedStopsHoldingTheWatermark(t *testing.T) {
	// The orders end at 2s; the payments go on (followed, never ending)
	// to 10s, matching none. Once the orders ended, the payments' watermark
	// alone releases both orders without a partner; while the orders held
	// it at 2s, neither was (2s is not past 1s + within 1s).
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		l := streamtest.Slice([]order{{0, "a", 1000}, {1, "b", 2000}}, streamtest.OnTopic("left"))
		r := streamtest.Slice([]payment{{0, "c", 1500}, {1, "c", 3000}, {2, "c", 10_000}}, streamtest.OnTopic("right"), streamtest.Follow())
		sink := streamtest.Collect[joined]()
		done := make(chan error, 1)
		go func() {
			done <- buildJoin("left", stream.From[order](l), stream.From[payment](r), time.Second).To(sink).Run(ctx)
		}()
		synctest.Wait()
		assert.Equal(t, []joined{{0, -1}, {1, -1}}, sorted(sink.Values()))
		cancel()
		require.NoError(t, <-done)
		assert.Len(t, sink.Values(), 2, "a cancelled run emits nothing more")
	})
}

func TestJoinWindowIdlenessLetsAnInputThatDeliversNothingStopHoldingTheWatermark(t *testing.T) {
	// The payments never deliver (a followed topic with nothing in it).
	// Without Idleness they hold the watermark back for ever; with
	// Idleness(1m), a minute on the pipeline's clock later they (and the
	// orders, silent too) are idle, the watermark goes to the orders' 5s
	// and releases the order at 1s without a partner.
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprint("idleness=", idle), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				l := streamtest.Slice([]order{{0, "a", 1000}, {1, "b", 5000}}, streamtest.OnTopic("left"), streamtest.Follow())
				r := streamtest.Slice([]payment{}, streamtest.OnTopic("right"), streamtest.Follow())
				sink := streamtest.Collect[joined]()
				var opts []stream.StateOption
				if idle {
					opts = append(opts, stream.Idleness(time.Minute))
				}
				done := make(chan error, 1)
				go func() {
					done <- buildJoin("left", stream.From[order](l), stream.From[payment](r), time.Second, opts...).To(sink).Run(ctx)
				}()
				synctest.Wait()
				assert.Empty(t, sink.Values(), "the payments hold the watermark back")
				time.Sleep(time.Minute)
				synctest.Wait()
				if idle {
					assert.Equal(t, []joined{{0, -1}}, sink.Values())
				} else {
					assert.Empty(t, sink.Values())
				}
				cancel()
				require.NoError(t, <-done)
			})
		})
	}
}

func TestJoinWindowIdlenessAlsoAppliesWhenTheOtherInputHasEnded(t *testing.T) {
	// As above, but the orders end (a replay) instead of following: an
	// input that ended must not do less than one that follows. A minute
	// later the payments are idle, and the ended orders' 5s still counts:
	// the watermark goes to 5s and releases the order at 1s.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		l := streamtest.Slice([]order{{0, "a", 1000}, {1, "b", 5000}}, streamtest.OnTopic("left"))
		r := streamtest.Slice([]payment{}, streamtest.OnTopic("right"), streamtest.Follow())
		sink := streamtest.Collect[joined]()
		done := make(chan error, 1)
		go func() {
			done <- buildJoin("left", stream.From[order](l), stream.From[payment](r), time.Second, stream.Idleness(time.Minute)).To(sink).Run(ctx)
		}()
		synctest.Wait()
		assert.Empty(t, sink.Values(), "the payments hold the watermark back")
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, []joined{{0, -1}}, sink.Values())
		cancel()
		require.NoError(t, <-done)
	})
}

func TestJoinWindowStateStaysBoundedOnALongStream(t *testing.T) {
	// 10 minutes of event time on each input, a record every 100ms (10 a
	// second) per input, over 50 keys, up to 300ms out of order. A record
	// is held until the watermark passes its time + within + lateness,
	// and the watermark trails the newest time by the out-of-orderness;
	// the inputs run in lockstep batches of 20 records (2s), so one is at
	// most a batch ahead of the other. Per input then at most
	// 10/s * (within 2s + lateness 1s + out-of-orderness 0.5s + batch 2s
	// + jitter 0.3s) = 58 records: 2 * 58 for both, plus a batch of each
	// in flight.
	const (
		n        = 6000 // 10 minutes at 100ms
		rate     = 10   // records per second per input
		batch    = 20
		within   = 2 * time.Second
		lateness = time.Second
		ooo      = 500 * time.Millisecond
		jitter   = 300
	)
	os, ps := joinInputs(9, n, n, 50, 100, jitter)
	bound := int(2 * rate * (within + lateness + ooo + batch*100*time.Millisecond + jitter*time.Millisecond).Seconds())
	bound += 2 * batch
	for _, kind := range joinKinds {
		t.Run(kind, func(t *testing.T) {
			l, r := stepped(os, ps, batch)
			var out *stream.Stream[joined]
			var mu sync.Mutex
			maxHeld, samples := 0, 0
			measure := func(context.Context, order) error {
				h := stream.JoinHeld(out)
				mu.Lock()
				defer mu.Unlock()
				maxHeld = max(maxHeld, h)
				samples++
				return nil
			}
			ol := stream.From[order](l).Tap(measure)
			sink := streamtest.Collect[joined]()
			out = buildJoin(kind, ol, stream.From[payment](r), within, stream.AllowedLateness(lateness), stream.OutOfOrderness(ooo))
			require.NoError(t, out.To(sink).Run(t.Context()))
			assert.Equal(t, nestedLoop(kind, os, ps, within.Milliseconds()), sorted(sink.Values()))
			require.Equal(t, n, samples)
			t.Logf("%s: at most %d records held over 10 minutes of event time (%d records per input; bound %d)", kind, maxHeld, n, bound)
			assert.LessOrEqual(t, maxHeld, bound, "records held")
			assert.GreaterOrEqual(t, maxHeld, int(2*rate*within.Seconds()), "the join holds what it must: a within of each input")
		})
	}
}

func TestJoinWindowIsExactAfterRestartsAtManyCrashPoints(t *testing.T) {
	const within = 40
	os, ps := joinInputs(31, 1000, 800, 5, 10, 50)
	for _, kind := range joinKinds {
		t.Run(kind, func(t *testing.T) {
			want := nestedLoop(kind, os, ps, within)
			uninterrupted, failed := runJoinUntilDone(t, kind, os, ps, within, 0, 0)
			require.Zero(t, failed)
			require.Equal(t, want, dedup(uninterrupted))
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
					got, failed := runJoinUntilDone(t, kind, os, ps, within, seed, 20)
					assert.GreaterOrEqual(t, failed, 15, "crash points")
					assert.Equal(t, want, dedup(got), "the results without duplicates are the uninterrupted run's")
					t.Logf("%d crashes, %d results (%d distinct)", failed, len(got), len(want))
				})
			}
		})
	}
}

// runJoinUntilDone runs the join over a crash store again and again, each
// run a fresh pipeline (a new process) resumed from the store, crashing it
// at a seeded point (a result downstream, or a Read of either input) until
// crashes runs failed, then lets a run complete. It returns every result
// any run emitted and how many runs failed.
func runJoinUntilDone(t *testing.T, kind string, os []order, ps []payment, within int64, seed uint64, crashes int) ([]joined, int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	var all []joined
	failed := 0
	name := map[string]string{"inner": stream.StageJoinWindow, "left": stream.StageLeftJoinWindow, "outer": stream.StageOuterJoinWindow}[kind]
	for run := 0; ; run++ {
		require.LessOrEqual(t, run, 10*crashes+1, "the pipeline never completed")
		plan := crashPlan{batch: 1 + rng.IntN(8), cpRecords: 1 + rng.IntN(64), interval: rng.IntN(4) == 0, tapAfter: -1}
		readFailRight := 0
		if failed < crashes {
			switch rng.IntN(3) {
			case 0:
				plan.tapAfter = rng.IntN(12)
			case 1:
				plan.readFail = 1 + rng.IntN(4)
			default:
				readFailRight = 1 + rng.IntN(4)
			}
			plan.cut = cut(rng.IntN(3))
		}
		store := openCrashStore(t, dir, name, nil)
		ls := streamtest.Slice(os, streamtest.OnTopic("left"), streamtest.BatchSize(plan.batch))
		rs := streamtest.Slice(ps, streamtest.OnTopic("right"), streamtest.BatchSize(1+rng.IntN(8)))
		require.NoError(t, ls.Resume(t.Context(), store))
		require.NoError(t, rs.Resume(t.Context(), store))
		// A crash at a Read of an input read to its end would never come.
		if ls.Position() == int64(len(os)) && plan.readFail > 0 {
			plan.readFail, readFailRight = 0, plan.readFail
		}
		if rs.Position() == int64(len(ps)) && readFailRight > 0 {
			plan.readFail, readFailRight = readFailRight, 0
		}
		// In lockstep, so that the input that does not crash cannot read
		// on to its end before the crash stops the pipeline: every run
		// moves the inputs by a few batches, and the crashes spread over
		// them.
		step := newLockstep()
		lsrc := &crashSource[order]{Source: &stepSource[order]{ls, step, 0}, failAt: plan.readFail, onFail: func() { store.cut(plan.cut) }}
		rsrc := &crashSource[payment]{Source: &stepSource[payment]{rs, step, 1}, failAt: readFailRight, onFail: func() { store.cut(plan.cut) }}
		interval := time.Duration(0)
		if plan.interval {
			interval = time.Millisecond
		}
		results := 0
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err := buildJoin(kind, stream.From[order](lsrc), stream.From[payment](rsrc), time.Duration(within)*time.Millisecond, stream.OutOfOrderness(50*time.Millisecond)).
			Tap(func(_ context.Context, j joined) error {
				if results == plan.tapAfter {
					store.cut(plan.cut)
					return errCrash
				}
				results++
				all = append(all, j)
				return nil
			}).
			Checkpointing(store, stream.CheckpointInterval(interval), stream.CheckpointRecords(plan.cpRecords)).
			Run(ctx)
		cancel()
		if err == nil {
			if failed < crashes {
				t.Logf("run %d completed before its crash (%s, right fails at read %d), after %d results, left at %d, right at %d, reads %d %d", run, plan, readFailRight, results, ls.Position(), rs.Position(), lsrc.reads, rsrc.reads)
			}
			return all, failed
		}
		require.ErrorIs(t, err, errCrash, "run %d (%s, right fails at read %d)", run, plan, readFailRight)
		failed++
	}
}

func TestJoinWindowEmitsItsPendingResultsAgainAfterAFailureDownstream(t *testing.T) {
	// The first run fails on the join's first result downstream: every
	// record is finished (in the state) and every result is pending, and
	// Run's last save keeps them. The second run reads nothing and emits
	// the pending results again, then, at the end of the input, the
	// payment that found no order.
	os := []order{{0, "a", 1000}, {1, "b", 1010}}
	ps := []payment{{0, "a", 1005}, {1, "b", 1015}, {2, "c", 5000}}
	store := &checkpoint.MemoryStore{}
	var runs [][]joined
	for i, fail := range []bool{true, false} {
		var got []joined
		l, r := stepped(os, ps, 10)
		err := buildJoin("outer", stream.From[order](l), stream.From[payment](r), 100*time.Millisecond).
			Tap(func(_ context.Context, j joined) error {
				if fail {
					return errCrash
				}
				got = append(got, j)
				return nil
			}).
			Checkpointing(store, stream.CheckpointEachBatch()).Run(t.Context())
		if fail {
			require.ErrorIs(t, err, errCrash, "run %d", i)
		} else {
			require.NoError(t, err)
		}
		runs = append(runs, got)
	}
	assert.Equal(t, []joined{{-1, 2}, {0, 0}, {1, 1}}, sorted(runs[1]))
}

func TestJoinWindowRefusesAConsumerGroupSourceWithErrNotCopartitioned(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 10, 2), store: checkpoint.NewMemoryStore(), batch: 10, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }}}
	lk := stream.KeyBy(stream.From[groupRec](g).Checkpointing(g.store), func(r groupRec) string { return r.key }).FollowsPartitioning()
	rk := stream.KeyBy(stream.From(streamtest.Slice([]payment{{0, "a", 1}}, streamtest.OnTopic("right"))), func(p payment) string { return p.Key })
	err := stream.JoinWindow(lk, rk, time.Second, func(r groupRec, p payment) int { return p.ID }, stream.Name("orders-payments")).Run(t.Context())
	require.ErrorIs(t, err, stream.ErrNotCopartitioned)
	assert.ErrorContains(t, err, `"orders-payments"`)
	assert.ErrorContains(t, err, "partitioned alike by the join key")
	assert.ErrorContains(t, err, "Repartition")
	assert.ErrorContains(t, err, "one process")
}

func TestJoinWindowRefusesAPartitionReachingBothInputs(t *testing.T) {
	// Two slices on one topic-partition: positions are kept per
	// topic-partition, so one input would finish the other's records.
	os, ps := joinInputs(1, 50, 50, 3, 10, 0)
	err := buildJoin("inner", stream.From(streamtest.Slice(os)), stream.From(streamtest.Slice(ps)), time.Second).Run(t.Context())
	require.Error(t, err)
	assert.ErrorContains(t, err, streamtest.Topic+"/0 reaches both its inputs")
	assert.ErrorContains(t, err, "topics of their own")
}

func TestJoinWindowPanicsOnMisuse(t *testing.T) {
	keyed := func() (*stream.Keyed[string, order], *stream.Keyed[string, payment]) {
		return stream.KeyBy(stream.From(streamtest.Slice([]order{}, streamtest.OnTopic("left"))), func(o order) string { return o.Key }),
			stream.KeyBy(stream.From(streamtest.Slice([]payment{}, streamtest.OnTopic("right"))), func(p payment) string { return p.Key })
	}
	fn := func(o order, p payment) int { return 0 }
	for name, build := range map[string]func(){
		"nil left": func() { _, r := keyed(); stream.JoinWindow(nil, r, time.Second, fn) },
		"nil right": func() {
			l, _ := keyed()
			stream.JoinWindow[string, order, payment](l, nil, time.Second, fn)
		},
		"nil fn":           func() { l, r := keyed(); stream.JoinWindow[string, order, payment, int](l, r, time.Second, nil) },
		"nil left fn":      func() { l, r := keyed(); stream.LeftJoinWindow[string, order, payment, int](l, r, time.Second, nil) },
		"nil outer fn":     func() { l, r := keyed(); stream.OuterJoinWindow[string, order, payment, int](l, r, time.Second, nil) },
		"within 0":         func() { l, r := keyed(); stream.JoinWindow(l, r, 0, fn) },
		"within negative":  func() { l, r := keyed(); stream.JoinWindow(l, r, -time.Second, fn) },
		"within under 1ms": func() { l, r := keyed(); stream.JoinWindow(l, r, 500*time.Microsecond, fn) },
		"one pipeline": func() {
			s := stream.From(streamtest.Slice([]order{}))
			stream.JoinWindow(stream.KeyBy(s, func(o order) string { return o.Key }), stream.KeyBy(s, func(o order) string { return o.Key }), time.Second,
				func(a, b order) int { return 0 })
		},
		"EventTime": func() { l, r := keyed(); stream.JoinWindow(l, r, time.Second, fn, stream.EventTime(orderTime)) },
		"LateTo": func() {
			l, r := keyed()
			stream.JoinWindow(l, r, time.Second, fn, stream.LateTo[order](streamtest.Collect[order]()))
		},
		"EmitUpdates": func() { l, r := keyed(); stream.JoinWindow(l, r, time.Second, fn, stream.EmitUpdates()) },
		"DropLate and LateLeftTo": func() {
			l, r := keyed()
			stream.JoinWindow(l, r, time.Second, fn, stream.DropLate(), stream.LateLeftTo[order](streamtest.Collect[order]()))
		},
		"JoinTimes of other types": func() {
			l, r := keyed()
			stream.JoinWindow(l, r, time.Second, fn, stream.JoinTimes(paymentTime, orderTime))
		},
		"LateRightTo of the left type": func() {
			l, r := keyed()
			stream.JoinWindow(l, r, time.Second, fn, stream.LateRightTo[order](streamtest.Collect[order]()))
		},
		"JoinTimes nil twice": func() { stream.JoinTimes[order, payment](nil, nil) },
		"JoinTimes given to Window": func() {
			l, _ := keyed()
			stream.Window(l, stream.Tumbling(time.Second), stream.Count[order](), stream.JoinTimes(orderTime, paymentTime))
		},
		"LateLeftTo given to Aggregate": func() {
			l, _ := keyed()
			stream.Aggregate(l, stream.Count[order](), stream.LateLeftTo[order](streamtest.Collect[order]()))
		},
	} {
		t.Run(name, func(t *testing.T) {
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				build()
				return ""
			}()
			assert.Contains(t, msg, map[string]string{"nil left": "nil Keyed", "nil right": "nil Keyed", "nil fn": "nil function", "nil left fn": "nil function", "nil outer fn": "nil function", "within 0": "at least 1ms", "within negative": "at least 1ms", "within under 1ms": "at least 1ms", "one pipeline": "two streams of one pipeline", "EventTime": "JoinTimes", "LateTo": "LateLeftTo", "EmitUpdates": "EmitUpdates applies to Window", "DropLate and LateLeftTo": "give DropLate, or LateLeftTo", "JoinTimes of other types": "left function", "LateRightTo of the left type": "LateRightTo's sink", "JoinTimes nil twice": "two nil functions", "JoinTimes given to Window": "not to Window", "LateLeftTo given to Aggregate": "not to aggregate"}[name])
			assert.Contains(t, msg, "stream: ")
		})
	}
}
