package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// windowRate is the event rate of the window queries' fixture: 500 events
// a second of event time, so that its testEvents events span 200 s, 20 of
// q7's windows, 100 of q5's, and bidders' bids more than q11's gap apart.
// At the default 10,000 a second the stream would span 10 s: one or two
// windows, and one session per bidder.
const windowRate = 500

var (
	windowFixtureOnce sync.Once
	windowFixtureDir  string
	windowFixtureErr  error
)

// windowFixture returns a log directory holding the first testEvents
// events of seed 7's stream at windowRate, generated once for the
// package's tests.
func windowFixture(t *testing.T) string {
	t.Helper()
	windowFixtureOnce.Do(func() {
		windowFixtureDir = filepath.Join(tmpRoot, "windows")
		_, windowFixtureErr = Generate(context.Background(), windowFixtureDir, Config{Seed: 7, Rate: windowRate}, testEvents)
	})
	if windowFixtureErr != nil {
		t.Fatal(windowFixtureErr)
	}
	return windowFixtureDir
}

// floorTo returns t rounded down to a multiple of size (t >= 0).
func floorTo(t, size int64) int64 { return t - t%size }

// plainQ5 is q5 in maps and loops: every bid counted in each of the
// 10-second windows starting every 2 seconds (on multiples of 2 s since
// the epoch) that hold its time, then per window the auctions whose count
// is the window's greatest.
func plainQ5(bids []Bid) []HotItem {
	type windowAuction struct{ start, auction int64 }
	counts := map[windowAuction]int64{}
	for _, b := range bids {
		for s := floorTo(b.DateTime, 2000); s > b.DateTime-10_000; s -= 2000 {
			counts[windowAuction{s, b.Auction}]++
		}
	}
	top := map[int64]int64{}
	for k, n := range counts {
		top[k.start] = max(top[k.start], n)
	}
	var rows []HotItem
	for k, n := range counts {
		if n == top[k.start] {
			rows = append(rows, HotItem{Auction: k.auction, Bids: n, Start: k.start, End: k.start + 10_000})
		}
	}
	return rows
}

// plainQ7 is q7 in maps and loops: per 10-second window (on multiples of
// 10 s since the epoch), the bids at its highest price, windows in order
// of time, bids in stream order.
func plainQ7(bids []Bid) []WindowBid {
	top := map[int64]int64{}
	var starts []int64
	for _, b := range bids {
		s := floorTo(b.DateTime, 10_000)
		if p, ok := top[s]; !ok || b.Price > p {
			if !ok {
				starts = append(starts, s)
			}
			top[s] = b.Price
		}
	}
	var rows []WindowBid
	for _, s := range starts {
		for _, b := range bids {
			if floorTo(b.DateTime, 10_000) == s && b.Price == top[s] {
				rows = append(rows, WindowBid{Bid: b, Start: s, End: s + 10_000})
			}
		}
	}
	return rows
}

// plainQ11 is q11 in maps and loops: each bidder's bids, in time order,
// cut into sessions wherever the next bid is 10 s or more after the last
// one; a session runs from its first bid to 10 s after its last.
func plainQ11(bids []Bid) []BidderCount {
	times := map[int64][]int64{}
	for _, b := range bids {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var rows []BidderCount
	for bidder, ts := range times {
		slices.Sort(ts)
		cur := BidderCount{Bidder: bidder, Bids: 1, Start: ts[0], End: ts[0] + 10_000}
		for _, t := range ts[1:] {
			if t >= cur.End {
				rows = append(rows, cur)
				cur = BidderCount{Bidder: bidder, Start: t}
			}
			cur.Bids++
			cur.End = t + 10_000
		}
		rows = append(rows, cur)
	}
	return rows
}

// sortedRows returns rows sorted by their "%+v" lines, for comparing sets.
func sortedRows[T any](rows []T) []string {
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = fmt.Sprintf("%+v", r)
	}
	slices.Sort(lines)
	return lines
}

