package main

import (
	"context"
	"fmt"
	"time"

	"github.com/strom-dev/strom/stream"
)

// Persons returns the stream of persons (topic TopicPerson), decoded.
func (in Inputs) Persons() *stream.Stream[Person] { return read(in, TopicPerson, DecodePerson) }

// Auctions returns the stream of auctions (topic TopicAuction), decoded.
func (in Inputs) Auctions() *stream.Stream[Auction] { return read(in, TopicAuction, DecodeAuction) }

// config returns the generator Config of the events with its defaults
// filled in. The join queries size their bounds from it; a Config out of
// range is a programming error of the caller (Generate refused it already),
// so it panics.
func (in Inputs) config() Config {
	c, err := in.Gen.withDefaults()
	if err != nil {
		panic(fmt.Sprintf("nexmark: Inputs.Gen: %v", err))
	}
	return c
}

// SellerDelay returns the longest event time, in ms, from a person to an
// auction it sells in cfg's stream: a seller is the latest person, one of
// the ActivePeople latest or the hot one (the latest rounded down to a
// multiple of 100), so at most max(ActivePeople, 100) - 1 persons, of
// ProportionDenominator events each, lie between them, and the auction
// comes at most one group of ProportionDenominator events after the latest
// person; plus 1 ms for the rounding of event times. 5,001 ms for the
// default Config. Fields out of range count as their defaults.
func SellerDelay(cfg Config) int64 {
	cfg, _ = cfg.withDefaults()
	persons := int64(max(cfg.ActivePeople, hotGroup))
	return persons*ProportionDenominator*1000/cfg.Rate + 1
}

// MaxAuctionLength returns the longest an auction of cfg's stream lasts,
// Expires - DateTime in ms: twice the event time InFlightAuctions auctions
// take to be made (the generator draws a length uniformly from 1 to that).
// 332 ms for the default Config. Fields out of range count as their
// defaults.
func MaxAuctionLength(cfg Config) int64 {
	cfg, _ = cfg.withDefaults()
	events := int64(cfg.InFlightAuctions) * ProportionDenominator / AuctionProportion
	return max(2*(events*1000/cfg.Rate), 1)
}

// LocalItem is a row of Q3: a seller in one of Q3States and an auction of
// theirs in Q3Category.
type LocalItem struct {
	Name    string
	City    string
	State   string
	Auction int64
}

// Q3Category is the auctions' category Q3 keeps (nexmark/nexmark's q3.sql
// and Beam's Query3).
const Q3Category = 10

// Q3States are the sellers' states Q3 keeps (as Q3Category).
var Q3States = [...]string{"OR", "ID", "CA"}

func q3State(s string) bool {
	for _, st := range Q3States {
		if s == st {
			return true
		}
	}
	return false
}

// Q3 is Nexmark's query 3, local item suggestion: the name, city and state
// of every person in Oregon, Idaho or California with each auction of
// category 10 they sell. A join of persons with auctions on id = seller.
//
//	SELECT P.name, P.city, P.state, A.id
//	FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
//	WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
//
// Flink runs it as a regular join, both inputs kept forever. Here it is a
// stream.JoinWindow of the persons (filtered, keyed by id) with the
// auctions (filtered, keyed by seller) within SellerDelay of the events'
// Config: every auction comes at most that long after its seller (see the
// package doc, "The joins"), so the windowed join emits exactly the
// regular join's rows, with state bounded by that delay (while the two
// topics' readers keep pace; the faster one's records wait in the state). Rows come in the
// order their second record reaches the join.
func Q3(in Inputs) *stream.Stream[LocalItem] {
	within := time.Duration(SellerDelay(in.config())) * time.Millisecond
	// It reads and keeps only the fields the rows need (the head decoders
	// below): the join's state is saved whole at every checkpoint.
	persons := read(in, TopicPerson, decodePersonHead).
		Filter(func(_ context.Context, p Person) (bool, error) { return q3State(p.State), nil })
	auctions := stream.MapTo(read(in, TopicAuction, decodeAuctionHead).
		Filter(func(_ context.Context, a Auction) (bool, error) { return a.Category == Q3Category, nil }),
		func(_ context.Context, a Auction) ([2]int64, error) { return [2]int64{a.ID, a.Seller}, nil })
	return stream.JoinWindow(
		stream.KeyBy(persons, func(p Person) int64 { return p.ID }),
		stream.KeyBy(auctions, func(a [2]int64) int64 { return a[1] }),
		within,
		func(p Person, a [2]int64) LocalItem {
			return LocalItem{Name: p.Name, City: p.City, State: p.State, Auction: a[0]}
		}, stream.Name("q3-join"))
}

