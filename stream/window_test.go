package stream_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// The windowing tests feed the failed SSH logins of the Loghub OpenSSH
// sample through Window and compare every window with a count the test
// computes on its own, without the stream package.

// winAttempt is one failed SSH login: the value type the windows count.
type winAttempt struct {
	IP   string
	User string
	Time time.Time
}

// winYear is the year given to the sample's timestamps, which have none.
const winYear = 2025

var winFailedRe = regexp.MustCompile(`Failed password for (invalid user )?(\S+) from (\S+)`)

// winSSHAttempts parses the failed logins of OpenSSH_2k.log, in file order
// (which is time order): "Dec 10 07:28:14 LabSZ sshd[24206]: Failed
// password for invalid user test9 from 52.80.34.196 port 36060 ssh2", the
// time read as UTC in winYear.
func winSSHAttempts(t testing.TB) []winAttempt {
	t.Helper()
	f, err := os.Open(filepath.Join(loghub.Dir(t), "OpenSSH_2k.log"))
	require.NoError(t, err)
	defer f.Close()
	var out []winAttempt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		m := winFailedRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		require.Greater(t, len(line), 15, "line %q", line)
		ts, err := time.Parse("2006 Jan _2 15:04:05", fmt.Sprint(winYear, " ", line[:15]))
		require.NoError(t, err, "line %q", line)
		out = append(out, winAttempt{IP: m[3], User: m[2], Time: ts})
	}
	require.NoError(t, sc.Err())
	// The sample's 520 "Failed password" lines, "message repeated" ones
	// included, less one the regexp does not take ("invalid user  0101",
	// two spaces).
	require.Equal(t, 519, len(out), "failed logins in the sample")
	return out
}

func winAttemptTime(a winAttempt) time.Time { return a.Time }

// winCountByIP is the pipeline under test: failed logins keyed by IP and
// counted per window of w, by the attempt's time unless opts say otherwise.
func winCountByIP(in *stream.Stream[winAttempt], w stream.Windows, opts ...stream.StateOption) *stream.Stream[stream.WindowResult[string, int64]] {
	opts = append([]stream.StateOption{stream.EventTime(winAttemptTime)}, opts...)
	return stream.Window(stream.KeyBy(in, func(a winAttempt) string { return a.IP }), w, stream.Count[winAttempt](), opts...)
}

type winResult = stream.WindowResult[string, int64]

// winKey names a key's window, in Unix milliseconds.
type winKey struct {
	IP         string
	Start, End int64
}

func winKeyOf(r winResult) winKey { return winKey{r.Key, r.Start.UnixMilli(), r.End.UnixMilli()} }

// winFinals checks that every result is Final and that no window came twice,
// and returns the count of each window.
func winFinals(t *testing.T, rs []winResult) map[winKey]int64 {
	t.Helper()
	m := make(map[winKey]int64, len(rs))
	for _, r := range rs {
		k := winKeyOf(r)
		require.True(t, r.Final, "result %+v", r)
		_, dup := m[k]
		require.False(t, dup, "window %+v emitted twice", k)
		m[k] = r.Value
	}
	return m
}

// winTumblingCounts counts each IP's attempts per window [Start, Start+size),
// Start a multiple of size since the Unix epoch.
func winTumblingCounts(as []winAttempt, size time.Duration) map[winKey]int64 {
	ms := size.Milliseconds()
	m := make(map[winKey]int64)
	for _, a := range as {
		t := a.Time.UnixMilli()
		s := t - t%ms // every time here is after 1970
		m[winKey{a.IP, s, s + ms}]++
	}
	return m
}

