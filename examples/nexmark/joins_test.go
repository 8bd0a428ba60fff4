package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
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
	"github.com/strom-dev/strom/source"

	"github.com/strom-dev/strom/stream"
)

// personsFromLog and auctionsFromLog return the persons and auctions of
// the log in dir, read back and decoded without a pipeline.
func personsFromLog(t *testing.T, dir string) []Person {
	t.Helper()
	var ps []Person
	for _, r := range readBack(t, dir, TopicPerson) {
		p, err := DecodePerson(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func auctionsFromLog(t *testing.T, dir string) []Auction {
	t.Helper()
	var as []Auction
	for _, r := range readBack(t, dir, TopicAuction) {
		a, err := DecodeAuction(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	return as
}

// sortedBy returns vs sorted by less (a copy).
func sortedBy[T any](vs []T, less func(a, b T) int) []T {
	vs = slices.Clone(vs)
	slices.SortFunc(vs, less)
	return vs
}

func cmpLocalItem(a, b LocalItem) int {
	return cmp.Or(cmp.Compare(a.Auction, b.Auction), cmp.Compare(a.Name, b.Name), cmp.Compare(a.City, b.City), cmp.Compare(a.State, b.State))
}

func cmpNewUser(a, b NewUser) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Name, b.Name))
}

// TestJoinBoundsCoverTheGenerator ensures the bounds the joins are sized
// by hold for the generator's streams: every auction comes at most
// SellerDelay after its seller, and lasts at most MaxAuctionLength, at the
// default rate and at another.
func TestJoinBoundsCoverTheGenerator(t *testing.T) {
	for _, cfg := range []Config{{Seed: 7}, {Seed: 8, Rate: 1_000, ActivePeople: 50}} {
		born := map[int64]int64{}
		var delay, length int64
		for _, e := range generate(t, cfg, 300_000) {
			switch e.Kind {
			case KindPerson:
				born[e.Person.ID] = e.Person.DateTime
			case KindAuction:
				at, ok := born[e.Auction.Seller]
				if !ok {
					t.Fatalf("auction %d: seller %d not made before it", e.Auction.ID, e.Auction.Seller)
				}
				delay = max(delay, e.Auction.DateTime-at)
				length = max(length, e.Auction.Expires-e.Auction.DateTime)
			}
		}
		if delay > SellerDelay(cfg) || length > MaxAuctionLength(cfg) {
			t.Errorf("config %+v: seller delay %d ms, auction length %d ms; the bounds are %d, %d", cfg, delay, length, SellerDelay(cfg), MaxAuctionLength(cfg))
		}
		// The bounds are tight enough to matter: a join half as wide
		// would miss pairs.
		if delay <= SellerDelay(cfg)/2 || length <= MaxAuctionLength(cfg)/2 {
			t.Errorf("config %+v: seller delay %d ms, auction length %d ms: far under the bounds %d, %d", cfg, delay, length, SellerDelay(cfg), MaxAuctionLength(cfg))
		}
	}
}

// TestQ3EqualsPlainGo ensures q3 emits exactly the rows of the regular
// join of persons in OR, ID or CA with the auctions of category 10 they
// sell, once each.
func TestQ3EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	people := map[int64]Person{}
	for _, p := range personsFromLog(t, dir) {
		people[p.ID] = p
	}
	var want []LocalItem
	for _, a := range auctionsFromLog(t, dir) {
		p, ok := people[a.Seller]
		if ok && a.Category == 10 && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			want = append(want, LocalItem{Name: p.Name, City: p.City, State: p.State, Auction: a.ID})
		}
	}
	equal(t, sortedBy(runQuery(t, dir, Q3), cmpLocalItem), sortedBy(want, cmpLocalItem))
}

var (
	q8FixtureOnce sync.Once
	q8FixtureDir  string
	q8FixtureErr  error
)

// q8Rate is the event rate of q8's fixture: 100,000 events at 500 a second
// span 200 s, 20 of q8's 10 s windows (at the default rate they would fill
// one).
const q8Rate = 500

// q8Fixture returns a log directory holding the first testEvents events of
// seed 43's stream at q8Rate.
func q8Fixture(t *testing.T) string {
	t.Helper()
	q8FixtureOnce.Do(func() {
		q8FixtureDir = filepath.Join(tmpRoot, "q8-fixture")
		_, q8FixtureErr = Generate(context.Background(), q8FixtureDir, Config{Seed: 43, Rate: q8Rate}, testEvents)
	})
	if q8FixtureErr != nil {
		t.Fatal(q8FixtureErr)
	}
	return q8FixtureDir
}

