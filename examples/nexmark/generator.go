package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// The proportion of the event kinds: of every ProportionDenominator events
// (numbered from 0), the first PersonProportion are persons, the next
// AuctionProportion auctions and the remaining BidProportion bids, the
// Nexmark specification's 1 : 3 : 46 (2% / 6% / 92%).
const (
	PersonProportion      = 1
	AuctionProportion     = 3
	BidProportion         = 46
	ProportionDenominator = PersonProportion + AuctionProportion + BidProportion
)

// The first ids, as in the specification: persons and auctions count from
// 1000, categories from 10.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
)

// hotGroup is how hot ids are picked: a hot auction (bidder, seller) is the
// latest auction (person) id rounded down to a multiple of hotGroup, so the
// same few ids take a large share of the bids for a while, then move on.
const hotGroup = 100

// Kind is the kind of an Event.
type Kind uint8

// The event kinds.
const (
	KindPerson Kind = iota + 1
	KindAuction
	KindBid
)

// String returns "person", "auction" or "bid".
func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one generated event: Kind says which of Person, Auction and Bid
// holds it (the other two are zero). Number is its 0-based position in the
// stream, which fixes its kind, its ids and its event time.
type Event struct {
	Number  int64
	Kind    Kind
	Person  Person
	Auction Auction
	Bid     Bid
}

// Time returns the event's event time in milliseconds since the Unix epoch.
func (e *Event) Time() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// Config configures a Generator. The zero value of every field selects the
// default given, which is the specification's (Beam's NexmarkConfiguration)
// unless said otherwise.
type Config struct {
	// Seed makes the stream: two generators of the same Config produce the
	// same events. Default 0 (a valid seed like any other).
	Seed uint64
	// Rate is the events per second of event time: event n happens at
	// BaseTime + n*1000/Rate ms (rounded down). Default 10,000, Beam's
	// firstEventRate. It fixes the event times only; the generator runs as
	// fast as it can.
	Rate int64
	// BaseTime is the event time of event 0, in ms since the Unix epoch.
	// Default 1,577,836,800,000 (2020-01-01T00:00:00Z): fixed, so that the
	// stream does not depend on the clock, and in the past, so that the log
	// accepts the timestamps (it refuses those far ahead of its clock).
	BaseTime int64
	// ActivePeople is how many of the latest persons are picked from for a
	// bidder or seller that is not hot. Default 1,000.
	ActivePeople int
	// InFlightAuctions is how many of the latest auctions a bid that is not
	// on a hot auction picks from, and the number of auctions open at any
	// moment on average (see auction expiry in the package doc).
	// Default 100.
	InFlightAuctions int
	// HotAuctionRatio, HotBiddersRatio and HotSellersRatio: a bid is on a
	// hot auction, by a hot bidder, and an auction by a hot seller, with
	// probability 1 - 1/ratio (a ratio of 1: never). Defaults 2, 4 and 4.
	HotAuctionRatio int
	HotBiddersRatio int
	HotSellersRatio int
	// Categories is the number of auction categories, ids FirstCategoryID
	// on. Default 5.
	Categories int
	// AvgPersonBytes, AvgAuctionBytes and AvgBidBytes are the average size
	// of an encoded event the Extra field pads towards (an event already
	// that large gets no Extra). Defaults 200, 500 and 100.
	AvgPersonBytes  int
	AvgAuctionBytes int
	AvgBidBytes     int
}

// ErrConfig is wrapped by NewGenerator's error for a Config field out of
// range; the message names the field.
var ErrConfig = errors.New("nexmark: bad generator config")

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int, name string) error {
		if *v < 0 {
			return fmt.Errorf("%w: %s %d is negative", ErrConfig, name, *v)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	if c.Rate < 0 {
		return c, fmt.Errorf("%w: Rate %d is negative", ErrConfig, c.Rate)
	}
	if c.Rate == 0 {
		c.Rate = 10_000
	}
	if c.BaseTime < 0 {
		return c, fmt.Errorf("%w: BaseTime %d is negative", ErrConfig, c.BaseTime)
	}
	if c.BaseTime == 0 {
		c.BaseTime = 1_577_836_800_000
	}
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{
		{&c.ActivePeople, 1000, "ActivePeople"},
		{&c.InFlightAuctions, 100, "InFlightAuctions"},
		{&c.HotAuctionRatio, 2, "HotAuctionRatio"},
		{&c.HotBiddersRatio, 4, "HotBiddersRatio"},
		{&c.HotSellersRatio, 4, "HotSellersRatio"},
		{&c.Categories, 5, "Categories"},
		{&c.AvgPersonBytes, 200, "AvgPersonBytes"},
		{&c.AvgAuctionBytes, 500, "AvgAuctionBytes"},
		{&c.AvgBidBytes, 100, "AvgBidBytes"},
	} {
		if err := def(f.v, f.d, f.name); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Generator makes the Nexmark event stream of a Config, one event at a time.
// It is deterministic: the n-th event depends only on the Config (the seed
// included) and n. Not safe for concurrent use.
type Generator struct {
	cfg     Config
	rng     *rand.Rand
	n       int64
	letters string // random lowercase letters Extra and descriptions are cut from
	buf     []byte // scratch for sizing events
}

// NewGenerator returns a Generator of cfg's stream, or an error wrapping
// ErrConfig that names a field out of range.
func NewGenerator(cfg Config) (*Generator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e65786d61726b))}
	var sb strings.Builder
	for range 1 << 16 {
		sb.WriteByte(byte('a' + g.rng.IntN(26)))
	}
	g.letters = sb.String()
	return g, nil
}

