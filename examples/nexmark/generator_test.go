package main

import (
	"errors"
	"testing"
)

func generate(t testing.TB, cfg Config, n int) []Event {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = g.Next()
	}
	return evs
}

// TestGeneratorIsDeterministicForASeed ensures two generators of one seed
// make the same stream, and another seed a different one.
func TestGeneratorIsDeterministicForASeed(t *testing.T) {
	a := generate(t, Config{Seed: 7}, 20_000)
	b := generate(t, Config{Seed: 7}, 20_000)
	c := generate(t, Config{Seed: 8}, 20_000)
	differ := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("event %d differs between two generators of seed 7:\n%+v\n%+v", i, a[i], b[i])
		}
		if a[i] != c[i] {
			differ++
		}
	}
	if differ < len(a)/2 {
		t.Errorf("seeds 7 and 8 differ in %d of %d events, want most", differ, len(a))
	}
}

// TestGeneratorKeepsTheProportion ensures every 50 events hold 1 person,
// 3 auctions and 46 bids, in that order, and their ids count on from the
// first ids without gaps.
func TestGeneratorKeepsTheProportion(t *testing.T) {
	evs := generate(t, Config{Seed: 1}, 100_000)
	var c [4]int
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	for i, e := range evs {
		if e.Number != int64(i) {
			t.Fatalf("event %d numbered %d", i, e.Number)
		}
		c[e.Kind]++
		off := i % 50
		want := KindBid
		switch {
		case off < 1:
			want = KindPerson
		case off < 4:
			want = KindAuction
		}
		if e.Kind != want {
			t.Fatalf("event %d (offset %d of 50) is a %s, want a %s", i, off, e.Kind, want)
		}
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", i, e.Person.ID, nextPerson)
			}
			nextPerson++
		case KindAuction:
			if e.Auction.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", i, e.Auction.ID, nextAuction)
			}
			nextAuction++
		}
	}
	if c[KindPerson] != 2_000 || c[KindAuction] != 6_000 || c[KindBid] != 92_000 {
		t.Errorf("100,000 events hold %d persons, %d auctions, %d bids; want 2,000, 6,000, 92,000", c[KindPerson], c[KindAuction], c[KindBid])
	}
}

// TestGeneratorEventTimeFollowsTheRate ensures event n happens at
// BaseTime + n*1000/Rate ms, so the event time advances at Rate events a
// second and never goes back.
func TestGeneratorEventTimeFollowsTheRate(t *testing.T) {
	for _, rate := range []int64{0, 1_000, 50_000} {
		g, err := NewGenerator(Config{Seed: 3, Rate: rate})
		if err != nil {
			t.Fatal(err)
		}
		cfg := g.Config()
		prev := int64(0)
		const n = 100_000
		for i := range int64(n) {
			e := g.Next()
			if want := cfg.BaseTime + i*1000/cfg.Rate; e.Time() != want {
				t.Fatalf("rate %d: event %d at %d ms, want %d", cfg.Rate, i, e.Time(), want)
			}
			if e.Time() < prev {
				t.Fatalf("rate %d: event %d at %d ms, before the previous %d", cfg.Rate, i, e.Time(), prev)
			}
			prev = e.Time()
		}
		if span, want := prev-cfg.BaseTime, (n-1)*1000/cfg.Rate; span != want {
			t.Errorf("rate %d: %d events span %d ms, want %d", cfg.Rate, n, span, want)
		}
	}
}

