package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// sizeStore is a FileStore that records the largest state snapshot saved.
type sizeStore struct {
	*checkpoint.FileStore
	max atomic.Int64
}

func (s *sizeStore) SaveState(ctx context.Context, name string, state []byte) error {
	if n := int64(len(state)); n > s.max.Load() {
		s.max.Store(n)
	}
	return s.FileStore.SaveState(ctx, name, state)
}

// TestQ9JoinStateStaysWithinItsBound runs q9 over a replay, where the
// auctions (6% of its records, a quarter of its bytes) would be read far
// ahead of its bids: stream.JoinWindow aligns its inputs (an input more
// than the join's reach ahead of the other, which still has records to
// read, waits for it), so the join holds about 332 ms of each input (200
// auctions and 3,000 bids, a few hundred KB), not the lead of the faster
// reader (before the alignment: up to most of the auction topic, 120 MB
// snapshots at 5M events, 40% of q9's CPU).
func TestQ9JoinStateStaysWithinItsBound(t *testing.T) {
	dir := fixture(t)
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	fs, err := checkpoint.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &sizeStore{FileStore: fs}
	var auctionBytes int64
	for _, r := range readBack(t, dir, TopicAuction) {
		auctionBytes += int64(len(r.Value))
	}
	err = Q9(Inputs{Log: lg, Store: store}).
		To(sink.Func(func(context.Context, []WinningBid) error { return nil })).
		Checkpointing(store, stream.CheckpointInterval(5*time.Millisecond)).
		Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 332 ms of each input, at 10,000 events a second, is about 3,320
	// events: 200 auctions and 3,050 bids, some 400 KB. Allow 1 MB.
	if max := store.max.Load(); max > 1<<20 {
		t.Fatalf("the largest snapshot of q9's join was %d bytes (the whole auction topic is %d bytes); want at most 1 MiB, about 332 ms of each input", max, auctionBytes)
	}
}
