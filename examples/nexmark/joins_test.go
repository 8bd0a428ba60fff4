package main

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

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

// TestQ9EqualsPlainGo ensures q9's rows are updates of each auction's
// winner, each beating the one before, and that the latest row of every
// auction is its winning bid, for exactly the auctions that have one.
func TestQ9EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	want := plainWinners(t, dir)
	latest := map[int64]WinningBid{}
	for i, r := range runQuery(t, dir, Q9) {
		if r.Bid.Auction != r.Auction.ID || r.Bid.DateTime < r.Auction.DateTime || r.Bid.DateTime > r.Auction.Expires {
			t.Fatalf("row %d: bid %+v is not within auction %d [%d, %d]", i, r.Bid, r.Auction.ID, r.Auction.DateTime, r.Auction.Expires)
		}
		if prev, ok := latest[r.Auction.ID]; ok && !(r.Bid.Price > prev.Bid.Price || r.Bid.Price == prev.Bid.Price && r.Bid.DateTime < prev.Bid.DateTime) {
			t.Fatalf("row %d: bid %+v does not beat the auction's previous winner %+v", i, r.Bid, prev.Bid)
		}
		latest[r.Auction.ID] = r
	}
	if len(latest) != len(want) {
		t.Fatalf("q9 has winners for %d auctions, the plain-Go query for %d", len(latest), len(want))
	}
	for id, w := range want {
		if latest[id] != w {
			t.Fatalf("auction %d: q9's winner %+v, the plain-Go query's %+v", id, latest[id], w)
		}
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