// winAtLeast returns the windows with a count of at least n: the brute-force
// alerts of the sample.
func winAtLeast(m map[winKey]int64, n int64) []winKey {
	var out []winKey
	for k, c := range m {
		if c >= n {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b winKey) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return out
}

// winShuffle returns as reordered so that a record comes at most d
// after any record with a later time: each record is displaced by a
// pseudo-random delay in [0, d) and the records are sorted by time plus
// delay (stable, so equal keys keep file order). The seed makes it
// repeatable.
func winShuffle(as []winAttempt, d time.Duration, seed uint64) []winAttempt {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	type shifted struct {
		a  winAttempt
		at int64
	}
	s := make([]shifted, len(as))
	for i, a := range as {
		s[i] = shifted{a, a.Time.UnixMilli() + r.Int64N(d.Milliseconds())}
	}
	slices.SortStableFunc(s, func(x, y shifted) int { return int(x.at - y.at) })
	out := make([]winAttempt, len(s))
	for i := range s {
		out[i] = s[i].a
	}
	return out
}

// winSource serves values as one partition of topic "ssh", batch values
// per Read, then io.EOF, or with follow waits for the context to end.
type winSource[T any] struct {
	part   int32
	values []T
	batch  int
	follow bool
	// gate, when set, orders the start of the sources sharing it: see
	// winGate.
	gate *winGate

	next    int
	reads   int
	drained chan struct{} // closed at the first Read after the last value: every batch has passed
	eof     atomic.Bool   // io.EOF was returned
}

func newWinSource[T any](part int32, values []T, batch int) *winSource[T] {
	return &winSource[T]{part: part, values: values, batch: batch, drained: make(chan struct{})}
}

func (s *winSource[T]) Read(ctx context.Context) ([]stream.Element[T], error) {
	s.reads++
	n := s.batch
	if s.gate != nil {
		if err := s.gate.wait(ctx, s.part, s.reads); err != nil {
			return nil, err
		}
		if s.reads == 1 {
			n = 1
		}
	}
	if s.next >= len(s.values) {
		if s.next == len(s.values) {
			s.next++
			close(s.drained)
		}
		if s.follow {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s.eof.Store(true)
		return nil, io.EOF
	}
	end := min(s.next+n, len(s.values))
	out := make([]stream.Element[T], 0, end-s.next)
	for i := s.next; i < end; i++ {
		out = append(out, stream.Element[T]{Value: s.values[i], Topic: "ssh", Partition: s.part, Offset: int64(i), Epoch: checkpoint.NoEpoch})
	}
	s.next = end
	return out, nil
}

func (s *winSource[T]) Close() error { return nil }

// winGate starts the sources of partitions 0..n-1 in order: each sends
// its first record alone, partition p only once partition p-1's has passed
// the pipeline (a source's next Read starts only once its batch went
// through the sequential stages), and none sends more before every
// first record has passed.
type winGate struct {
	seen []chan struct{} // seen[p] is closed once partition p's first record has passed
}

func newWinGate(n int) *winGate {
	g := &winGate{seen: make([]chan struct{}, n)}
	for i := range g.seen {
		g.seen[i] = make(chan struct{})
	}
	return g
}

// wait is called by partition part before its read-th Read.
func (g *winGate) wait(ctx context.Context, part int32, read int) error {
	var wait []chan struct{}
	switch read {
	case 1:
		if part > 0 {
			wait = g.seen[part-1 : part]
		}
	case 2:
		close(g.seen[part])
		wait = g.seen
	}
	for _, ch := range wait {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// TestWindowTumblingCountsEqualIndependentCountPerIPAndMinute proves that a
// 1-minute tumbling count of the sample's failed logins per IP gives every
// (IP, minute) the count the test makes by hand, and the same alerts (5 or
// more in a minute), read from one partition or from three merged.
func TestWindowTumblingCountsEqualIndependentCountPerIPAndMinute(t *testing.T) {
	as := winSSHAttempts(t)
	want := winTumblingCounts(as, time.Minute)
	wantAlerts := winAtLeast(want, 5)
	require.NotEmpty(t, wantAlerts, "the sample has brute-force minutes")

	t.Run("one partition", func(t *testing.T) {
		out := streamtest.Collect[winResult]()
		s := winCountByIP(stream.From[winAttempt](streamtest.Slice(as, streamtest.BatchSize(37))), stream.Tumbling(time.Minute)).To(out)
		require.NoError(t, s.Run(context.Background()))
		got := winFinals(t, out.Values())
		assert.Equal(t, want, got)
		assert.Equal(t, wantAlerts, winAtLeast(got, 5))
		assert.Zero(t, stageStats(t, s.Stats(), stream.StageWindow).Late)
	})

	t.Run("three partitions merged", func(t *testing.T) {
		// Round robin over three partitions: each is in time order, and
		// the watermark, the least over the partitions seen, is never
		// past a record of any once all are seen. The gate has the first
		// record of each reach the window in time order before any
		// partition sends more: a partition first seen after another
		// moved the watermark on finds its windows closed (the watermark
		// knows only the partitions it has seen).
		parts := make([][]winAttempt, 3)
		for i, a := range as {
			parts[i%3] = append(parts[i%3], a)
		}
		g := newWinGate(len(parts))
		var ins []*stream.Stream[winAttempt]
		for p, vs := range parts {
			src := newWinSource(int32(p), vs, 20)
			src.gate = g
			ins = append(ins, stream.From[winAttempt](src))
		}
		out := streamtest.Collect[winResult]()
		s := winCountByIP(stream.Merge(ins...), stream.Tumbling(time.Minute)).To(out)
		require.NoError(t, s.Run(context.Background()))
		got := winFinals(t, out.Values())
		assert.Equal(t, want, got)
		assert.Equal(t, wantAlerts, winAtLeast(got, 5))
		assert.Zero(t, stageStats(t, s.Stats(), stream.StageWindow).Late)
	})
}

// TestWindowOutOfOrderWithinBoundGivesSameCountsAndNoLateRecords proves
// that records shuffled within 20 s, under an out-of-orderness of 30 s,
// give exactly the counts of the ordered input, with no record late.
func TestWindowOutOfOrderWithinBoundGivesSameCountsAndNoLateRecords(t *testing.T) {
	as := winSSHAttempts(t)
	shuffled := winShuffle(as, 20*time.Second, 1)
	require.NotEqual(t, as, shuffled, "the shuffle moved records")

	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(shuffled, streamtest.BatchSize(50))), stream.Tumbling(time.Minute),
		stream.OutOfOrderness(30*time.Second)).To(out)
	require.NoError(t, s.Run(context.Background()), "no record is late")
	assert.Equal(t, winTumblingCounts(as, time.Minute), winFinals(t, out.Values()))
	st := stageStats(t, s.Stats(), stream.StageWindow)
	assert.Zero(t, st.Late)
	assert.Equal(t, int64(len(as)), st.In)
}

// TestWindowLateRecordsAreExactlyThoseBehindTheWatermark proves, on records
// shuffled within 90 s under an out-of-orderness of 30 s, that the late
// side output holds exactly, and in order, the records whose window had
// ended at the watermark before they came (the watermark computed by the
// test: greatest time so far minus 30 s), that every window counts exactly
// the other records, and that no record is lost.
func TestWindowLateRecordsAreExactlyThoseBehindTheWatermark(t *testing.T) {
	as := winSSHAttempts(t)
	shuffled := winShuffle(as, 90*time.Second, 2)

	const ooo = 30 * time.Second
	minute := time.Minute.Milliseconds()
	var wantLate, onTime []winAttempt
	maxT := int64(math.MinInt64)
	for _, a := range shuffled {
		t := a.Time.UnixMilli()
		end := t - t%minute + minute
		if maxT != math.MinInt64 && end <= maxT-ooo.Milliseconds() {
			wantLate = append(wantLate, a)
		} else {
			onTime = append(onTime, a)
		}
		maxT = max(maxT, t)
	}
	require.NotEmpty(t, wantLate, "the shuffle makes records late")

	late := streamtest.Collect[winAttempt]()
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(shuffled, streamtest.BatchSize(50))), stream.Tumbling(time.Minute),
		stream.OutOfOrderness(ooo), stream.AllowedLateness(0), stream.LateTo[winAttempt](late)).To(out)
	require.NoError(t, s.Run(context.Background()))

	assert.Equal(t, wantLate, late.Values())
	got := winFinals(t, out.Values())
	assert.Equal(t, winTumblingCounts(onTime, time.Minute), got)
	var sum int64
	for _, n := range got {
		sum += n
	}
	assert.Equal(t, int64(len(shuffled)), sum+int64(len(late.Values())), "every record is in a window or late")
	st := stageStats(t, s.Stats(), stream.StageWindow)
	assert.Equal(t, int64(len(wantLate)), st.Late)
	assert.Zero(t, st.Skipped)
}

// winSessions splits each IP's attempts, in time order, where the next one
// comes gap or more after the previous: a session is [first, last+gap).
func winSessions(as []winAttempt, gap time.Duration) map[winKey]int64 {
	byIP := make(map[string][]int64)
	for _, a := range as {
		byIP[a.IP] = append(byIP[a.IP], a.Time.UnixMilli())
	}
	g := gap.Milliseconds()
	m := make(map[winKey]int64)
	for ip, ts := range byIP {
		slices.Sort(ts)
		start, n := ts[0], int64(1)
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] >= g {
				m[winKey{ip, start, ts[i-1] + g}] = n
				start, n = ts[i], 0
			}
			n++
		}
		m[winKey{ip, start, ts[len(ts)-1] + g}] = n
	}
	return m
}