// NewUser is a row of Q8: a person who entered the system and created an
// auction in the same Q8Window, which starts at Start (ms since the Unix
// epoch).
type NewUser struct {
	ID    int64
	Name  string
	Start int64
}

// Q8Window is Q8's tumbling window, nexmark/nexmark's 10 s (the original
// query's is 12 hours).
const Q8Window = 10 * time.Second

// windowStart returns the start of the Q8Window holding event time ms.
func windowStart(ms int64) int64 { return ms - ms%Q8Window.Milliseconds() }

// Q8 is Nexmark's query 8, monitor new users: each person who entered the
// system and created an auction in the same tumbling 10 s window of event
// time, once per window, with the window's start.
//
//	SELECT P.id, P.name, P.starttime
//	FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY id, name, window_start, window_end) P
//	JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY seller, window_start, window_end) A
//	ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
//
// As the SQL: a stream.Window of the auctions keyed by seller, tumbling
// 10 s, gives each seller once per window it sold in (the auctions'
// GROUP BY; persons need none, their ids being unique), and a
// stream.JoinWindow joins the persons keyed by id with those keyed by
// seller, their event times the starts of their windows
// (stream.JoinTimes), within 1 ms: two starts 1 ms apart or less are
// equal, so it pairs a person only with its own window's selling, and
// holds about two windows of persons and one of sellers. (Joining the
// auctions first and folding the pairs in a Window after was measured
// too: a hot seller's thousands of auctions a window sat in the join's
// per-key buffer, whose releases shift it, and ran at half the speed.)
// Event time throughout, so the rows are the same after a kill -9 and
// restart (at least once: deduplicated, equal).
func Q8(in Inputs) *stream.Stream[NewUser] {
	// It reads only the fields the rows need (the head decoders below).
	persons := stream.MapTo(read(in, TopicPerson, decodePersonHead), func(_ context.Context, p Person) (NewUser, error) {
		return NewUser{ID: p.ID, Name: p.Name, Start: windowStart(p.DateTime)}, nil
	})
	auctions := stream.KeyBy(read(in, TopicAuction, decodeAuctionHead), func(a Auction) int64 { return a.Seller })
	sellers := stream.MapTo(stream.Window(auctions, stream.Tumbling(Q8Window), stream.Count[Auction](), stream.Name("q8-sellers")),
		func(_ context.Context, w stream.WindowResult[int64, int64]) ([2]int64, error) {
			return [2]int64{w.Key, w.Start.UnixMilli()}, nil
		})
	return stream.JoinWindow(
		stream.KeyBy(persons, func(p NewUser) int64 { return p.ID }),
		stream.KeyBy(sellers, func(s [2]int64) int64 { return s[0] }),
		time.Millisecond,
		func(p NewUser, _ [2]int64) NewUser { return p },
		stream.JoinTimes(func(p NewUser) time.Time { return time.UnixMilli(p.Start) }, func(s [2]int64) time.Time { return time.UnixMilli(s[1]) }),
		stream.Name("q8-join"))
}

// WinningBid is a row of Q9: an auction and its highest bid among those
// placed between its start and its expiry, both inclusive.
type WinningBid struct {
	Auction Auction
	Bid     Bid
}

// beats reports whether bid b wins over w: a higher price, or the same
// price placed earlier (q9.sql's ORDER BY B.price DESC, B.dateTime ASC).
func beats(b, w Bid) bool {
	return b.Price > w.Price || b.Price == w.Price && b.DateTime < w.DateTime
}