// plainQ8 computes q8 over the log in dir with maps: the persons who
// created an auction in the 10 s window (of event time, from the epoch)
// they entered in.
func plainQ8(t *testing.T, dir string) []NewUser {
	t.Helper()
	sold := map[[2]int64]bool{} // seller, window number
	for _, a := range auctionsFromLog(t, dir) {
		sold[[2]int64{a.Seller, a.DateTime / 10_000}] = true
	}
	var want []NewUser
	windows := map[int64]bool{}
	for _, p := range personsFromLog(t, dir) {
		w := p.DateTime / 10_000
		if sold[[2]int64{p.ID, w}] {
			want = append(want, NewUser{ID: p.ID, Name: p.Name, Start: w * 10_000})
			windows[w] = true
		}
	}
	if len(windows) < 10 {
		t.Fatalf("the plain-Go q8 has rows in %d windows: too few to test window boundaries", len(windows))
	}
	return sortedBy(want, cmpNewUser)
}

// TestQ8EqualsPlainGo ensures q8 emits each person who created an auction
// in the 10 s window they entered in, once, with the window's start, over
// 20 windows.
func TestQ8EqualsPlainGo(t *testing.T) {
	dir := q8Fixture(t)
	equal(t, sortedBy(runQuery(t, dir, func(in Inputs) *stream.Stream[NewUser] {
		in.Gen = Config{Rate: q8Rate}
		return Q8(in)
	}), cmpNewUser), plainQ8(t, dir))
}

// plainWinners computes the winning bid of every auction of the log in dir
// that got a bid between its start and its expiry: the highest price, the
// earliest of equal prices (then the first in the log).
func plainWinners(t *testing.T, dir string) map[int64]WinningBid {
	t.Helper()
	auctions := map[int64]Auction{}
	for _, a := range auctionsFromLog(t, dir) {
		auctions[a.ID] = a
	}
	win := map[int64]WinningBid{}
	for _, b := range bidsFromLog(t, dir) {
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		w, ok := win[a.ID]
		if !ok || b.Price > w.Bid.Price || (b.Price == w.Bid.Price && b.DateTime < w.Bid.DateTime) {
			win[a.ID] = WinningBid{Auction: a, Bid: b}
		}
	}
	if len(win) < 1000 {
		t.Fatalf("only %d auctions have a winner: too few to test", len(win))
	}
	return win
}

// TestQ9EqualsPlainGo ensures q9 emits one row per auction that got a bid
// between its start and its expiry, with its winning bid.
func TestQ9EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	want := plainWinners(t, dir)
	got := runQuery(t, dir, Q9)
	seen := map[int64]bool{}
	for i, r := range got {
		if seen[r.Auction.ID] {
			t.Fatalf("row %d: auction %d a second time", i, r.Auction.ID)
		}
		seen[r.Auction.ID] = true
		if w, ok := want[r.Auction.ID]; !ok || r != w {
			t.Fatalf("row %d: q9's winner %+v, the plain-Go query's %+v (found %v)", i, r, w, ok)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("q9 has winners for %d auctions, the plain-Go query for %d", len(got), len(want))
	}
}

// TestQ4EqualsPlainGo ensures the latest row of each category of q4 is the
// average of its auctions' winning prices.
func TestQ4EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	sum, n := map[int64]int64{}, map[int64]int64{}
	for _, w := range plainWinners(t, dir) {
		sum[w.Auction.Category] += w.Bid.Price
		n[w.Auction.Category]++
	}
	latest := map[int64]CategoryPrice{}
	for _, r := range runQuery(t, dir, Q4) {
		latest[r.Category] = r
	}
	if len(latest) != len(sum) || len(sum) != 5 {
		t.Fatalf("q4 has %d categories, the plain-Go query %d, want 5", len(latest), len(sum))
	}
	for c := range sum {
		want := CategoryPrice{Category: c, Average: float64(sum[c]) / float64(n[c]), Sum: sum[c], Auctions: n[c]}
		if latest[c] != want {
			t.Errorf("category %d: q4's latest row %+v, the plain-Go query's %+v", c, latest[c], want)
		}
	}
}

// The q8 kill test's child: the test binary run again with q8KillChildEnv
// set to "<log folder>|<work folder>" runs q8 there (q8KillChild) instead
// of the tests.
const (
	q8KillChildEnv = "NEXMARK_Q8_KILL_CHILD"
	q8KillSeedEnv  = "NEXMARK_Q8_KILL_SEED" // replays a kill schedule
	q8KillOut      = "q8.txt"
)

func init() {
	if v := os.Getenv(q8KillChildEnv); v != "" {
		logDir, work, _ := strings.Cut(v, "|")
		os.Exit(q8KillChild(logDir, work))
	}
}