// TestWindowSessionsEqualIndependentSplitOnGap proves that session windows
// of 30 s per IP are the sessions the test cuts by hand (a new one where
// the next attempt is 30 s or more after the previous), in time order and
// shuffled within 20 s (out-of-orderness 30 s), where records arrive that
// bridge sessions already open and merge them.
func TestWindowSessionsEqualIndependentSplitOnGap(t *testing.T) {
	as := winSSHAttempts(t)
	const gap = 30 * time.Second
	want := winSessions(as, gap)
	require.Less(t, len(want), len(as), "some sessions hold several attempts")

	for _, tc := range []struct {
		name string
		in   []winAttempt
	}{
		{"in order", as},
		{"shuffled within 20s", winShuffle(as, 20*time.Second, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := streamtest.Collect[winResult]()
			s := winCountByIP(stream.From[winAttempt](streamtest.Slice(tc.in, streamtest.BatchSize(50))), stream.Session(gap),
				stream.OutOfOrderness(30*time.Second)).To(out)
			require.NoError(t, s.Run(context.Background()))
			assert.Equal(t, want, winFinals(t, out.Values()))
		})
	}
}

// TestWindowSlidingCountsEqualBruteForce proves that 1-minute windows
// sliding every 20 s count, per IP, what the test counts by trying every
// window start over the sample's span.
func TestWindowSlidingCountsEqualBruteForce(t *testing.T) {
	as := winSSHAttempts(t)
	size, slide := time.Minute.Milliseconds(), (20 * time.Second).Milliseconds()
	lo, hi := as[0].Time.UnixMilli(), as[len(as)-1].Time.UnixMilli()
	want := make(map[winKey]int64)
	for s := lo - lo%slide - size; s <= hi; s += slide {
		for _, a := range as {
			if t := a.Time.UnixMilli(); s <= t && t < s+size {
				want[winKey{a.IP, s, s + size}]++
			}
		}
	}
	var total int64
	for _, n := range want {
		total += n
	}
	require.Equal(t, int64(3*len(as)), total, "each record is in size/slide = 3 windows")

	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(as, streamtest.BatchSize(50))), stream.Sliding(time.Minute, 20*time.Second)).To(out)
	require.NoError(t, s.Run(context.Background()))
	assert.Equal(t, want, winFinals(t, out.Values()))
}

// winT0 is a minute boundary the synthetic records are placed after.
var winT0 = time.Date(winYear, 12, 10, 7, 0, 0, 0, time.UTC)

// winAt returns an attempt from ip at winT0 plus d.
func winAt(ip string, d time.Duration) winAttempt {
	return winAttempt{IP: ip, User: "root", Time: winT0.Add(d)}
}

// winRes is the result of ip's window [winT0+from, winT0+to).
func winRes(ip string, from, to time.Duration, n int64, final bool) winResult {
	return winResult{Key: ip, Start: winT0.Add(from), End: winT0.Add(to), Value: n, Final: final}
}

// TestWindowLateRecordStopsRunByDefault proves that without LateTo or
// DropLate a late record stops Run with a *RecordError that wraps
// ErrLateRecord and names the record, its event time and the watermark.
func TestWindowLateRecordStopsRunByDefault(t *testing.T) {
	in := []winAttempt{winAt("a", 0), winAt("a", 2*time.Minute), winAt("a", 10*time.Second)}
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(in)), stream.Tumbling(time.Minute)).To(out)
	err := s.Run(context.Background())

	require.ErrorIs(t, err, stream.ErrLateRecord)
	var rerr *stream.RecordError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, stream.StageWindow, rerr.Stage)
	assert.Equal(t, streamtest.Topic, rerr.Topic)
	assert.Equal(t, int64(2), rerr.Offset)
	assert.Contains(t, err.Error(), "event time 2025-12-10T07:00:10Z")
	assert.Contains(t, err.Error(), "watermark 2025-12-10T07:02:00Z")
	assert.Equal(t, int64(1), stageStats(t, s.Stats(), stream.StageWindow).Late)
}

// TestWindowDropLateCountsLateAndSkipped proves that DropLate drops a late
// record, counts it in Late and Skipped, and lets Run finish.
func TestWindowDropLateCountsLateAndSkipped(t *testing.T) {
	in := []winAttempt{winAt("a", 0), winAt("a", 2*time.Minute), winAt("a", 10*time.Second), winAt("a", 2*time.Minute+time.Second)}
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(in)), stream.Tumbling(time.Minute), stream.DropLate()).To(out)
	require.NoError(t, s.Run(context.Background()))

	assert.Equal(t, []winResult{
		winRes("a", 0, time.Minute, 1, true),
		winRes("a", 2*time.Minute, 3*time.Minute, 2, true),
	}, out.Values())
	st := stageStats(t, s.Stats(), stream.StageWindow)
	assert.Equal(t, int64(1), st.Late)
	assert.Equal(t, int64(1), st.Skipped)
	assert.Equal(t, int64(4), st.In)
}

// TestWindowAllowedLatenessReemitsUpdatedFinal proves that with an allowed
// lateness of 1 minute a record less than that behind its fired window
// updates it and the window is emitted again, Final, with the new count,
// while a record behind by more is late.
func TestWindowAllowedLatenessReemitsUpdatedFinal(t *testing.T) {
	in := []winAttempt{
		winAt("a", 0),
		winAt("a", 90*time.Second),  // watermark 1m30s: [0,1m) fires with 1
		winAt("a", 30*time.Second),  // 30s behind its window's end: [0,1m) again with 2
		winAt("a", 200*time.Second), // watermark 3m20s: [1m,2m) fires; [0,1m) is dropped at 2m
		winAt("a", 10*time.Second),  // [0,1m) closed at 2m: late
	}
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(in)), stream.Tumbling(time.Minute),
		stream.AllowedLateness(time.Minute), stream.DropLate()).To(out)
	require.NoError(t, s.Run(context.Background()))

	assert.Equal(t, []winResult{
		winRes("a", 0, time.Minute, 1, true),
		winRes("a", 0, time.Minute, 2, true),
		winRes("a", time.Minute, 2*time.Minute, 1, true),
		winRes("a", 3*time.Minute, 4*time.Minute, 1, true),
	}, out.Values())
	assert.Equal(t, int64(1), stageStats(t, s.Stats(), stream.StageWindow).Late)
}

