package main

import (
	"context"
	"fmt"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// Inputs is what a query reads: the log, opened read-only as a consumer
// would, and the checkpoint store its pipeline saves positions (and state)
// to.
type Inputs struct {
	Log   *log.Log
	Store checkpoint.Store
	// Gen is the generator Config the events were made with (zero fields:
	// the defaults). The joins size their bounds from it (SellerDelay,
	// MaxAuctionLength).
	Gen Config
	// sourceOpts are added to every topic's source, and with pace > 0
	// each topic's reader sleeps 1 ms every pace records: the kill tests
	// slow a run with them so that their kills land mid-run. Zero for the
	// measured runs.
	sourceOpts []source.PartitionOption
	pace       int
}

// read returns the stream of a topic's records, decoded by decode: a
// replay of partition 0 from the store's position (Earliest for a fresh
// store), reading into one reused buffer (source.ReuseBytes: the decoders
// copy what they keep).
func read[T any](in Inputs, topic string, decode func([]byte) (T, error)) *stream.Stream[T] {
	opts := append([]source.PartitionOption{source.Replay(), source.ReuseBytes()}, in.sourceOpts...)
	src := source.Partition(in.Log, topic, 0, source.FromStore(in.Store), opts...)
	n := 0
	return stream.MapTo(stream.From(src), func(_ context.Context, r log.Record) (T, error) {
		if n++; in.pace > 0 && n%in.pace == 0 {
			time.Sleep(time.Millisecond)
		}
		v, err := decode(r.Value)
		if err != nil {
			return v, fmt.Errorf("topic %s partition %d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		return v, nil
	})
}

// Bids returns the stream of bids (topic TopicBid), decoded.
func (in Inputs) Bids() *stream.Stream[Bid] { return read(in, TopicBid, DecodeBid) }

// Q0 is Nexmark's query 0, pass-through: every bid, decoded, as it is. It
// measures the cost of reading, decoding and checkpointing alone.
//
//	SELECT auction, bidder, price, dateTime, extra FROM bid
func Q0(in Inputs) *stream.Stream[Bid] { return in.Bids() }

// EuroBid is a bid of Q1: Price is the bid's price times DollarToEuro.
type EuroBid struct {
	Auction  int64
	Bidder   int64
	Price    float64
	DateTime int64
	Extra    string
}

// DollarToEuro is Q1's exchange rate, nexmark/nexmark's (its q1.sql:
// 0.908 * price). Beam's Query1 uses 89/100 in integer arithmetic instead;
// the Flink figures compared with are nexmark/nexmark's.
const DollarToEuro = 0.908

// Q1 is Nexmark's query 1, currency conversion: every bid with its price
// converted from dollars to euros, a map.
//
//	SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid
func Q1(in Inputs) *stream.Stream[EuroBid] {
	return stream.MapTo(in.Bids(), func(_ context.Context, b Bid) (EuroBid, error) {
		return EuroBid{Auction: b.Auction, Bidder: b.Bidder, Price: DollarToEuro * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra}, nil
	})
}

// AuctionPrice is a row of Q2.
type AuctionPrice struct {
	Auction int64
	Price   int64
}

// Q2Modulus is Q2's selection: the bids on auctions whose id is a multiple
// of it (nexmark/nexmark's q2.sql and Beam's Query2 both use 123).
const Q2Modulus = 123

// Q2 is Nexmark's query 2, selection: the auction and price of the bids on
// every Q2Modulus-th auction, a filter and a projection.
//
//	SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
func Q2(in Inputs) *stream.Stream[AuctionPrice] {
	on := in.Bids().Filter(func(_ context.Context, b Bid) (bool, error) { return b.Auction%Q2Modulus == 0, nil })
	return stream.MapTo(on, func(_ context.Context, b Bid) (AuctionPrice, error) {
		return AuctionPrice{Auction: b.Auction, Price: b.Price}, nil
	})
}
