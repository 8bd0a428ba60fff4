package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// testEvents is the size of the stream the query tests run over.
const testEvents = 100_000

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

// fixture returns a log directory holding the first testEvents events of
// seed 42's stream, generated once for the package's tests.
func fixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		fixtureDir = filepath.Join(tmpRoot, "fixture")
		_, fixtureErr = Generate(context.Background(), fixtureDir, Config{Seed: 42}, testEvents)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureDir
}

// readBack reads every record of a topic of the log in dir with a plain
// log reader: no pipeline.
func readBack(t *testing.T, dir, topic string) []log.Record {
	t.Helper()
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	tp, err := lg.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tp.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Replay(0)
	var recs []log.Record
	for {
		batch, err := r.Next(context.Background(), 1<<20)
		recs = append(recs, batch...)
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// bidsFromLog returns the bids of the log in dir, read back and decoded
// without a pipeline: the plain-Go queries' input.
func bidsFromLog(t *testing.T, dir string) []Bid {
	t.Helper()
	var bids []Bid
	for _, r := range readBack(t, dir, TopicBid) {
		b, err := DecodeBid(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		bids = append(bids, b)
	}
	return bids
}

// runQuery runs a query's pipeline over the log in dir, read-only, with a
// FileStore checkpointing every 200 ms, and collects its output.
func runQuery[T any](t *testing.T, dir string, build func(Inputs) *stream.Stream[T]) []T {
	t.Helper()
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	store, err := checkpoint.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []T
	err = build(Inputs{Log: lg, Store: store}).
		To(sink.Func(func(_ context.Context, vs []T) error { got = append(got, vs...); return nil })).
		Checkpointing(store).
		Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// equal reports the first difference between got and want.
func equal[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the plain-Go query has no output: the test checks nothing")
	}
	if len(got) != len(want) {
		t.Fatalf("the query emitted %d values, the plain-Go query %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: the query emitted %+v, the plain-Go query %+v", i, got[i], want[i])
		}
	}
}

// TestLogHoldsTheGeneratedEvents ensures Generate writes every event of the
// stream, in order, to its kind's topic, keyed by its id (a bid by its
// auction) and stamped with its event time.
func TestLogHoldsTheGeneratedEvents(t *testing.T) {
	dir := fixture(t)
	recs := map[Kind][]log.Record{
		KindPerson:  readBack(t, dir, TopicPerson),
		KindAuction: readBack(t, dir, TopicAuction),
		KindBid:     readBack(t, dir, TopicBid),
	}
	next := map[Kind]int{}
	for _, e := range generate(t, Config{Seed: 42}, testEvents) {
		i := next[e.Kind]
		next[e.Kind]++
		if i >= len(recs[e.Kind]) {
			t.Fatalf("event %d: topic of %ss has only %d records", e.Number, e.Kind, len(recs[e.Kind]))
		}
		r := recs[e.Kind][i]
		got := Event{Number: e.Number, Kind: e.Kind}
		var err error
		var id int64
		switch e.Kind {
		case KindPerson:
			got.Person, err = DecodePerson(r.Value)
			id = e.Person.ID
		case KindAuction:
			got.Auction, err = DecodeAuction(r.Value)
			id = e.Auction.ID
		default:
			got.Bid, err = DecodeBid(r.Value)
			id = e.Bid.Auction
		}
		if err != nil || got != e {
			t.Fatalf("event %d: record %d of %ss decodes to %+v, %v; want %+v", e.Number, i, e.Kind, got, err, e)
		}
		if k := binary.BigEndian.AppendUint64(nil, uint64(id)); !bytes.Equal(r.Key, k) || r.Timestamp != e.Time() {
			t.Fatalf("event %d: key %x timestamp %d, want %x, %d", e.Number, r.Key, r.Timestamp, k, e.Time())
		}
	}
	for k, rs := range recs {
		if next[k] != len(rs) {
			t.Errorf("topic of %ss holds %d records, the stream %d", k, len(rs), next[k])
		}
	}
}

// TestGenerateRefusesALogWithTheTopics ensures a second Generate into the
// same directory fails instead of doubling the stream.
func TestGenerateRefusesALogWithTheTopics(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), dir, Config{}, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(context.Background(), dir, Config{}, 100); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second Generate = %v, want ErrNotEmpty", err)
	}
}