// TestGeneratorMakesValidHotAndSizedEvents ensures bids and auctions refer
// only to persons and auctions made before them, auctions expire after
// they start and sit in a known category, the hot auctions take about half
// the bids (HotAuctionRatio 2) and the encoded sizes average the spec's.
func TestGeneratorMakesValidHotAndSizedEvents(t *testing.T) {
	evs := generate(t, Config{Seed: 5}, 200_000)
	lastP, lastA := int64(0), int64(0)
	bids, hot, seenAuction := 0, 0, map[int64]int{}
	var size [4]int
	var count [4]int
	for i, e := range evs {
		count[e.Kind]++
		switch e.Kind {
		case KindPerson:
			lastP = e.Person.ID
			size[KindPerson] += len(AppendPerson(nil, &e.Person))
		case KindAuction:
			a := e.Auction
			lastA = a.ID
			if a.Seller < FirstPersonID || a.Seller > lastP {
				t.Fatalf("event %d: auction by seller %d, persons made %d..%d", i, a.Seller, FirstPersonID, lastP)
			}
			if a.Expires <= a.DateTime {
				t.Fatalf("event %d: auction expires at %d, starts at %d", i, a.Expires, a.DateTime)
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+5 {
				t.Fatalf("event %d: category %d", i, a.Category)
			}
			if a.Reserve < a.InitialBid || a.InitialBid < 100 {
				t.Fatalf("event %d: initial bid %d, reserve %d", i, a.InitialBid, a.Reserve)
			}
			size[KindAuction] += len(AppendAuction(nil, &a))
		case KindBid:
			b := e.Bid
			if b.Auction < FirstAuctionID || b.Auction > lastA || b.Bidder < FirstPersonID || b.Bidder > lastP {
				t.Fatalf("event %d: bid on auction %d by %d, made so far auctions to %d, persons to %d", i, b.Auction, b.Bidder, lastA, lastP)
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d cents", i, b.Price)
			}
			bids++
			if b.Auction == lastA/hotGroup*hotGroup {
				hot++
			}
			seenAuction[b.Auction]++
			size[KindBid] += len(AppendBid(nil, &b))
		}
	}
	if share := float64(hot) / float64(bids); share < 0.45 || share > 0.6 {
		t.Errorf("%.3f of the bids are on the hot auction, want about 0.5 (HotAuctionRatio 2)", share)
	}
	for k, want := range map[Kind]int{KindPerson: 200, KindAuction: 500, KindBid: 100} {
		avg := float64(size[k]) / float64(count[k])
		if avg < float64(want)*0.9 || avg > float64(want)*1.1 {
			t.Errorf("a %s encodes to %.1f bytes on average, want about %d", k, avg, want)
		}
	}
}

// TestNewGeneratorRefusesNegativeFields ensures a field out of range is an
// error naming it.
func TestNewGeneratorRefusesNegativeFields(t *testing.T) {
	for _, c := range []Config{{Rate: -1}, {ActivePeople: -1}, {HotAuctionRatio: -2}, {BaseTime: -5}} {
		if _, err := NewGenerator(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewGenerator(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

// TestCodecRoundTrips ensures every event decodes to itself and a value
// cut short is ErrShortRecord, never a panic.
func TestCodecRoundTrips(t *testing.T) {
	for _, e := range generate(t, Config{Seed: 9}, 5_000) {
		var v []byte
		var got Event
		var err error
		got.Number, got.Kind = e.Number, e.Kind
		switch e.Kind {
		case KindPerson:
			v = AppendPerson(nil, &e.Person)
			got.Person, err = DecodePerson(v)
		case KindAuction:
			v = AppendAuction(nil, &e.Auction)
			got.Auction, err = DecodeAuction(v)
		default:
			v = AppendBid(nil, &e.Bid)
			got.Bid, err = DecodeBid(v)
		}
		if err != nil || got != e {
			t.Fatalf("event %d decodes to %+v, %v; want %+v", e.Number, got, err, e)
		}
	}
	b := Bid{Channel: "Apple", URL: "https://x"}
	v := AppendBid(nil, &b)
	for _, cut := range []int{0, bidFixed - 1, len(v) - 1} {
		if _, err := DecodeBid(v[:cut]); !errors.Is(err, ErrShortRecord) {
			t.Errorf("DecodeBid of %d of %d bytes = %v, want ErrShortRecord", cut, len(v), err)
		}
	}
	if _, err := DecodeAuction(make([]byte, 10)); !errors.Is(err, ErrShortRecord) {
		t.Errorf("DecodeAuction of 10 bytes = %v, want ErrShortRecord", err)
	}
	if _, err := DecodePerson(make([]byte, 10)); !errors.Is(err, ErrShortRecord) {
		t.Errorf("DecodePerson of 10 bytes = %v, want ErrShortRecord", err)
	}
}
