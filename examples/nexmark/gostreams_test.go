package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// goStreamsValues runs go-streams' version of query name over the log in
// dir and returns its values, which must be Ts.
func goStreamsValues[T any](t *testing.T, name, dir string) []T {
	t.Helper()
	var got []T
	bad := 0
	r, ok, err := runGoStreams(context.Background(), name, dir, func(v any) {
		if tv, ok := v.(T); ok {
			got = append(got, tv)
		} else {
			bad++
		}
	})
	if err != nil || !ok {
		t.Fatalf("%s (go-streams): %v (has a version: %v)", name, err, ok)
	}
	if bad > 0 || r.Outputs != int64(len(got)) || r.Events != testEvents*46/50 {
		t.Fatalf("%s (go-streams): %d values of another type; %d outputs counted for %d values; %d events read, want the %d bids", name, bad, r.Outputs, len(got), r.Events, testEvents*46/50)
	}
	return got
}

// TestGoStreamsQueriesEqualStrom ensures go-streams' q0, q1 and q2, the
// comparison's other side, emit strom's values in strom's order over the
// same log, and its q12 counts every bid of a bidder once: the two run
// the same queries.
func TestGoStreamsQueriesEqualStrom(t *testing.T) {
	dir := fixture(t)
	equal(t, goStreamsValues[Bid](t, "q0", dir), runQuery(t, dir, Q0))
	equal(t, goStreamsValues[EuroBid](t, "q1", dir), runQuery(t, dir, Q1))
	equal(t, goStreamsValues[AuctionPrice](t, "q2", dir), runQuery(t, dir, Q2))
	want := map[int64]int64{}
	for _, b := range bidsFromLog(t, dir) {
		want[b.Bidder]++
	}
	got := map[int64]int64{}
	for _, r := range goStreamsValues[BidderCount](t, "q12", dir) {
		got[r.Bidder] += r.Bids
	}
	if len(got) != len(want) {
		t.Fatalf("go-streams' q12 counted %d bidders, the bids have %d", len(got), len(want))
	}
	for b, n := range want {
		if got[b] != n {
			t.Fatalf("bidder %d: go-streams' q12 counts %d bids, the log holds %d", b, got[b], n)
		}
	}
	if _, ok, _ := runGoStreams(context.Background(), "q5", dir, nil); ok {
		t.Error("go-streams claims a version of q5")
	}
}

// TestCommandRunsGoStreamsBesideStrom ensures --gostreams runs go-streams'
// version of a query after strom's, over the same events, and --table
// prints the two side by side.
func TestCommandRunsGoStreamsBesideStrom(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"--query", "q2,q7,q12", "--events", "5000", "--dir", filepath.Join(t.TempDir(), "log"), "--gostreams", "--table"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"q2/go-streams events=4600 ", "q12/go-streams events=4600 ", "| q2 | ", "| strom events/s | go-streams events/s |"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "q7/go-streams") {
		t.Errorf("a go-streams run of q7, which it has no version of:\n%s", s)
	}
}