// TestWindowWatermarkIsMinimumOverPartitions proves, with one source
// reading two partitions, that windows wait for the slower partition: the
// fast one running ten minutes ahead fires nothing, the slow one's records
// behind the fast one are not late, and windows fire as the slow one
// passes their end.
func TestWindowWatermarkIsMinimumOverPartitions(t *testing.T) {
	el := func(part int32, off int64, a winAttempt) stream.Element[winAttempt] {
		return stream.Element[winAttempt]{Value: a, Topic: "ssh", Partition: part, Offset: off, Epoch: checkpoint.NoEpoch}
	}
	var fast []stream.Element[winAttempt] // partition 0: a, one a minute, 0 to 10m
	for i := range 11 {
		fast = append(fast, el(0, int64(i), winAt("a", time.Duration(i)*time.Minute)))
	}
	steps := [][]stream.Element[winAttempt]{
		{el(1, 0, winAt("b", 0))},
		fast,
		{el(1, 1, winAt("b", 20*time.Second)), el(1, 2, winAt("b", 50*time.Second))},
		{el(1, 3, winAt("b", 70*time.Second))},
		{el(1, 4, winAt("b", 11*time.Minute))},
	}
	// phase counts the records that passed the Tap before the window; it
	// is set to -1 once the source has ended.
	var phase atomic.Int64
	i := 0
	src := &funcSource[winAttempt]{read: func(context.Context) ([]stream.Element[winAttempt], error) {
		if i == len(steps) {
			phase.Store(-1)
			return nil, io.EOF
		}
		i++
		return steps[i-1], nil
	}}
	got := make(map[int64][]winResult) // by phase
	in := stream.From[winAttempt](src).Tap(func(context.Context, winAttempt) error { phase.Add(1); return nil })
	s := winCountByIP(in, stream.Tumbling(time.Minute)).
		To(sinkFunc[winResult](func(_ context.Context, rs []winResult) error {
			p := phase.Load()
			got[p] = append(got[p], rs...)
			return nil
		}))
	require.NoError(t, s.Run(context.Background()), "no record of the slow partition is late")

	sortResults := func(rs []winResult) []winResult {
		slices.SortFunc(rs, func(x, y winResult) int {
			return strings.Compare(fmt.Sprint(x.Key, x.Start.UnixMilli()), fmt.Sprint(y.Key, y.Start.UnixMilli()))
		})
		return rs
	}
	want := map[int64][]winResult{
		// b at 1m10s: the watermark reaches 1m10s, the first windows fire.
		15: {winRes("a", 0, time.Minute, 1, true), winRes("b", 0, time.Minute, 3, true)},
		// b at 11m: the watermark reaches 10m, the fast one's last.
		16: {winRes("b", time.Minute, 2*time.Minute, 1, true)},
		// The end of the input.
		-1: {winRes("a", 10*time.Minute, 11*time.Minute, 1, true), winRes("b", 11*time.Minute, 12*time.Minute, 1, true)},
	}
	for m := 1; m < 10; m++ {
		want[16] = append(want[16], winRes("a", time.Duration(m)*time.Minute, time.Duration(m+1)*time.Minute, 1, true))
	}
	for p := range want {
		want[p] = sortResults(want[p])
	}
	for p := range got {
		got[p] = sortResults(got[p])
	}
	assert.Equal(t, want, got)
}

// TestWindowEmitUpdatesEmitsEarlyResultsThenFinal proves that EmitUpdates
// emits a window's result, not Final, after every record that changes it,
// and then its Final result when the watermark passes its end.
func TestWindowEmitUpdatesEmitsEarlyResultsThenFinal(t *testing.T) {
	in := []winAttempt{winAt("a", 0), winAt("a", 10*time.Second), winAt("b", 20*time.Second), winAt("a", 70*time.Second)}
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](streamtest.Slice(in)), stream.Tumbling(time.Minute), stream.EmitUpdates()).To(out)
	require.NoError(t, s.Run(context.Background()))

	assert.Equal(t, []winResult{
		winRes("a", 0, time.Minute, 1, false),
		winRes("a", 0, time.Minute, 2, false),
		winRes("b", 0, time.Minute, 1, false),
		winRes("a", time.Minute, 2*time.Minute, 1, false),
		winRes("a", 0, time.Minute, 2, true), // the watermark reached 1m10s
		winRes("b", 0, time.Minute, 1, true),
		winRes("a", time.Minute, 2*time.Minute, 1, true), // the end of the input
	}, out.Values())
}

// TestWindowEndOfInputEmitsOpenWindowsFinal proves that when the input
// ends every window still open is emitted Final, in the order of their
// ends, with the counts of the whole input, though the watermark (held
// back by an out-of-orderness of a day) had fired none.
func TestWindowEndOfInputEmitsOpenWindowsFinal(t *testing.T) {
	as := winSSHAttempts(t)
	src := newWinSource(0, as, 50)
	var early atomic.Int64
	var got []winResult
	s := winCountByIP(stream.From[winAttempt](src), stream.Tumbling(time.Minute), stream.OutOfOrderness(24*time.Hour)).
		To(sinkFunc[winResult](func(_ context.Context, rs []winResult) error {
			if !src.eof.Load() {
				early.Add(int64(len(rs)))
			}
			got = append(got, rs...)
			return nil
		}))
	require.NoError(t, s.Run(context.Background()))

	assert.Zero(t, early.Load(), "no window fired before the end of the input")
	assert.Equal(t, winTumblingCounts(as, time.Minute), winFinals(t, got))
	assert.True(t, slices.IsSortedFunc(got, func(x, y winResult) int { return x.End.Compare(y.End) }), "emitted in the order of their ends")
}

// TestWindowEndOfInputOrderKeepsAWindowAfterItOnTime proves that the
// windows a Window emits at the end of its input come in the order of
// their ends, so that a second Window over their results (event time: a
// result's last instant, the default) finds none of them late: 1-minute
// counts per IP, then 5-minute totals of those counts.
func TestWindowEndOfInputOrderKeepsAWindowAfterItOnTime(t *testing.T) {
	as := winSSHAttempts(t)
	perMinute := winCountByIP(stream.From[winAttempt](streamtest.Slice(as, streamtest.BatchSize(50))), stream.Tumbling(time.Minute),
		stream.OutOfOrderness(24*time.Hour)) // every window is emitted at the end of the input
	out := streamtest.Collect[stream.WindowResult[string, int64]]()
	s := stream.Window(stream.KeyBy(perMinute, func(winResult) string { return "all" }), stream.Tumbling(5*time.Minute),
		stream.Sum(func(r winResult) int64 { return r.Value }), stream.Name("window5m")).To(out)
	require.NoError(t, s.Run(context.Background()), "no per-minute result is late for the 5-minute window")

	want := make(map[winKey]int64)
	for k, n := range winTumblingCounts(as, 5*time.Minute) {
		want[winKey{"all", k.Start, k.End}] += n
	}
	assert.Equal(t, want, winFinals(t, out.Values()))
}