// q8KillChild runs q8 over the log in logDir (read-only, replayed from the
// FileStore in work/state, checkpointing every 5 ms, batches of about 512
// bytes and 1 ms slept every 20 records of a topic so that the run lasts long enough to be
// killed in) and appends each
// row to work/q8.txt as `ID START "NAME" end` (O_APPEND, one write per
// batch, before the batch finishes; a kill inside a write leaves a torn last
// line, which the next run ends with a newline and the reader skips).
func q8KillChild(logDir, work string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "q8 kill child:", err)
		return 1
	}
	lg, err := log.Open(logDir, log.ReadOnly())
	if err != nil {
		return fail(err)
	}
	defer lg.Close()
	store, err := checkpoint.NewFileStore(filepath.Join(work, "state"))
	if err != nil {
		return fail(err)
	}
	out, err := os.OpenFile(filepath.Join(work, q8KillOut), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	if data, err := os.ReadFile(out.Name()); err == nil && len(data) > 0 && data[len(data)-1] != '\n' {
		if _, err := out.WriteString("\n"); err != nil { // end the torn line
			return fail(err)
		}
	}
	in := Inputs{Log: lg, Store: store, Gen: Config{Rate: q8Rate}, sourceOpts: []source.PartitionOption{source.MaxBytes(512)}, pace: 20}
	err = Q8(in).To(sink.Func(func(_ context.Context, us []NewUser) error {
		var b strings.Builder
		for _, u := range us {
			fmt.Fprintf(&b, "%d %d %q end\n", u.ID, u.Start, u.Name)
		}
		_, err := out.WriteString(b.String())
		return err
	})).Checkpointing(store, stream.CheckpointInterval(5*time.Millisecond)).Run(context.Background())
	if err != nil {
		return fail(err)
	}
	return 0
}

// q8KillRun starts the child on the log in logDir and the work folder work.
func q8KillRun(t *testing.T, logDir, work string) (*exec.Cmd, <-chan error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), q8KillChildEnv+"="+logDir+"|"+work)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited, &stderr
}

// q8Saved returns the auction topic's position saved in work's FileStore
// (0 if none yet).
func q8Saved(t *testing.T, work string) int64 {
	t.Helper()
	store, err := checkpoint.NewFileStore(filepath.Join(work, "state"))
	if err != nil {
		t.Fatal(err)
	}
	pos, _, err := store.Load(context.Background(), TopicAuction, 0)
	if err != nil {
		t.Fatalf("the saved auction position in %s: %v", work, err)
	}
	return pos.Offset
}

// readQ8 returns the rows in work's q8.txt, each complete line once per
// time it was written.
func readQ8(t *testing.T, work string) []NewUser {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(work, q8KillOut))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var rows []NewUser
	for line := range strings.Lines(string(data)) {
		var u NewUser
		var end string
		if _, err := fmt.Sscanf(line, "%d %d %q %s\n", &u.ID, &u.Start, &u.Name, &end); err != nil || end != "end" || !strings.HasSuffix(line, "\n") {
			continue // torn by a kill
		}
		rows = append(rows, u)
	}
	return rows
}

// TestQ8SurvivesKill9 runs q8 over its fixture in a child process once
// uninterrupted, for the reference, and once SIGKILLed at 4 seeded moments
// (once a checkpoint, positions with the join's and the window's state,
// has passed a seeded auction offset, at most a sixth of the topic past
// the last checkpoint) and restarted each time from its FileStore, the fifth run let
// finish. It ensures every kill hit a running child, and that the killed runs' rows, without duplicates, equal the
// reference's, which equal the plain-Go query's.
func TestQ8SurvivesKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(q8KillSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", q8KillSeedEnv, err)
		}
		seed = v
	}
	t.Logf("seed %d (%s=%d replays it)", seed, q8KillSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 8))

	logDir := q8Fixture(t)
	want := plainQ8(t, logDir)
	ref := t.TempDir()
	_, exited, stderr := q8KillRun(t, logDir, ref)
	if err := <-exited; err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	equal(t, sortedBy(readQ8(t, ref), cmpNewUser), want)

	auctions := int64(len(readBack(t, logDir, TopicAuction)))
	work := t.TempDir()
	var notes []string
	var mark int64 // the auction offset a checkpoint must pass before the kill
	for round := 0; ; round++ {
		before := len(readQ8(t, work))
		cmd, exited, stderr := q8KillRun(t, logDir, work)
		if round == 4 {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("final run: %v\n%s", err, stderr)
				}
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("final run did not finish in a minute: %s", stderr)
			}
			break
		}
		mark = max(mark, q8Saved(t, work)) + 1 + rng.Int64N(auctions/6)
		tick := time.NewTicker(time.Millisecond)
		deadline := time.After(time.Minute)
		var saved int64
	wait:
		for {
			select {
			case err := <-exited:
				tick.Stop()
				t.Fatalf("round %d (seed %d): the child finished (%v) before a checkpoint passed auction %d; it needs more work per record\n%s", round, seed, err, mark, stderr)
			case <-deadline:
				tick.Stop()
				_ = cmd.Process.Kill()
				t.Fatalf("round %d (seed %d): no checkpoint passed auction %d in a minute\n%s", round, seed, mark, stderr)
			case <-tick.C:
				if saved = q8Saved(t, work); saved >= mark {
					break wait
				}
			}
		}
		tick.Stop()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := <-exited
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("round %d: the child exited with %v, want killed", round, err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the kill did not hit a running child: %v\n%s", round, err, stderr)
		}
		// The checkpoint a kill leaves is readable, never torn, and
		// never goes back.
		after := q8Saved(t, work)
		if after < saved {
			t.Fatalf("round %d: the saved auction position went back from %d to %d", round, saved, after)
		}
		notes = append(notes, fmt.Sprintf("kill %d at auction %d of %d, %d rows written", round+1, after, auctions, len(readQ8(t, work))-before))
	}
	got := readQ8(t, work)
	equal(t, slices.Compact(sortedBy(got, cmpNewUser)), want)
	t.Logf("%s; %d rows written for %d distinct", strings.Join(notes, ", "), len(got), len(want))
}

