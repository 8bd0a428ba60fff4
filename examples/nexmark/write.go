package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/strom-dev/strom/log"
)

// The topics the events are written to, one per kind, one partition each
// (see the package doc for why).
const (
	TopicPerson  = "person"
	TopicAuction = "auction"
	TopicBid     = "bid"
)

// ErrNotEmpty is returned (wrapped, naming the directory and topic) by
// Generate for a log that already holds one of the Nexmark topics: appending
// a second stream would double every event.
var ErrNotEmpty = errors.New("nexmark: log already holds the Nexmark topics")

// Counts is how many events of each kind a stream holds.
type Counts struct {
	Persons, Auctions, Bids int64
}

// Total returns the number of events.
func (c Counts) Total() int64 { return c.Persons + c.Auctions + c.Bids }

// appendBatch is how many records of a topic Generate buffers before one
// Topic.AppendBatch.
const appendBatch = 2048

// Generate writes the first events events of cfg's stream into the log in
// dir (created if missing), into the topics TopicPerson, TopicAuction and
// TopicBid (created, one partition each), and closes it. Each record is keyed
// by the 8-byte big-endian id (a person's and an auction's own, a bid's
// auction), its Timestamp is the event time in ms and its Value the event's
// encoding (AppendBid, AppendAuction, AppendPerson). The appends return once
// the bytes are in the page cache: a reader opening the directory afterwards
// sees them all. It returns the counts written, or an error naming the
// directory and topic (ErrNotEmpty if a topic exists already).
func Generate(ctx context.Context, dir string, cfg Config, events int64) (Counts, error) {
	g, err := NewGenerator(cfg)
	if err != nil {
		return Counts{}, err
	}
	if events < 0 {
		return Counts{}, fmt.Errorf("nexmark: %d events is negative", events)
	}
	lg, err := log.Open(dir, log.CreateIfMissing())
	if err != nil {
		return Counts{}, fmt.Errorf("nexmark: open log: %w", err)
	}
	defer lg.Close()
	have, err := lg.Topics()
	if err != nil {
		return Counts{}, fmt.Errorf("nexmark: list topics of %s: %w", dir, err)
	}
	type out struct {
		topic *log.Topic
		recs  []log.Record
		arena []byte
	}
	var outs [3]out
	for i, name := range []string{TopicPerson, TopicAuction, TopicBid} {
		if slices.Contains(have, name) {
			return Counts{}, fmt.Errorf("%w: %s has topic %s (use an empty directory)", ErrNotEmpty, dir, name)
		}
		t, err := lg.CreateTopic(name, 1)
		if err != nil {
			return Counts{}, fmt.Errorf("nexmark: create topic %s in %s: %w", name, dir, err)
		}
		outs[i] = out{topic: t, recs: make([]log.Record, 0, appendBatch), arena: make([]byte, 0, appendBatch*128)}
	}
	flush := func(o *out) error {
		if len(o.recs) == 0 {
			return nil
		}
		if err := o.topic.AppendBatch(ctx, o.recs); err != nil {
			return fmt.Errorf("nexmark: append to topic %s in %s: %w", o.topic.Name(), dir, err)
		}
		o.recs, o.arena = o.recs[:0], o.arena[:0]
		return nil
	}
	var c Counts
	for range events {
		e := g.Next()
		var o *out
		var id int64
		switch e.Kind {
		case KindPerson:
			o, id = &outs[0], e.Person.ID
			c.Persons++
		case KindAuction:
			o, id = &outs[1], e.Auction.ID
			c.Auctions++
		default:
			o, id = &outs[2], e.Bid.Auction
			c.Bids++
		}
		// Key and value are cut from the topic's arena; a grown arena leaves
		// the earlier records pointing into the old array, which stays valid.
		start := len(o.arena)
		o.arena = binary.BigEndian.AppendUint64(o.arena, uint64(id))
		keyEnd := len(o.arena)
		switch e.Kind {
		case KindPerson:
			o.arena = AppendPerson(o.arena, &e.Person)
		case KindAuction:
			o.arena = AppendAuction(o.arena, &e.Auction)
		default:
			o.arena = AppendBid(o.arena, &e.Bid)
		}
		o.recs = append(o.recs, log.Record{
			Key:       o.arena[start:keyEnd:keyEnd],
			Value:     o.arena[keyEnd:len(o.arena):len(o.arena)],
			Timestamp: e.Time(),
		})
		if len(o.recs) == appendBatch {
			if err := flush(o); err != nil {
				return c, err
			}
		}
	}
	for i := range outs {
		if err := flush(&outs[i]); err != nil {
			return c, err
		}
	}
	if err := lg.Close(); err != nil {
		return c, fmt.Errorf("nexmark: close log %s: %w", dir, err)
	}
	return c, nil
}