// TestWindowWatermarkJumpFiresWindowsInEndOrderAcrossKeys proves that when
// one record carries the watermark past several windows of several keys,
// the windows come out in the order of their ends across keys, so that a
// second Window over their results (event time: a result's last instant)
// finds none of them late: 1-minute counts per IP, held back by an
// out-of-orderness of 5 minutes until a record at 10m fires three windows
// of each of a and b at once, then per-minute totals over every IP.
func TestWindowWatermarkJumpFiresWindowsInEndOrderAcrossKeys(t *testing.T) {
	in := []winAttempt{
		winAt("a", time.Second), winAt("b", 2*time.Second),
		winAt("a", 61*time.Second), winAt("b", 62*time.Second),
		winAt("a", 121*time.Second), winAt("b", 122*time.Second),
		winAt("c", 10*time.Minute), // the watermark jumps to 5m: six windows fire
	}
	perMinute := winCountByIP(stream.From[winAttempt](streamtest.Slice(in)), stream.Tumbling(time.Minute),
		stream.OutOfOrderness(5*time.Minute))
	out := streamtest.Collect[winResult]()
	s := stream.Window(stream.KeyBy(perMinute, func(winResult) string { return "all" }), stream.Tumbling(time.Minute),
		stream.Sum(func(r winResult) int64 { return r.Value }), stream.Name("total"), stream.DropLate()).To(out)
	require.NoError(t, s.Run(context.Background()))

	assert.Equal(t, []winResult{
		winRes("all", 0, time.Minute, 2, true),
		winRes("all", time.Minute, 2*time.Minute, 2, true),
		winRes("all", 2*time.Minute, 3*time.Minute, 2, true),
		winRes("all", 10*time.Minute, 11*time.Minute, 1, true), // the end of the input
	}, out.Values(), "no per-minute result is missed")
	assert.Zero(t, stageStats(t, s.Stats(), "total").Late, "no per-minute result is late")
}

// TestWindowCancelledRunEmitsNothingEarly proves that cancelling Run while
// the source waits for more emits no open window: they are not complete.
func TestWindowCancelledRunEmitsNothingEarly(t *testing.T) {
	as := winSSHAttempts(t)
	src := newWinSource(0, as, 50)
	src.follow = true
	out := streamtest.Collect[winResult]()
	s := winCountByIP(stream.From[winAttempt](src), stream.Tumbling(time.Minute), stream.OutOfOrderness(24*time.Hour)).To(out)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-src.drained: // every record is in the window stage
	case err := <-done:
		require.FailNow(t, "Run returned before the source was drained", "%v", err)
	}
	cancel()
	require.NoError(t, <-done)

	assert.Empty(t, out.Values())
	assert.Equal(t, int64(len(as)), stageStats(t, s.Stats(), stream.StageWindow).In)
}

// TestWindowProcessingTimeFiresWhenClockPassesEnd proves that under
// ProcessingTime the records go to the window of the clock's time when
// they arrive, and the window fires when the clock passes its end, with
// no record coming after.
func TestWindowProcessingTimeFiresWhenClockPassesEnd(t *testing.T) {
	clock := streamtest.NewClock()
	in := []winAttempt{winAt("a", 0), winAt("a", time.Hour), winAt("b", -time.Hour)} // event times ignored
	src := newWinSource(0, in, 10)
	src.follow = true
	results := make(chan winResult, 10)
	s := stream.Window(stream.KeyBy(stream.From[winAttempt](src, stream.WithClock(clock)), func(a winAttempt) string { return a.IP }),
		stream.Tumbling(time.Minute), stream.Count[winAttempt](), stream.ProcessingTime()).
		To(sinkFunc[winResult](func(_ context.Context, rs []winResult) error {
			for _, r := range rs {
				results <- r
			}
			return nil
		}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-src.drained:
	case err := <-done:
		require.FailNow(t, "Run returned before the source was drained", "%v", err)
	}
	require.Empty(t, results, "nothing fires before the clock moves")
	// The source drained is not the window holding them: a record pushed
	// after the clock moves falls in the next window (under load, it did).
	require.Eventually(t, func() bool {
		w := s.Observe().Stages[0]
		return w.In == 3 && w.InFlight == 0
	}, 10*time.Second, time.Millisecond, "the window took the records")

	clock.Advance(time.Minute) // to the end of [ClockStart, ClockStart+1m)
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	var got []winResult
	for len(got) < 2 {
		select {
		case r := <-results:
			got = append(got, r)
		case <-timeout.C:
			require.FailNow(t, "the windows did not fire", "got %+v", got)
		}
	}
	slices.SortFunc(got, func(x, y winResult) int { return strings.Compare(x.Key, y.Key) })
	start := streamtest.ClockStart
	assert.Equal(t, []winResult{
		{Key: "a", Start: start, End: start.Add(time.Minute), Value: 2, Final: true},
		{Key: "b", Start: start, End: start.Add(time.Minute), Value: 1, Final: true},
	}, got)

	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, results, "nothing more fired")
}

// steppedClock is a streamtest.Clock whose wall reading can be stepped
// back (an NTP correction, a VM migration); its timers run on the fake
// clock's elapsed time, as a time.Timer runs on the monotonic clock.
type steppedClock struct {
	*streamtest.Clock
	back atomic.Int64 // ns the wall reading is behind the fake clock
}

func (c *steppedClock) Now() time.Time { return c.Clock.Now().Add(-time.Duration(c.back.Load())) }