// Config returns the generator's Config with its defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Next returns the next event: event number 0 first.
func (g *Generator) Next() Event {
	n := g.n
	g.n++
	epoch, off := n/ProportionDenominator, n%ProportionDenominator
	ts := g.cfg.BaseTime + n*1000/g.cfg.Rate
	switch {
	case off < PersonProportion:
		return Event{Number: n, Kind: KindPerson, Person: g.person(FirstPersonID+epoch*PersonProportion+off, ts)}
	case off < PersonProportion+AuctionProportion:
		return Event{Number: n, Kind: KindAuction, Auction: g.auction(n, FirstAuctionID+epoch*AuctionProportion+off-PersonProportion, ts)}
	}
	return Event{Number: n, Kind: KindBid, Bid: g.bid(n, ts)}
}

// lastPerson and lastAuction return the highest person and auction id made
// at or before event n (there is one of each from event 1 on).
func lastPerson(n int64) int64 {
	return FirstPersonID + (n/ProportionDenominator+1)*PersonProportion - 1
}

func lastAuction(n int64) int64 {
	epoch, off := n/ProportionDenominator, n%ProportionDenominator
	made := min(max(off-PersonProportion+1, 0), AuctionProportion)
	return FirstAuctionID + epoch*AuctionProportion + made - 1
}

// pick returns a hot id (last rounded down to a multiple of hotGroup, but
// at least first) with probability 1 - 1/ratio, else one of the latest
// window ids up to last.
func (g *Generator) pick(last, first int64, ratio, window int) int64 {
	if ratio > 1 && g.rng.IntN(ratio) > 0 {
		return max(last/hotGroup*hotGroup, first)
	}
	w := min(int64(window), last-first+1)
	return last - g.rng.Int64N(w)
}

// price returns a price in cents, log-uniform from $1 to $1,000,000 as the
// specification's: 10^(6u) dollars for u uniform in [0, 1).
func (g *Generator) price() int64 {
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

// extra returns the padding that brings an event of size bytes to avg on
// average: avg-size bytes, +/- 20%, uniformly; none when size >= avg.
func (g *Generator) extra(size, avg int) string {
	if size >= avg {
		return ""
	}
	want := avg - size
	delta := int(math.Round(float64(want) * 0.2))
	n := want - delta + g.rng.IntN(2*delta+1)
	return g.text(n)
}

// text returns n random lowercase letters (a slice of g.letters: no allocation).
func (g *Generator) text(n int) string {
	n = min(n, len(g.letters))
	o := g.rng.IntN(len(g.letters) - n + 1)
	return g.letters[o : o+n]
}

var (
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	cities     = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	states     = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	channels   = []string{"Google", "Facebook", "Baidu", "Apple"}
)

func (g *Generator) person(id, ts int64) Person {
	first, last := firstNames[g.rng.IntN(len(firstNames))], lastNames[g.rng.IntN(len(lastNames))]
	p := Person{
		ID:           id,
		Name:         first + " " + last,
		EmailAddress: g.text(7) + "@" + g.text(5) + ".com",
		CreditCard:   fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000)),
		City:         cities[g.rng.IntN(len(cities))],
		State:        states[g.rng.IntN(len(states))],
		DateTime:     ts,
	}
	g.buf = AppendPerson(g.buf[:0], &p)
	p.Extra = g.extra(len(g.buf), g.cfg.AvgPersonBytes)
	return p
}

// auctionLength returns an auction's length in ms: uniform in [1, 2h] where
// h is the event time InFlightAuctions auctions take to be made, so that
// about InFlightAuctions auctions are open at any moment.
func (g *Generator) auctionLength() int64 {
	events := int64(g.cfg.InFlightAuctions) * ProportionDenominator / AuctionProportion
	h := events * 1000 / g.cfg.Rate
	return 1 + g.rng.Int64N(max(2*h, 1))
}

func (g *Generator) auction(n, id, ts int64) Auction {
	initial := g.price()
	a := Auction{
		ID:          id,
		ItemName:    g.text(20),
		Description: g.text(100),
		InitialBid:  initial,
		Reserve:     initial + g.price(),
		DateTime:    ts,
		Seller:      g.pick(lastPerson(n), FirstPersonID, g.cfg.HotSellersRatio, g.cfg.ActivePeople),
		Category:    FirstCategoryID + int64(g.rng.IntN(g.cfg.Categories)),
	}
	a.Expires = ts + g.auctionLength()
	g.buf = AppendAuction(g.buf[:0], &a)
	a.Extra = g.extra(len(g.buf), g.cfg.AvgAuctionBytes)
	return a
}

var channelURLs = func() []string {
	u := make([]string, len(channels))
	for i := range channels {
		u[i] = "https://www.nexmark.com/item.htm?query=1&channel_id=" + strconv.Itoa(i)
	}
	return u
}()

func (g *Generator) bid(n, ts int64) Bid {
	c := g.rng.IntN(len(channels))
	b := Bid{
		Auction:  g.pick(lastAuction(n), FirstAuctionID, g.cfg.HotAuctionRatio, g.cfg.InFlightAuctions),
		Bidder:   g.pick(lastPerson(n), FirstPersonID, g.cfg.HotBiddersRatio, g.cfg.ActivePeople),
		Price:    g.price(),
		Channel:  channels[c],
		URL:      channelURLs[c],
		DateTime: ts,
	}
	b.Extra = g.extra(bidFixed+len(b.Channel)+len(b.URL), g.cfg.AvgBidBytes)
	return b
}
