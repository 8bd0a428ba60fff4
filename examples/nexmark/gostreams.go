package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/reugn/go-streams"
	"github.com/reugn/go-streams/extension"
	"github.com/reugn/go-streams/flow"

	"github.com/strom-dev/strom/log"
)

// goStreamsQueries are the queries go-streams (github.com/reugn/go-streams
// v0.13.0) runs beside strom's (--gostreams): q0, q1, q2 and q12, the
// windowed count. Each builds on a source of decoded bids (Bid values) a
// flow whose values are the query's results, every stage with parallelism
// 1 (go-streams' order-keeping setting), each stage a goroutine and the
// values moving between them one at a time through unbuffered channels,
// as go-streams runs them.
//
// go-streams' windows are processing-time windows that hold their
// elements ([]T out, on a ticker that starts with the flow): q12 maps each
// bid to its bidder before the window, so that the window holds 8 bytes a
// bid, and counts per bidder when it closes. Its event-time windows
// (SlidingWindow with an extractor) keep every element too, and it has no
// session or keyed event-time window, so q5, q7 and q11 are strom's alone.
var goStreamsQueries = map[string]func(streams.Source) streams.Flow{
	"q0": func(src streams.Source) streams.Flow { return src.Via(flow.NewPassThrough()) },
	"q1": func(src streams.Source) streams.Flow {
		return src.Via(flow.NewMap(func(b Bid) EuroBid {
			return EuroBid{Auction: b.Auction, Bidder: b.Bidder, Price: DollarToEuro * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra}
		}, 1))
	},
	"q2": func(src streams.Source) streams.Flow {
		return src.Via(flow.NewFilter(func(b Bid) bool { return b.Auction%Q2Modulus == 0 }, 1)).
			Via(flow.NewMap(func(b Bid) AuctionPrice { return AuctionPrice{Auction: b.Auction, Price: b.Price} }, 1))
	},
	"q12": func(src streams.Source) streams.Flow {
		return src.Via(flow.NewMap(func(b Bid) int64 { return b.Bidder }, 1)).
			Via(flow.NewTumblingWindow[int64](Q12Window)).
			Via(flow.NewFlatMap(func(bidders []int64) []BidderCount {
				end := time.Now().UnixMilli() // the window closes now
				counts := make(map[int64]int64)
				var rows []BidderCount
				for _, b := range bidders {
					if counts[b] == 0 {
						rows = append(rows, BidderCount{Bidder: b, Start: end - Q12Window.Milliseconds(), End: end})
					}
					counts[b]++
				}
				for i := range rows {
					rows[i].Bids = counts[rows[i].Bidder]
				}
				return rows
			}, 1))
	},
}

// funcSink is a go-streams Sink that hands every value to fn on one
// goroutine.
type funcSink struct {
	in   chan any
	done chan struct{}
}

func newFuncSink(fn func(any)) *funcSink {
	s := &funcSink{in: make(chan any), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for v := range s.in {
			fn(v)
		}
	}()
	return s
}

func (s *funcSink) In() chan<- any   { return s.in }
func (s *funcSink) AwaitCompletion() { <-s.done }

// runGoStreams runs go-streams' version of the query named name over the
// bids of the log in dir, opened read-only: a goroutine replays the bid
// topic's partition 0 (records of 1 MiB batches, with bytes of their own),
// decodes each bid and sends it into an extension.ChanSource; each result
// goes to emit (nil: counted only). It measures the run as RunQuery does:
// the topic opened before the clock starts, wall and process CPU time from
// the first read to the sink's last value. ok is false if go-streams has
// no version of the query. No positions are saved: go-streams has no
// acknowledgements.
func runGoStreams(ctx context.Context, name, dir string, emit func(any)) (r Result, ok bool, err error) {
	build, ok := goStreamsQueries[name]
	if !ok {
		return Result{}, false, nil
	}
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		return Result{}, true, fmt.Errorf("nexmark: %s (go-streams): open log: %w", name, err)
	}
	defer lg.Close()
	t, err := lg.Topic(TopicBid)
	if err != nil {
		return Result{}, true, fmt.Errorf("nexmark: %s (go-streams): topic %s in %s: %w", name, TopicBid, dir, err)
	}
	p, err := t.Partition(0)
	if err != nil {
		return Result{}, true, fmt.Errorf("nexmark: %s (go-streams): topic %s partition 0: %w", name, TopicBid, err)
	}
	var outputs int64
	snk := newFuncSink(func(v any) {
		outputs++
		if emit != nil {
			emit(v)
		}
	})
	runtime.GC()
	cpu0, wall0 := cpuTime(), time.Now()
	in := make(chan any)
	var readErr error
	var events int64
	go func() {
		defer close(in)
		rd := p.Replay(p.StartOffset())
		for {
			batch, err := rd.Next(ctx, 1<<20)
			for _, rec := range batch {
				b, err := DecodeBid(rec.Value)
				if err != nil {
					readErr = fmt.Errorf("topic %s partition 0 offset %d: %w", TopicBid, rec.Offset, err)
					return
				}
				events++
				select {
				case in <- b:
				case <-ctx.Done():
					readErr = ctx.Err()
					return
				}
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	build(extension.NewChanSource(in)).To(snk)
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	if readErr != nil { // the feeder closed in after setting it: To has returned since
		return Result{}, true, fmt.Errorf("nexmark: %s (go-streams): %w", name, readErr)
	}
	return Result{Query: name + "/go-streams", Events: events, Outputs: outputs, Wall: wall, CPU: cpu}, true, nil
}

// printGoStreamsTable prints, for each query go-streams ran beside strom,
// both runs' events per second (wall) and per core, and strom's over
// go-streams'.
func printGoStreamsTable(w io.Writer, pairs [][2]Result) {
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| query | strom events/s | go-streams events/s | strom / go-streams | strom per core | go-streams per core | strom / go-streams per core |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, p := range pairs {
		s, g := p[0], p[1]
		fmt.Fprintf(w, "| %s | %.0fk | %.0fk | %.1fx | %.0fk | %.0fk | %.1fx |\n", s.Query,
			s.EventsPerSec()/1e3, g.EventsPerSec()/1e3, s.EventsPerSec()/g.EventsPerSec(),
			s.PerCore()/1e3, g.PerCore()/1e3, s.PerCore()/g.PerCore())
	}
}
