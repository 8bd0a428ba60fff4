package main

import (
	"context"
	"slices"
	"time"

	"github.com/strom-dev/strom/stream"
)

// The window queries' sizes, nexmark/nexmark's (the setup Flink's figures
// come from): q5 counts bids in windows of 10 s starting every 2 s
// (Beam's and the original's hour and minute, shortened), q7 and q12 use
// tumbling windows of 10 s, q11 sessions that end after 10 s without a
// bid.
const (
	Q5Size    = 10 * time.Second
	Q5Slide   = 2 * time.Second
	Q7Size    = 10 * time.Second
	Q11Gap    = 10 * time.Second
	Q12Window = 10 * time.Second
)

// HotItem is a row of Q5: an auction with the most bids (Bids) of the
// sliding window [Start, End), in ms since the Unix epoch. A window whose
// count is tied has a row per auction at the top.
type HotItem struct {
	Auction int64
	Bids    int64
	Start   int64
	End     int64
}

// hottest is Q5's second stage's accumulator: the greatest count of a
// window's auctions and the auctions that have it, in the order their
// counts arrived. Auctions is replaced, never changed in place (the
// accumulator goes downstream as is).
type hottest struct {
	Max      int64
	Auctions []int64
}

// hottestAgg keeps the auctions with the greatest count of one window.
var hottestAgg = stream.Aggregator[stream.WindowResult[int64, int64], hottest]{
	Add: func(acc hottest, r stream.WindowResult[int64, int64]) hottest {
		switch {
		case r.Value > acc.Max:
			return hottest{Max: r.Value, Auctions: []int64{r.Key}}
		case r.Value == acc.Max:
			return hottest{Max: acc.Max, Auctions: append(slices.Clip(acc.Auctions), r.Key)}
		}
		return acc
	},
}

// Q5 is Nexmark's query 5, hot items: per sliding window of Q5Size every
// Q5Slide of event time, the auctions with the most bids.
//
//	SELECT auction, num FROM (count(*) AS num per auction per HOP(dateTime, 2 s, 10 s))
//	WHERE num >= the max of num over the window's auctions
//
// In strom it is two windows: the bids keyed by auction into
// stream.Sliding(Q5Size, Q5Slide) windows counting them (stream.Count),
// then those counts, each at its window's last instant (a WindowResult's
// event time), keyed by their window's start into stream.Tumbling(Q5Slide)
// windows, which each hold exactly one sliding window's counts (the
// sliding windows end on multiples of the slide), keeping the greatest
// count and its auctions; a FlatMap makes a row per auction. The first
// Window emits windows that fire together in the order of their ends, so
// none of its results is late for the second. The SQL's self-join of the
// counts with their maximum is the second window's accumulator.
func Q5(in Inputs) *stream.Stream[HotItem] {
	counts := stream.Window(stream.KeyBy(in.Bids(), func(b Bid) int64 { return b.Auction }),
		stream.Sliding(Q5Size, Q5Slide), stream.Count[Bid](), stream.Name("q5-counts"))
	top := stream.Window(stream.KeyBy(counts, func(r stream.WindowResult[int64, int64]) int64 { return r.Start.UnixMilli() }),
		stream.Tumbling(Q5Slide), hottestAgg, stream.Name("q5-hottest"))
	return stream.FlatMap(top, func(_ context.Context, r stream.WindowResult[int64, hottest]) ([]HotItem, error) {
		rows := make([]HotItem, len(r.Value.Auctions))
		for i, a := range r.Value.Auctions {
			// r.Key is the sliding window's start; it ends Q5Size later.
			rows[i] = HotItem{Auction: a, Bids: r.Value.Max, Start: r.Key, End: r.Key + Q5Size.Milliseconds()}
		}
		return rows, nil
	})
}

// WindowBid is a row of Q7: a bid with the highest price of the tumbling
// window [Start, End), in ms since the Unix epoch.
type WindowBid struct {
	Bid
	Start int64
	End   int64
}

// highest is Q7's accumulator: the highest price of a window and the bids
// at that price, in stream order. Bids is replaced, never changed in
// place (the accumulator goes downstream as is).
type highest struct {
	Price int64
	Bids  []Bid
}