// Q9 is Nexmark's query 9 (Beam's, not in the original suite), winning
// bids: each auction that got a bid between its start and its expiry,
// both inclusive, with the highest of those bids (ties: the earliest),
// once, when it can no longer change.
//
//	SELECT A.*, B.auction, B.bidder, B.price, B.dateTime, B.extra
//	FROM (SELECT A.*, B.*, ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
//	      FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
//	WHERE rownum <= 1
//
// A bid names an auction already made and counts until the auction
// expires, at most MaxAuctionLength of the events' Config later, so a
// stream.JoinWindow of the auctions (keyed by id) with the bids (keyed by
// auction) within that bound, filtered to [DateTime, Expires], pairs every
// auction with exactly its bids. A stream.Window keyed by auction then
// keeps the winner, in a 1 ms tumbling window at the auction's start (its
// event time) with an OutOfOrderness of MaxAuctionLength: a pair comes out
// of the join when the later of its auction and bid has arrived, at most
// MaxAuctionLength after the auction's start, so none is late, and the
// window closes only once a pair of an auction starting more than
// MaxAuctionLength later has come out, after the last bid of this one.
// Flink's top-1 emits an update each time an auction's winner changes and
// keeps every auction in its state; this emits each auction's final row
// (as Beam's Query9) and keeps only the open ones.
func Q9(in Inputs) *stream.Stream[WinningBid] {
	return winningBids(in, "q9", in.Auctions(), in.Bids())
}

// winningBids is Q9's pipeline over the auctions and bids given, stages
// named name-join and name-winner. Q4 gives it projections: the join's
// state is saved whole at every checkpoint, and the fewer bytes it holds
// the cheaper that is.
func winningBids(in Inputs, name string, auctions *stream.Stream[Auction], bids *stream.Stream[Bid]) *stream.Stream[WinningBid] {
	within := time.Duration(MaxAuctionLength(in.config())) * time.Millisecond
	pairs := stream.JoinWindow(
		stream.KeyBy(auctions, func(a Auction) int64 { return a.ID }),
		stream.KeyBy(bids, func(b Bid) int64 { return b.Auction }),
		within,
		func(a Auction, b Bid) WinningBid { return WinningBid{Auction: a, Bid: b} },
		stream.Name(name+"-join"))
	open := pairs.Filter(func(_ context.Context, w WinningBid) (bool, error) {
		return w.Auction.DateTime <= w.Bid.DateTime && w.Bid.DateTime <= w.Auction.Expires, nil
	})
	best := stream.Window(stream.KeyBy(open, func(w WinningBid) int64 { return w.Auction.ID }), stream.Tumbling(time.Millisecond),
		stream.Aggregator[WinningBid, WinningBid]{Add: func(acc, w WinningBid) WinningBid {
			if acc.Auction.ID == 0 || beats(w.Bid, acc.Bid) {
				return w
			}
			return acc
		}},
		stream.EventTime(func(w WinningBid) time.Time { return time.UnixMilli(w.Auction.DateTime) }),
		stream.OutOfOrderness(within),
		stream.Name(name+"-winner"))
	return stream.MapTo(best, func(_ context.Context, r stream.WindowResult[int64, WinningBid]) (WinningBid, error) {
		return r.Value, nil
	})
}

// CategoryPrice is a row of Q4: the average winning price (cents) of the
// auctions of a category so far, over Auctions auctions whose winning
// prices sum to Sum.
type CategoryPrice struct {
	Category int64
	Average  float64
	Sum      int64
	Auctions int64
}