// TestWindowProcessingTimeClockSteppingBackMakesNoRecordLate proves that
// under ProcessingTime a wall clock that steps back after a window fired
// makes no record late: the record after the step goes to a window still
// open (a processing time is never below the last one), which fires when
// the clock passes its end.
func TestWindowProcessingTimeClockSteppingBackMakesNoRecordLate(t *testing.T) {
	clock := &steppedClock{Clock: streamtest.NewClock()}
	records := make(chan stream.Element[winAttempt], 2)
	// asked gets a value at every Read: the batch before has gone through
	// the window stage.
	asked := make(chan struct{}, 10)
	src := &funcSource[winAttempt]{read: func(ctx context.Context) ([]stream.Element[winAttempt], error) {
		asked <- struct{}{}
		select {
		case e := <-records:
			return []stream.Element[winAttempt]{e}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	results := make(chan winResult, 10)
	late := make(chan winAttempt, 10)
	s := stream.Window(stream.KeyBy(stream.From[winAttempt](src, stream.WithClock(clock)), func(a winAttempt) string { return a.IP }),
		stream.Tumbling(time.Minute), stream.Count[winAttempt](), stream.ProcessingTime(),
		stream.LateTo[winAttempt](sinkFunc[winAttempt](func(_ context.Context, as []winAttempt) error {
			for _, a := range as {
				late <- a
			}
			return nil
		}))).
		To(sinkFunc[winResult](func(_ context.Context, rs []winResult) error {
			for _, r := range rs {
				results <- r
			}
			return nil
		}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	next := func() winResult {
		t.Helper()
		timeout := time.NewTimer(10 * time.Second)
		defer timeout.Stop()
		select {
		case r := <-results:
			return r
		case a := <-late:
			require.FailNow(t, "a record is late", "%+v", a)
		case err := <-done:
			require.FailNow(t, "Run returned", "%v", err)
		case <-timeout.C:
			require.FailNow(t, "no window fired")
		}
		return winResult{}
	}
	// taken waits until the window stage has taken n records: the source
	// asking for more is not the record through the window (under load, a
	// record taken after the clock moved went to a later window and this
	// test waited for ever).
	taken := func(n int64) {
		t.Helper()
		require.Eventually(t, func() bool {
			w := s.Observe().Stages[0]
			return w.In == n && w.InFlight == 0
		}, 10*time.Second, time.Millisecond, "the window took %d records", n)
	}
	start := streamtest.ClockStart

	<-asked
	records <- stream.Element[winAttempt]{Value: winAttempt{IP: "a"}, Topic: "t", Offset: 0, Epoch: checkpoint.NoEpoch}
	taken(1)                        // the record is in [start, start+1m)
	clock.Advance(90 * time.Second) // the clock passes its end: it fires
	assert.Equal(t, winResult{Key: "a", Start: start, End: start.Add(time.Minute), Value: 1, Final: true}, next())

	clock.back.Store(int64(time.Minute)) // the wall clock steps back to start+30s
	records <- stream.Element[winAttempt]{Value: winAttempt{IP: "a"}, Topic: "t", Offset: 1, Epoch: checkpoint.NoEpoch}
	taken(2)                       // the record is in a window
	clock.Advance(2 * time.Minute) // the wall clock reaches start+2m30s
	assert.Equal(t, winResult{Key: "a", Start: start.Add(time.Minute), End: start.Add(2 * time.Minute), Value: 1, Final: true}, next(),
		"the record after the step goes to the window of the last processing time, not to the closed one")

	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, late)
}

// winBenchValue is a 64-byte record of the benchmark.
type winBenchValue struct {
	Key  uint64
	Time int64 // ms
	_    [48]byte
}

// winBenchSource yields n winBenchValues over 1000 keys, one ms apart, in
// batches of 256 it reuses.
type winBenchSource struct {
	n, next int
	buf     []stream.Element[winBenchValue]
}

func (s *winBenchSource) Read(context.Context) ([]stream.Element[winBenchValue], error) {
	if s.next >= s.n {
		return nil, io.EOF
	}
	end := min(s.next+256, s.n)
	s.buf = s.buf[:0]
	for i := s.next; i < end; i++ {
		s.buf = append(s.buf, stream.Element[winBenchValue]{Value: winBenchValue{Key: uint64(i % 1000), Time: int64(i)},
			Topic: "bench", Offset: int64(i), Epoch: checkpoint.NoEpoch})
	}
	s.next = end
	return s.buf, nil
}

func (s *winBenchSource) Close() error { return nil }

// BenchmarkWindowTumblingCount measures a 1-minute tumbling count over
// 1000 keys of 64-byte values, per record; event time advances 1 ms a
// record, so each key has 60 records a window. It reports allocations
// and asserts nothing about them.
func BenchmarkWindowTumblingCount(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(64)
	var results atomic.Int64
	s := stream.Window(stream.KeyBy(stream.From[winBenchValue](&winBenchSource{n: b.N}), func(v winBenchValue) uint64 { return v.Key }),
		stream.Tumbling(time.Minute), stream.Count[winBenchValue](),
		stream.EventTime(func(v winBenchValue) time.Time { return time.UnixMilli(v.Time) })).
		To(sinkFunc[stream.WindowResult[uint64, int64]](func(_ context.Context, rs []stream.WindowResult[uint64, int64]) error {
			results.Add(int64(len(rs)))
			return nil
		}))
	b.ResetTimer()
	if err := s.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(results.Load())/float64(b.N), "results/op")
}

// Count the clicks of each user per minute of event time: a window's
// result comes once the watermark (the greatest time seen) passes its
// end, and the windows still open come out when the input ends.
func ExampleWindow() {
	type click struct {
		User string
		At   time.Time
	}
	winT0 := time.Date(2025, 12, 10, 7, 0, 0, 0, time.UTC)
	clicks := []click{
		{"ann", winT0},
		{"bob", winT0.Add(10 * time.Second)},
		{"ann", winT0.Add(40 * time.Second)},
		{"ann", winT0.Add(70 * time.Second)}, // the watermark passes 07:01: the first minute is complete
	}
	out := streamtest.Collect[stream.WindowResult[string, int64]]()
	byUser := stream.KeyBy(stream.From[click](streamtest.Slice(clicks)), func(c click) string { return c.User })
	err := stream.Window(byUser, stream.Tumbling(time.Minute), stream.Count[click](),
		stream.EventTime(func(c click) time.Time { return c.At })).
		To(out).
		Run(context.Background())

	for _, r := range out.Values() {
		fmt.Printf("%s [%s, %s) %d\n", r.Key, r.Start.Format("15:04:05"), r.End.Format("15:04:05"), r.Value)
	}
	fmt.Println(err)
	// Output:
	// ann [07:00:00, 07:01:00) 2
	// bob [07:00:00, 07:01:00) 1
	// ann [07:01:00, 07:02:00) 1
	// <nil>
}

// After an end of input the open windows are emitted and kept; a later run
// over more records emits such a window once more when the watermark
// passes it, with every record, and not after each record.
func TestWindowEmittedAtEndOfInputIsEmittedOnceMoreWhenALaterRunCompletesIt(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var in []winAttempt
	for i := range 60 { // one a second: the window [0, 1m) in two halves
		in = append(in, winAttempt{IP: "a", Time: base.Add(time.Duration(i) * time.Second)})
	}
	in = append(in, winAttempt{IP: "a", Time: base.Add(2 * time.Minute)}) // moves the watermark past it
	store := &checkpoint.MemoryStore{}
	run := func(values []winAttempt) []winResult {
		var got []winResult
		src := streamtest.Slice(values)
		require.NoError(t, src.Resume(context.Background(), store))
		err := winCountByIP(stream.From[winAttempt](src), stream.Tumbling(time.Minute)).
			Tap(func(_ context.Context, r winResult) error { got = append(got, r); return nil }).
			Checkpointing(store).Run(context.Background())
		require.NoError(t, err)
		return got
	}
	first := run(in[:30])
	require.Len(t, first, 1)
	assert.Equal(t, int64(30), first[0].Value, "the half-full window at the end of the first run")
	assert.True(t, first[0].Final)

	second := run(in)
	require.Len(t, second, 2, "the completed window once, then the 2m window at the end: %v", second)
	assert.Equal(t, base, second[0].Start)
	assert.Equal(t, int64(60), second[0].Value, "every record of the window, those of the first run from the state")
	assert.Equal(t, base.Add(2*time.Minute), second[1].Start)

	assert.Empty(t, run(in), "a third run over nothing new emits nothing again")
}

func TestWindowWithoutAnEventTimeFailsWithErrNoEventTime(t *testing.T) {
	s := stream.From[string](streamtest.Slice([]string{"a", "b"})) // a slice sets no Timestamp
	err := stream.Window(stream.KeyBy(s, func(v string) string { return v }), stream.Tumbling(time.Minute), stream.Count[string]()).
		Run(context.Background())
	require.ErrorIs(t, err, stream.ErrNoEventTime)
	assert.Contains(t, err.Error(), "stream.EventTime")
}

func TestWindowRefusesTwoTimeOrTwoLateOptions(t *testing.T) {
	s := stream.From[winAttempt](streamtest.Slice([]winAttempt{}))
	k := stream.KeyBy(s, func(a winAttempt) string { return a.IP })
	assert.PanicsWithValue(t, "stream: Window given EventTime and ProcessingTime: give one of EventTime and ProcessingTime, once", func() {
		stream.Window(k, stream.Tumbling(time.Minute), stream.Count[winAttempt](), stream.EventTime(winAttemptTime), stream.ProcessingTime())
	})
	assert.PanicsWithValue(t, "stream: Window given LateTo and DropLate: give one of LateTo and DropLate, once", func() {
		stream.Window(k, stream.Tumbling(time.Minute), stream.Count[winAttempt](), stream.EventTime(winAttemptTime),
			stream.LateTo[winAttempt](sinkFunc[winAttempt](func(context.Context, []winAttempt) error { return nil })), stream.DropLate())
	})
}

// listingSource lists two partitions and delivers its batches, all of
// partition 0, one per Read, calling before(i) first; then it waits for
// ctx (a follow that receives nothing more).
type listingSource struct {
	batches [][]stream.Element[winAttempt]
	before  func(i int)
	i       int
	drained chan struct{} // closed when Read waits: every batch went through the pipeline
}

func (s *listingSource) PendingPartitions() []stream.TopicPartition {
	return []stream.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
}

func (s *listingSource) Read(ctx context.Context) ([]stream.Element[winAttempt], error) {
	if s.i == len(s.batches) {
		close(s.drained)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.before(s.i)
	s.i++
	return s.batches[s.i-1], nil
}

func (s *listingSource) Close() error { return nil }

// A partition the source lists and that delivers nothing holds the
// watermark back; with Idleness it stops doing so once it has been idle
// that long on the pipeline's clock.
func TestWindowIdlenessLetsTheWatermarkPassAPartitionThatDeliversNothing(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := func(off int64, at time.Duration) []stream.Element[winAttempt] {
		return []stream.Element[winAttempt]{{Value: winAttempt{IP: "a", Time: base.Add(at)}, Topic: "t", Partition: 0, Offset: off}}
	}
	for _, tc := range []struct {
		name  string
		opts  []stream.StateOption
		fired bool
	}{
		{"without idleness", nil, false},
		{"with idleness", []stream.StateOption{stream.Idleness(time.Minute)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := streamtest.NewClock()
			src := &listingSource{batches: [][]stream.Element[winAttempt]{batch(0, 0), batch(1, 10*time.Second), batch(2, 3*time.Minute)},
				before: func(i int) { clock.Advance(time.Duration(i) * time.Minute) }, drained: make(chan struct{})}
			results := make(chan winResult, 10)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			s := winCountByIP(stream.From[winAttempt](src, stream.WithClock(clock)), stream.Tumbling(time.Minute), tc.opts...).
				Tap(func(_ context.Context, r winResult) error { results <- r; return nil })
			go func() { done <- s.Run(ctx) }()
			<-src.drained
			if tc.fired {
				r := <-results
				assert.Equal(t, base, r.Start)
				assert.EqualValues(t, 2, r.Value)
			}
			cancel()
			require.NoError(t, <-done)
			assert.Empty(t, results, "nothing (more) fired")
		})
	}
}

// idleSource lists partitions t/0 and t/1 and returns the batches the test
// sends on in, one per Read, until ctx ends. With lag set it reports
// (CaughtUp) whether partition 1 has records left to read: while behind,
// which a Read of a batch of partition 1 clears.
type idleSource struct {
	in     chan []stream.Element[winAttempt]
	lag    bool
	behind atomic.Bool
}

func (s *idleSource) PendingPartitions() []stream.TopicPartition {
	return []stream.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
}

func (s *idleSource) CaughtUp(topic string, partition int32, next int64) (caughtUp, ok bool) {
	if !s.lag || topic != "t" || partition != 1 {
		return false, false
	}
	return !s.behind.Load(), true
}

func (s *idleSource) Read(ctx context.Context) ([]stream.Element[winAttempt], error) {
	select {
	case b := <-s.in:
		if b[0].Partition == 1 {
			s.behind.Store(false)
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *idleSource) Close() error { return nil }

// idleBatch is a batch of partition part of t: an attempt of ip at each of
// ats after winT0, from offset off on.
func idleBatch(part int32, off int64, ip string, ats ...time.Duration) []stream.Element[winAttempt] {
	var b []stream.Element[winAttempt]
	for i, at := range ats {
		b = append(b, stream.Element[winAttempt]{Value: winAt(ip, at), Topic: "t", Partition: part, Offset: off + int64(i), Epoch: checkpoint.NoEpoch})
	}
	return b
}

// runIdle runs a 1-minute tumbling count per IP with an idleness of d
// over src, in a synctest bubble's goroutine, and returns what it
// emits and sends to the late sink, and a stop that cancels Run and
// returns its error.
func runIdle(src *idleSource, d time.Duration) (late func() []winAttempt, got func() []winResult, stop func() error) {
	var mu sync.Mutex
	var rs []winResult
	var ls []winAttempt
	s := winCountByIP(stream.From[winAttempt](src), stream.Tumbling(time.Minute), stream.Idleness(d),
		stream.LateTo[winAttempt](sinkFunc[winAttempt](func(_ context.Context, as []winAttempt) error {
			mu.Lock()
			defer mu.Unlock()
			ls = append(ls, as...)
			return nil
		}))).
		To(sinkFunc[winResult](func(_ context.Context, r []winResult) error {
			mu.Lock()
			defer mu.Unlock()
			rs = append(rs, r...)
			return nil
		}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() []winAttempt {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(ls)
		}, func() []winResult {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(rs)
		}, func() error {
			cancel()
			return <-done
		}
}

// TestWindowIdlenessFiresTheLastWindowsWithoutAnotherRecord proves that a
// partition that goes quiet stops holding the watermark back once it has
// been silent for the Idleness on the pipeline's clock, with no record
// after: partition 1 delivers b at 5s and goes quiet, partition 0
// delivers a at 0, 10s and 3m 30s later and goes quiet too; a minute
// after partition 1's record, the watermark moves to 3m and the windows
// [0, 1m) fire. (synctest's clock: time moves when every goroutine waits.)
func TestWindowIdlenessFiresTheLastWindowsWithoutAnotherRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &idleSource{in: make(chan []stream.Element[winAttempt])}
		late, got, stop := runIdle(src, time.Minute)
		src.in <- idleBatch(1, 0, "b", 5*time.Second)
		synctest.Wait()
		time.Sleep(30 * time.Second)
		src.in <- idleBatch(0, 0, "a", 0, 10*time.Second, 3*time.Minute)
		synctest.Wait()
		assert.Empty(t, got(), "partition 1 holds the watermark at 5s")

		time.Sleep(30 * time.Second) // partition 1 has been silent for a minute
		synctest.Wait()
		assert.Equal(t, []winResult{
			winRes("b", 0, time.Minute, 1, true),
			winRes("a", 0, time.Minute, 2, true),
		}, got(), "partition 1 is idle: the watermark is partition 0's, 3m")

		require.NoError(t, stop())
		assert.Empty(t, late())
	})
}

// TestWindowIdlenessFiresWhenEveryPartitionGoesQuietAtOnce proves that
// partitions that go quiet at the same moment (a backlog appended at once,
// read to its end) fire every window any of them has passed once the
// Idleness has run out: the watermark goes to the greatest of their event
// times, as if the one furthest ahead had gone quiet last. Partition 1
// delivers b at 30s, partition 0 a at 10s, 1m10s ... 5m10s, in one batch,
// then nothing; 2s later [0, 1m) of b and a's windows up to 5m fire
// (before, the watermark stayed at 30s and nothing fired). It never moves
// back: a record of partition 1 at 40s after that is late, and partition 1,
// delivering again, holds the watermark from then on.
func TestWindowIdlenessFiresWhenEveryPartitionGoesQuietAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &idleSource{in: make(chan []stream.Element[winAttempt]), lag: true} // partition 1 caught up
		late, got, stop := runIdle(src, 2*time.Second)
		var ats []time.Duration
		for m := range 6 {
			ats = append(ats, time.Duration(m)*time.Minute+10*time.Second)
		}
		src.in <- append(idleBatch(1, 0, "b", 30*time.Second), idleBatch(0, 0, "a", ats...)...)
		synctest.Wait()
		assert.Empty(t, got(), "partition 1 holds the watermark at 30s")

		time.Sleep(2 * time.Second) // both silent for the Idleness
		synctest.Wait()
		want := []winResult{winRes("b", 0, time.Minute, 1, true)}
		for m := range 5 {
			want = append(want, winRes("a", time.Duration(m)*time.Minute, time.Duration(m+1)*time.Minute, 1, true))
		}
		assert.Equal(t, want, got(), "every partition idle: the watermark is partition 0's, 5m10s")

		src.in <- idleBatch(1, 1, "b", 40*time.Second)
		synctest.Wait()
		assert.Equal(t, []winAttempt{winAt("b", 40*time.Second)}, late(), "the watermark did not move back to partition 1's time")
		src.in <- idleBatch(1, 2, "b", 5*time.Minute+20*time.Second)
		synctest.Wait()
		src.in <- idleBatch(0, 6, "a", 6*time.Minute+30*time.Second)
		synctest.Wait()
		assert.Len(t, got(), 6, "partition 1 delivers again: it holds the watermark at 5m20s")
		src.in <- idleBatch(1, 3, "b", 6*time.Minute)
		synctest.Wait()
		assert.Equal(t, append(want,
			winRes("a", 5*time.Minute, 6*time.Minute, 1, true),
			winRes("b", 5*time.Minute, 6*time.Minute, 1, true),
		), got(), "the watermark is 6m once partition 1 passed it")
		require.NoError(t, stop())
	})
}

// TestWindowIdlenessDoesNotCountAPartitionWithUnreadRecordsIdle proves that
// a partition silent for longer than the Idleness but whose source reports
// records left to read (CaughtUpReporter: a slow or blocked partition with
// lag) keeps holding the watermark back, so that its records, when they
// come, are not late.
func TestWindowIdlenessDoesNotCountAPartitionWithUnreadRecordsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &idleSource{in: make(chan []stream.Element[winAttempt]), lag: true}
		src.behind.Store(true)
		late, got, stop := runIdle(src, time.Minute)
		src.in <- idleBatch(0, 0, "a", 0, 10*time.Second)
		synctest.Wait()
		time.Sleep(2 * time.Minute) // partition 1, listed, has delivered nothing for 2 minutes
		src.in <- idleBatch(0, 2, "a", 3*time.Minute)
		synctest.Wait()
		assert.Empty(t, got(), "partition 1 has records to read: it holds the watermark")

		src.in <- idleBatch(1, 0, "b", 20*time.Second, 3*time.Minute+10*time.Second)
		synctest.Wait()
		assert.Empty(t, late(), "no record of partition 1 is late")
		assert.Equal(t, []winResult{
			winRes("a", 0, time.Minute, 2, true),
			winRes("b", 0, time.Minute, 1, true),
		}, got(), "the watermark is 3m once partition 1 delivered")
		require.NoError(t, stop())
	})
}