// TestQ0EqualsPlainGo ensures q0 emits every bid of the log, in order.
func TestQ0EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	var want []Bid
	want = append(want, bidsFromLog(t, dir)...)
	equal(t, runQuery(t, dir, Q0), want)
}

// TestQ1EqualsPlainGo ensures q1 emits every bid with its price times
// 0.908, in order.
func TestQ1EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	var want []EuroBid
	for _, b := range bidsFromLog(t, dir) {
		want = append(want, EuroBid{Auction: b.Auction, Bidder: b.Bidder, Price: 0.908 * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra})
	}
	equal(t, runQuery(t, dir, Q1), want)
}

// TestQ2EqualsPlainGo ensures q2 emits the auction and price of exactly
// the bids on auctions whose id is a multiple of 123, in order.
func TestQ2EqualsPlainGo(t *testing.T) {
	dir := fixture(t)
	var want []AuctionPrice
	perAuction := map[int64]int{}
	for _, b := range bidsFromLog(t, dir) {
		if b.Auction%123 == 0 {
			want = append(want, AuctionPrice{Auction: b.Auction, Price: b.Price})
			perAuction[b.Auction]++
		}
	}
	if len(perAuction) < 10 {
		t.Fatalf("only %d auctions are selected: the stream is too short to test q2", len(perAuction))
	}
	equal(t, runQuery(t, dir, Q2), want)
}

// TestCommandPrintsOneLinePerQuery ensures the command generates, runs each
// query and prints its line and the table, with the events it read.
func TestCommandPrintsOneLinePerQuery(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	outFile := filepath.Join(t.TempDir(), "out")
	err := run([]string{"--query", "all", "--events", "5000", "--dir", filepath.Join(dir, "log"), "--out", outFile, "--table"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	perTopic := map[string]int{TopicPerson: 100, TopicAuction: 300, TopicBid: 4600} // of 5,000 events
	for i, q := range queries {
		events := 0
		for _, tp := range q.Topics {
			events += perTopic[tp]
		}
		if want := fmt.Sprintf("%s events=%d ", q.Name, events); !strings.HasPrefix(lines[i], want) || !strings.Contains(lines[i], "events/s/core=") {
			t.Errorf("line %d = %q, want %s's with events=%d (the records of its topics %v of 5,000 events)", i, lines[i], q.Name, events, q.Topics)
		}
	}
	for _, q := range queries {
		b, err := os.ReadFile(outFile + "." + q.Name)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); (q.Name == "q0" || q.Name == "q1") && n != 4600 {
			t.Errorf("%s.%s holds %d lines, want 4600", outFile, q.Name, n)
		}
	}
	if !strings.Contains(out.String(), "| q2 | 4600 |") {
		t.Errorf("no table row for q2 in\n%s", out.String())
	}
	// A query named twice runs twice over the whole stream, each from a
	// store of its own.
	out.Reset()
	err = run([]string{"--query", "q0,q0", "--events", "5000", "--dir", filepath.Join(dir, "log2")}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "q0 events=4600 outputs=4600 "); n != 2 {
		t.Errorf("--query q0,q0 printed %d lines with outputs=4600, want 2:\n%s", n, out.String())
	}
	if err := run([]string{"--query", "q99"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "q99") {
		t.Errorf("--query q99 = %v, want an error naming it", err)
	}
}

// TestRunQueryRefusesAUsedStore ensures a run never starts from a position
// an earlier run saved, which would read fewer events than it reports.
func TestRunQueryRefusesAUsedStore(t *testing.T) {
	dir, state := fixture(t), t.TempDir()
	q, _ := lookup("q2")
	r, err := RunQuery(context.Background(), q, dir, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Events != testEvents*46/50 {
		t.Errorf("q2 read %d events, want the %d bids", r.Events, testEvents*46/50)
	}
	if _, err := RunQuery(context.Background(), q, dir, state, nil); err == nil || !strings.Contains(err.Error(), "must be new") {
		t.Fatalf("second RunQuery on one store = %v, want an error saying it must be new", err)
	}
}