// q3Table is q3 as the other mapping the package doc weighs: a table of the
// persons in OR, ID or CA (stream.ToTable) joined by processing time with
// the auctions of category 10 (stream.JoinTable).
func q3Table(in Inputs) *stream.Stream[LocalItem] {
	persons := in.Persons().Filter(func(_ context.Context, p Person) (bool, error) { return q3State(p.State), nil })
	auctions := in.Auctions().Filter(func(_ context.Context, a Auction) (bool, error) { return a.Category == Q3Category, nil })
	table := stream.ToTable(stream.KeyBy(persons, func(p Person) int64 { return p.ID }), stream.Name("q3-persons"))
	return stream.JoinTable(stream.KeyBy(auctions, func(a Auction) int64 { return a.Seller }), table,
		func(a Auction, p Person) LocalItem {
			return LocalItem{Name: p.Name, City: p.City, State: p.State, Auction: a.ID}
		})
}

// TestQ3AsATableJoinIsExactOnAFinishedLog ensures what the package doc says
// of the table mapping of q3: over a log written before the run, the
// auctions wait until the table has read every person (Table.Ready), so it
// emits exactly the rows of q3.
func TestQ3AsATableJoinIsExactOnAFinishedLog(t *testing.T) {
	dir := fixture(t)
	equal(t, sortedBy(runQuery(t, dir, q3Table), cmpLocalItem), sortedBy(runQuery(t, dir, Q3), cmpLocalItem))
}

// TestHeadDecodersKeepTheFieldsTheJoinsRead ensures the head decoders
// return the full decoders' records without the strings the joins do not
// read, and refuse a value too short.
func TestHeadDecodersKeepTheFieldsTheJoinsRead(t *testing.T) {
	dir := fixture(t)
	for _, r := range readBack(t, dir, TopicPerson) {
		full, _ := DecodePerson(r.Value)
		got, err := decodePersonHead(r.Value)
		want := Person{ID: full.ID, Name: full.Name, City: full.City, State: full.State, DateTime: full.DateTime}
		if err != nil || got != want {
			t.Fatalf("person at offset %d: %+v, %v; want %+v", r.Offset, got, err, want)
		}
	}
	for _, r := range readBack(t, dir, TopicAuction) {
		full, _ := DecodeAuction(r.Value)
		got, err := decodeAuctionHead(r.Value)
		full.ItemName, full.Description, full.Extra = "", "", ""
		if err != nil || got != full {
			t.Fatalf("auction at offset %d: %+v, %v; want %+v", r.Offset, got, err, full)
		}
	}
	for _, r := range readBack(t, dir, TopicBid)[:1000] {
		full, _ := DecodeBid(r.Value)
		got, err := decodeBidHead(r.Value)
		full.Channel, full.URL, full.Extra = "", "", ""
		if err != nil || got != full {
			t.Fatalf("bid at offset %d: %+v, %v; want %+v", r.Offset, got, err, full)
		}
	}
	short := []byte{1, 2, 3}
	person := AppendPerson(nil, &Person{Name: "Ann", City: "Bend", State: "OR"})
	for name, err := range map[string]error{
		"person":           func() error { _, err := decodePersonHead(short); return err }(),
		"person's strings": func() error { _, err := decodePersonHead(person[:len(person)-1]); return err }(),
		"auction":          func() error { _, err := decodeAuctionHead(short); return err }(),
		"bid":              func() error { _, err := decodeBidHead(short); return err }(),
	} {
		if !errors.Is(err, ErrShortRecord) {
			t.Errorf("a short %s: %v, want ErrShortRecord", name, err)
		}
	}
}
