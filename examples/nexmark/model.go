package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Person is a user of the auction site: a seller of auctions and a bidder.
// ID counts from FirstPersonID; DateTime is its event time, in milliseconds
// since the Unix epoch. Extra pads the record towards the spec's average
// size (Config.AvgPersonBytes).
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64
	Extra        string
}

// Auction is an item put up for sale by Seller (a Person's ID). ID counts
// from FirstAuctionID; InitialBid and Reserve are prices in cents; DateTime
// (its event time) and Expires are milliseconds since the Unix epoch;
// Category is one of Config.Categories ids from FirstCategoryID.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64
	Expires     int64
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid of Bidder (a Person's ID) on Auction (an Auction's ID) at
// Price cents. Channel and URL say where the bid came from (nexmark/nexmark's
// bid has them; Beam's does not). DateTime is its event time, in
// milliseconds since the Unix epoch.
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64
	Extra    string
}

// ErrShortRecord is returned (wrapped, naming the kind and the length) by
// the decoders for a value shorter than its fixed part or its strings.
var ErrShortRecord = errors.New("nexmark: record value too short")

// The encodings: little-endian fixed-width integers first, then the
// lengths of all strings but the last as uint16, then the strings' bytes
// one after another, the last (Extra) running to the end of the value.
// Decoding reads the integers in place and copies all the strings with one
// allocation (one string of the whole tail, sliced), so a bid decodes in
// a few tens of nanoseconds (BenchmarkDecodeBid).
const (
	bidFixed     = 4*8 + 2*2 // auction, bidder, price, dateTime; channel, url lengths
	auctionFixed = 7*8 + 2*2 // id, initialBid, reserve, dateTime, expires, seller, category; itemName, description lengths
	personFixed  = 2*8 + 5*2 // id, dateTime; name, email, creditCard, city, state lengths
)

var le = binary.LittleEndian

// AppendBid appends b's encoding to dst and returns the extended slice.
// Strings longer than 65,535 bytes (other than Extra) are not supported:
// the generator never makes one.
func AppendBid(dst []byte, b *Bid) []byte {
	dst = le.AppendUint64(dst, uint64(b.Auction))
	dst = le.AppendUint64(dst, uint64(b.Bidder))
	dst = le.AppendUint64(dst, uint64(b.Price))
	dst = le.AppendUint64(dst, uint64(b.DateTime))
	dst = le.AppendUint16(dst, uint16(len(b.Channel)))
	dst = le.AppendUint16(dst, uint16(len(b.URL)))
	dst = append(dst, b.Channel...)
	dst = append(dst, b.URL...)
	return append(dst, b.Extra...)
}

// DecodeBid decodes a value AppendBid made. The Bid keeps no reference to
// v, so v may be reused afterwards (source.ReuseBytes). A value too short
// is an error wrapping ErrShortRecord.
func DecodeBid(v []byte) (Bid, error) {
	if len(v) < bidFixed {
		return Bid{}, fmt.Errorf("%w: bid of %d bytes, want at least %d", ErrShortRecord, len(v), bidFixed)
	}
	cl, ul := int(le.Uint16(v[32:])), int(le.Uint16(v[34:]))
	if len(v) < bidFixed+cl+ul {
		return Bid{}, fmt.Errorf("%w: bid of %d bytes, its strings need %d", ErrShortRecord, len(v), bidFixed+cl+ul)
	}
	s := string(v[bidFixed:])
	return Bid{
		Auction:  int64(le.Uint64(v[0:])),
		Bidder:   int64(le.Uint64(v[8:])),
		Price:    int64(le.Uint64(v[16:])),
		DateTime: int64(le.Uint64(v[24:])),
		Channel:  s[:cl],
		URL:      s[cl : cl+ul],
		Extra:    s[cl+ul:],
	}, nil
}

// AppendAuction appends a's encoding to dst and returns the extended slice.
func AppendAuction(dst []byte, a *Auction) []byte {
	for _, n := range [...]int64{a.ID, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category} {
		dst = le.AppendUint64(dst, uint64(n))
	}
	dst = le.AppendUint16(dst, uint16(len(a.ItemName)))
	dst = le.AppendUint16(dst, uint16(len(a.Description)))
	dst = append(dst, a.ItemName...)
	dst = append(dst, a.Description...)
	return append(dst, a.Extra...)
}

// DecodeAuction decodes a value AppendAuction made; like DecodeBid it keeps
// no reference to v and wraps ErrShortRecord for a value too short.
func DecodeAuction(v []byte) (Auction, error) {
	if len(v) < auctionFixed {
		return Auction{}, fmt.Errorf("%w: auction of %d bytes, want at least %d", ErrShortRecord, len(v), auctionFixed)
	}
	il, dl := int(le.Uint16(v[56:])), int(le.Uint16(v[58:]))
	if len(v) < auctionFixed+il+dl {
		return Auction{}, fmt.Errorf("%w: auction of %d bytes, its strings need %d", ErrShortRecord, len(v), auctionFixed+il+dl)
	}
	s := string(v[auctionFixed:])
	return Auction{
		ID:          int64(le.Uint64(v[0:])),
		InitialBid:  int64(le.Uint64(v[8:])),
		Reserve:     int64(le.Uint64(v[16:])),
		DateTime:    int64(le.Uint64(v[24:])),
		Expires:     int64(le.Uint64(v[32:])),
		Seller:      int64(le.Uint64(v[40:])),
		Category:    int64(le.Uint64(v[48:])),
		ItemName:    s[:il],
		Description: s[il : il+dl],
		Extra:       s[il+dl:],
	}, nil
}

// AppendPerson appends p's encoding to dst and returns the extended slice.
func AppendPerson(dst []byte, p *Person) []byte {
	dst = le.AppendUint64(dst, uint64(p.ID))
	dst = le.AppendUint64(dst, uint64(p.DateTime))
	strs := [...]string{p.Name, p.EmailAddress, p.CreditCard, p.City, p.State}
	for _, s := range strs {
		dst = le.AppendUint16(dst, uint16(len(s)))
	}
	for _, s := range strs {
		dst = append(dst, s...)
	}
	return append(dst, p.Extra...)
}

// DecodePerson decodes a value AppendPerson made; like DecodeBid it keeps
// no reference to v and wraps ErrShortRecord for a value too short.
func DecodePerson(v []byte) (Person, error) {
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
	s := string(v[personFixed:])
	return Person{
		ID:           int64(le.Uint64(v[0:])),
		DateTime:     int64(le.Uint64(v[8:])),
		Name:         s[:ends[0]],
		EmailAddress: s[ends[0]:ends[1]],
		CreditCard:   s[ends[1]:ends[2]],
		City:         s[ends[2]:ends[3]],
		State:        s[ends[3]:ends[4]],
		Extra:        s[ends[4]:],
	}, nil
}