// highestAgg keeps the bids with the highest price of a window. The first
// bid of a window always becomes its highest (prices are at least 1).
var highestAgg = stream.Aggregator[Bid, highest]{
	Add: func(acc highest, b Bid) highest {
		switch {
		case len(acc.Bids) == 0 || b.Price > acc.Price:
			return highest{Price: b.Price, Bids: []Bid{b}}
		case b.Price == acc.Price:
			return highest{Price: b.Price, Bids: append(slices.Clip(acc.Bids), b)}
		}
		return acc
	},
}

// Q7 is Nexmark's query 7, highest bid: per tumbling window of Q7Size of
// event time, the bids at the window's highest price.
//
//	SELECT B.* FROM bid B JOIN (SELECT MAX(price) AS maxprice, window_end FROM TUMBLE(bid, dateTime, 10 s)) B1
//	ON B.price = B1.maxprice WHERE B.dateTime in the window
//
// In strom it is one window: every bid under one key into
// stream.Tumbling(Q7Size) windows whose accumulator keeps the highest
// price and the bids at it (the SQL's join of the bids with their window's
// maximum), then a FlatMap makes a row per bid. (nexmark/nexmark's SQL
// takes the bids of [end - 10 s, end], both ends included, so a bid at
// exactly a window's end at its highest price would be a row of both
// windows; here a window is [Start, End), as its MAX is.)
func Q7(in Inputs) *stream.Stream[WindowBid] {
	top := stream.Window(stream.KeyBy(in.Bids(), func(Bid) uint8 { return 0 }),
		stream.Tumbling(Q7Size), highestAgg, stream.Name("q7-highest"))
	return stream.FlatMap(top, func(_ context.Context, r stream.WindowResult[uint8, highest]) ([]WindowBid, error) {
		rows := make([]WindowBid, len(r.Value.Bids))
		for i, b := range r.Value.Bids {
			rows[i] = WindowBid{Bid: b, Start: r.Start.UnixMilli(), End: r.End.UnixMilli()}
		}
		return rows, nil
	})
}

// BidderCount is a row of Q11 and Q12: the number of bids of a bidder in
// the window [Start, End), in ms since the Unix epoch (a session's End is
// its last bid's time plus the gap).
type BidderCount struct {
	Bidder int64
	Bids   int64
	Start  int64
	End    int64
}

// bidderRow makes a window's count of a bidder a row.
func bidderRow(_ context.Context, r stream.WindowResult[int64, int64]) (BidderCount, error) {
	return BidderCount{Bidder: r.Key, Bids: r.Value, Start: r.Start.UnixMilli(), End: r.End.UnixMilli()}, nil
}

// Q11 is Nexmark's query 11, user sessions: the number of bids of each
// bidder per session, a session ending Q11Gap of event time after its
// last bid.
//
//	SELECT bidder, count(*), SESSION_START(dateTime, 10 s), SESSION_END(dateTime, 10 s)
//	FROM bid GROUP BY bidder, SESSION(dateTime, 10 s)
//
// In strom: the bids keyed by bidder into stream.Session(Q11Gap) windows
// counting them (stream.Count, whose Merge joins the sessions a bid
// bridges), then a MapTo to rows.
func Q11(in Inputs) *stream.Stream[BidderCount] {
	sessions := stream.Window(stream.KeyBy(in.Bids(), func(b Bid) int64 { return b.Bidder }),
		stream.Session(Q11Gap), stream.Count[Bid](), stream.Name("q11-sessions"))
	return stream.MapTo(sessions, bidderRow)
}

// Q12 is Nexmark's query 12, processing-time windows: the number of bids
// of each bidder per tumbling window of Q12Window of processing time.
//
//	SELECT bidder, count(*), window_start, window_end
//	FROM TUMBLE(bid with PROCTIME() AS p_time, p_time, 10 s) GROUP BY bidder, window_start, window_end
//
// In strom: the bids keyed by bidder into stream.Tumbling(Q12Window)
// windows of stream.ProcessingTime() (the pipeline's clock when the window
// stage receives a bid) counting them, then a MapTo to rows. Which window
// a bid is counted in depends on when it is read, so the output is not
// deterministic, and a restart does not give the same windows; the
// windows still open when the input ends are emitted then.
func Q12(in Inputs) *stream.Stream[BidderCount] {
	counts := stream.Window(stream.KeyBy(in.Bids(), func(b Bid) int64 { return b.Bidder }),
		stream.Tumbling(Q12Window), stream.Count[Bid](), stream.ProcessingTime(), stream.Name("q12-counts"))
	return stream.MapTo(counts, bidderRow)
}