// TestQ5EqualsPlainGo ensures q5 emits, for every 10-second window every 2
// seconds, exactly the auctions with the most bids and their count.
func TestQ5EqualsPlainGo(t *testing.T) {
	dir := windowFixture(t)
	want := plainQ5(bidsFromLog(t, dir))
	if len(want) < 50 {
		t.Fatalf("the plain-Go q5 has %d rows: the stream is too short to test it", len(want))
	}
	equal(t, sortedRows(runQuery(t, dir, Q5)), sortedRows(want))
}

// TestQ7EqualsPlainGo ensures q7 emits, per 10-second window in order of
// time, the bids at the window's highest price in stream order.
func TestQ7EqualsPlainGo(t *testing.T) {
	dir := windowFixture(t)
	want := plainQ7(bidsFromLog(t, dir))
	if len(want) < 10 {
		t.Fatalf("the plain-Go q7 has %d rows: the stream is too short to test it", len(want))
	}
	equal(t, runQuery(t, dir, Q7), want)
}

// TestQ11EqualsPlainGo ensures q11 emits every session of every bidder
// (bids less than 10 s apart) with its count, first bid and end.
func TestQ11EqualsPlainGo(t *testing.T) {
	dir := windowFixture(t)
	want := plainQ11(bidsFromLog(t, dir))
	bidders := map[int64]int{}
	for _, r := range want {
		bidders[r.Bidder]++
	}
	if len(want) < 2*len(bidders) {
		t.Fatalf("the plain-Go q11 has %d sessions of %d bidders: too few bidders with several sessions to test it", len(want), len(bidders))
	}
	equal(t, sortedRows(runQuery(t, dir, Q11)), sortedRows(want))
}

// TestQ12CountsEveryBidOnce ensures q12's processing-time windows, whatever
// times the bids are read at, count every bid of a bidder exactly once:
// the counts of a bidder's windows add up to its bids, no window of a
// bidder is emitted twice, and each is a 10-second window on a multiple
// of 10 s.
func TestQ12CountsEveryBidOnce(t *testing.T) {
	dir := fixture(t)
	want := map[int64]int64{}
	for _, b := range bidsFromLog(t, dir) {
		want[b.Bidder]++
	}
	got := map[int64]int64{}
	windows := map[[2]int64]bool{}
	for _, r := range runQuery(t, dir, Q12) {
		if r.End-r.Start != 10_000 || r.Start%10_000 != 0 || r.Bids < 1 {
			t.Fatalf("row %+v: want a count of a 10 s window starting on a multiple of 10 s", r)
		}
		if w := [2]int64{r.Bidder, r.Start}; windows[w] {
			t.Fatalf("row %+v: the bidder's window was emitted twice", r)
		} else {
			windows[w] = true
		}
		got[r.Bidder] += r.Bids
	}
	if len(got) != len(want) {
		t.Fatalf("q12 counted %d bidders, the bids have %d", len(got), len(want))
	}
	for b, n := range want {
		if got[b] != n {
			t.Fatalf("bidder %d: q12's windows count %d bids, the log holds %d", b, got[b], n)
		}
	}
}

// The kill tests' child: the test binary run again with killChildEnv set
// to "<query>|<log folder>|<work folder>|<kill at>" runs the query there
// (killChild) instead of the tests.
const (
	killChildEnv = "NEXMARK_KILL_CHILD"
	// killSeedEnv replays a kill schedule: the seed fixes the first kill
	// point and the draws of the later ones, which also depend on the
	// results the killed runs wrote, and each kill waits for a save, whose
	// timing is the machine's.
	killSeedEnv = "NEXMARK_KILL_SEED"
	killOut     = "out.txt"
	// killCheckpointRecords is the child's checkpoint policy: a save every
	// that many records, not on a timer, so that saves land between the
	// kills whatever the machine's speed.
	killCheckpointRecords = 1500
	killRounds            = 4 // kills before the run let finish
)

func init() {
	if v := os.Getenv(killChildEnv); v != "" {
		os.Exit(killChild(v))
	}
}