// Q4 is Nexmark's query 4, average price for a category: the average of
// the winning bids' prices of the auctions in each category.
//
//	SELECT Q.category, AVG(Q.final)
//	FROM (SELECT MAX(B.price) AS final, A.category
//	      FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	      GROUP BY A.id, A.category) Q
//	GROUP BY Q.category
//
// Q9's rows, one per auction once its winner is final (of the auctions'
// and bids' integers only: the head decoders), keyed by category into a
// stream.Aggregate of a sum and a count. It emits the category's
// row after every auction; the latest row of a category is its average.
// (Flink's AVG of a BIGINT truncates to a BIGINT; Average here is the
// exact quotient, Sum and Auctions the parts. Flink's inner aggregate
// emits an auction's maximum as it grows and retracts it from the
// category's average at each change; here an auction counts once, final.)
func Q4(in Inputs) *stream.Stream[CategoryPrice] {
	auctions, bids := read(in, TopicAuction, decodeAuctionHead), read(in, TopicBid, decodeBidHead)
	avg := stream.Aggregate(stream.KeyBy(winningBids(in, "q4", auctions, bids), func(w WinningBid) int64 { return w.Auction.Category }),
		stream.Aggregator[WinningBid, CategoryPrice]{Add: func(acc CategoryPrice, w WinningBid) CategoryPrice {
			acc.Category = w.Auction.Category
			acc.Sum += w.Bid.Price
			acc.Auctions++
			acc.Average = float64(acc.Sum) / float64(acc.Auctions)
			return acc
		}}, stream.Name("q4-average"))
	return stream.MapTo(avg, func(_ context.Context, kv stream.KV[int64, CategoryPrice]) (CategoryPrice, error) {
		return kv.Value, nil
	})
}

// The join queries read only a few fields of the persons and auctions (and
// q4 of the bids), and decoding the whole record copies its strings, the
// padding Extra most of all: at 200 and 500 bytes a record that copy is a
// large share of q3's and q8's cost. The head decoders below read the
// fixed-width fields in place and copy only the strings a query keeps;
// the other fields are zero. Like the full decoders they keep no reference
// to v and wrap ErrShortRecord for a value too short.

// decodeAuctionHead decodes an auction's integers (id, initial bid,
// reserve, date time, expires, seller, category), no strings: no
// allocation.
func decodeAuctionHead(v []byte) (Auction, error) {
	if len(v) < auctionFixed {
		return Auction{}, fmt.Errorf("%w: auction of %d bytes, want at least %d", ErrShortRecord, len(v), auctionFixed)
	}
	return Auction{
		ID:         int64(le.Uint64(v[0:])),
		InitialBid: int64(le.Uint64(v[8:])),
		Reserve:    int64(le.Uint64(v[16:])),
		DateTime:   int64(le.Uint64(v[24:])),
		Expires:    int64(le.Uint64(v[32:])),
		Seller:     int64(le.Uint64(v[40:])),
		Category:   int64(le.Uint64(v[48:])),
	}, nil
}

// decodeBidHead decodes a bid's integers (auction, bidder, price, date
// time), no strings: no allocation.
func decodeBidHead(v []byte) (Bid, error) {
	if len(v) < bidFixed {
		return Bid{}, fmt.Errorf("%w: bid of %d bytes, want at least %d", ErrShortRecord, len(v), bidFixed)
	}
	return Bid{
		Auction:  int64(le.Uint64(v[0:])),
		Bidder:   int64(le.Uint64(v[8:])),
		Price:    int64(le.Uint64(v[16:])),
		DateTime: int64(le.Uint64(v[24:])),
	}, nil
}

// decodePersonHead decodes a person's id, date time, name, city and state
// (one allocation for the strings, without the email address, credit card
// and Extra).
func decodePersonHead(v []byte) (Person, error) {
	if len(v) < personFixed {
		return Person{}, fmt.Errorf("%w: person of %d bytes, want at least %d", ErrShortRecord, len(v), personFixed)
	}
	var ends [5]int
	n := 0
	for i := range ends {
		n += int(le.Uint16(v[16+2*i:]))
		ends[i] = n
	}
	if len(v) < personFixed+n {
		return Person{}, fmt.Errorf("%w: person of %d bytes, its strings need %d", ErrShortRecord, len(v), personFixed+n)
	}
	name, place := v[personFixed:personFixed+ends[0]], v[personFixed+ends[2]:personFixed+ends[4]]
	s := string(append(append(make([]byte, 0, len(name)+len(place)), name...), place...))
	city := ends[3] - ends[2]
	return Person{
		ID:       int64(le.Uint64(v[0:])),
		DateTime: int64(le.Uint64(v[8:])),
		Name:     s[:len(name)],
		City:     s[len(name) : len(name)+city],
		State:    s[len(name)+city:],
	}, nil
}