// TestWindowIdlenessHoldsTheWatermarkAgainWhenAnIdlePartitionHasRecordsToRead
// proves that an idle partition whose source then reports records to read
// (appended, not yet read) stops being idle within a second, without a
// record of it: the watermark waits for it again, and its records are not
// late.
func TestWindowIdlenessHoldsTheWatermarkAgainWhenAnIdlePartitionHasRecordsToRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &idleSource{in: make(chan []stream.Element[winAttempt]), lag: true}
		late, got, stop := runIdle(src, time.Minute)
		src.in <- idleBatch(0, 0, "a", 0)
		synctest.Wait()
		time.Sleep(61 * time.Second) // partition 1, caught up, is idle
		src.in <- idleBatch(0, 1, "a", 2*time.Minute)
		synctest.Wait()
		assert.Equal(t, []winResult{winRes("a", 0, time.Minute, 1, true)}, got(), "the watermark is partition 0's, 2m")

		src.behind.Store(true)  // records are appended to partition 1
		time.Sleep(time.Second) // its source is asked again
		src.in <- idleBatch(0, 2, "a", 5*time.Minute)
		synctest.Wait()
		src.in <- idleBatch(1, 0, "b", 3*time.Minute)
		synctest.Wait()
		assert.Empty(t, late(), "no record of partition 1 is late")
		assert.Equal(t, []winResult{
			winRes("a", 0, time.Minute, 1, true),
			winRes("a", 2*time.Minute, 3*time.Minute, 1, true),
		}, got(), "the watermark waited for partition 1, then went to 3m")
		require.NoError(t, stop())
	})
}