// killQueries are the queries the kill tests run in the child.
var killQueries = map[string]func(in Inputs, out *os.File, killAt int, saved func() bool) error{
	"q5":  toFile(Q5),
	"q7":  toFile(Q7),
	"q11": toFile(Q11),
}

// toFile returns runToFile of build.
func toFile[T any](build func(Inputs) *stream.Stream[T]) func(Inputs, *os.File, int, func() bool) error {
	return func(in Inputs, out *os.File, killAt int, saved func() bool) error {
		return runToFile(build, in, out, killAt, saved)
	}
}

// killChild runs a query of killQueries over the log (read-only) from the
// FileStore in work/state, appending each result as a "%+v" line to
// work/out.txt, and SIGKILLs itself once the run has written killAt
// results (0: never) and saved a position past the one it started from.
func killChild(arg string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "nexmark kill child:", err)
		return 1
	}
	f := strings.Split(arg, "|")
	if len(f) != 4 {
		return fail(fmt.Errorf("%s=%q: want query|log|work|killAt", killChildEnv, arg))
	}
	run, ok := killQueries[f[0]]
	killAt, err := strconv.Atoi(f[3])
	if !ok || err != nil {
		return fail(fmt.Errorf("%s=%q: unknown query or bad kill point (%v)", killChildEnv, arg, err))
	}
	lg, err := log.Open(f[1], log.ReadOnly())
	if err != nil {
		return fail(err)
	}
	defer lg.Close()
	store, err := checkpoint.NewFileStore(filepath.Join(f[2], "state"))
	if err != nil {
		return fail(err)
	}
	out, err := os.OpenFile(filepath.Join(f[2], killOut), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	start, _, err := store.Load(context.Background(), TopicBid, 0)
	if err != nil {
		return fail(err)
	}
	// The kill waits for a save of this run, so that every restart
	// resumes from a newer checkpoint than the last.
	saved := func() bool {
		pos, ok, err := store.Load(context.Background(), TopicBid, 0)
		return err == nil && ok && pos.Offset > start.Offset
	}
	if err := run(Inputs{Log: lg, Store: store}, out, killAt, saved); err != nil {
		return fail(err)
	}
	return 0
}

// runToFile runs build's pipeline with a sink that appends each batch of
// results to out in one write, before the batch finishes (so every result
// a saved position or state may have passed is in the file), and kills
// the process at the first write after which killAt results are written
// and saved() is true.
func runToFile[T any](build func(Inputs) *stream.Stream[T], in Inputs, out *os.File, killAt int, saved func() bool) error {
	written := 0
	return build(in).To(sink.Func(func(_ context.Context, vs []T) error {
		var b strings.Builder
		for _, v := range vs {
			fmt.Fprintf(&b, "%+v\n", v)
		}
		if _, err := out.WriteString(b.String()); err != nil {
			return err
		}
		if written += len(vs); killAt > 0 && written >= killAt && saved() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the kill is on its way
		}
		return nil
	})).Checkpointing(in.Store, stream.CheckpointInterval(0), stream.CheckpointRecords(killCheckpointRecords)).Run(context.Background())
}

// testSurvivesKill9 runs query name over the window fixture in a child
// process SIGKILLed up to killRounds times, each once it has written a
// seeded number of results and saved a position of its own, and restarted
// from its FileStore, the last run let finish. It ensures every kill hit
// a running child and left a position past the last, and that the results
// without duplicates equal an uninterrupted run's, each of which that run
// emits once.
func testSurvivesKill9[T any](t *testing.T, name string, build func(Inputs) *stream.Stream[T]) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(killSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", killSeedEnv, err)
		}
		seed = v
	}
	t.Logf("seed %d (%s=%d replays it)", seed, killSeedEnv, seed)
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))

	dir := windowFixture(t)
	want := sortedRows(runQuery(t, dir, build))
	if len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Fatalf("the uninterrupted run emitted a result twice")
	}
	work := t.TempDir()
	var last int64 // the position the last kill left
	var notes []string
	for round := 0; round <= killRounds; round++ {
		// A run writes at least the results still missing before it ends,
		// so a kill point below that number is reached.
		missing := len(want) - len(distinctIn(t, work, want))
		killAt := 0
		switch {
		case round == killRounds || missing < 2:
		case round == 0:
			// Past the first tenth of the results, so that saves came
			// before: a kill before any save tests nothing.
			killAt = len(want)/10 + 1 + rng.IntN(max(1, len(want)/2))
		default:
			killAt = 1 + rng.IntN(missing/2)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d", killChildEnv, name, dir, work, killAt))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if killAt == 0 {
			if err != nil {
				t.Fatalf("final run (seed %d): %v\n%s", seed, err, stderr.String())
			}
			break
		}
		if err == nil && round > 0 {
			// It wrote its kill point's results before any save of its
			// own was done (the records left after its restart were few,
			// or the saves slow): its run is whole, the last.
			notes = append(notes, fmt.Sprintf("run %d finished before a save of its own", round+1))
			break
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("round %d (seed %d): the child was to be killed after %d results, it returned %v\n%s", round, seed, killAt, err, stderr.String())
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d (seed %d): the child ended with %v, not SIGKILL\n%s", round, seed, err, stderr.String())
		}
		store, err := checkpoint.NewFileStore(filepath.Join(work, "state"))
		if err != nil {
			t.Fatal(err)
		}
		pos, ok, err := store.Load(context.Background(), TopicBid, 0)
		if err != nil {
			t.Fatalf("round %d: the position a kill left: %v", round, err)
		}
		if !ok || pos.Offset <= last {
			t.Fatalf("round %d (seed %d): the kill left position %d (saved: %v), the last was %d: the child kills only after a save", round, seed, pos.Offset, ok, last)
		}
		last = pos.Offset
		notes = append(notes, fmt.Sprintf("kill %d at %d+ results, saved position %d", round+1, killAt, pos.Offset))
	}
	got := written(t, work)
	slices.Sort(got)
	dedup := slices.Compact(slices.Clone(got))
	if !slices.Equal(dedup, want) {
		missing, extra := diff(want, dedup)
		t.Fatalf("seed %d (%v): the killed runs' %d distinct results are not the uninterrupted run's %d: missing %d (first %q), extra %d (first %q)",
			seed, notes, len(dedup), len(want), len(missing), first(missing), len(extra), first(extra))
	}
	t.Logf("%s; %d results written for %d distinct", strings.Join(notes, ", "), len(got), len(want))
}

// written returns the lines of the child's output in work, once per time
// each was written.
func written(t *testing.T, work string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(work, killOut))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// distinctIn returns the lines of want the child's output in work holds.
func distinctIn(t *testing.T, work string, want []string) map[string]bool {
	t.Helper()
	in := map[string]bool{}
	for _, l := range written(t, work) {
		in[l] = true
	}
	found := map[string]bool{}
	for _, l := range want {
		if in[l] {
			found[l] = true
		}
	}
	return found
}

// diff returns the lines of the sorted a not in the sorted b, and those of
// b not in a.
func diff(a, b []string) (onlyA, onlyB []string) {
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && cmp.Less(a[0], b[0]):
			onlyA, a = append(onlyA, a[0]), a[1:]
		case len(a) == 0 || cmp.Less(b[0], a[0]):
			onlyB, b = append(onlyB, b[0]), b[1:]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return onlyA, onlyB
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestQ5SurvivesKill9 ensures q5's results after kill -9s and restarts,
// without duplicates, are an uninterrupted run's: its two windows' state
// is restored, not restarted empty or counted twice.
func TestQ5SurvivesKill9(t *testing.T) { testSurvivesKill9(t, "q5", Q5) }

// TestQ7SurvivesKill9 ensures q7's results after kill -9s and restarts,
// without duplicates, are an uninterrupted run's.
func TestQ7SurvivesKill9(t *testing.T) { testSurvivesKill9(t, "q7", Q7) }

// TestQ11SurvivesKill9 ensures q11's sessions after kill -9s and restarts,
// without duplicates, are an uninterrupted run's.
func TestQ11SurvivesKill9(t *testing.T) { testSurvivesKill9(t, "q11", Q11) }
