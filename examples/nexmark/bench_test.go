package main

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodeBid measures what the encoding choice costs a query per
// bid: the binary encoding's DecodeBid beside encoding/json's Unmarshal of
// the same bids (the package doc's reason for the binary encoding).
func BenchmarkDecodeBid(b *testing.B) {
	var bids []Bid
	for _, e := range generate(b, Config{Seed: 1}, 5_000) {
		if e.Kind == KindBid {
			bids = append(bids, e.Bid)
		}
	}
	bin := make([][]byte, len(bids))
	js := make([][]byte, len(bids))
	for i := range bids {
		bin[i] = AppendBid(nil, &bids[i])
		var err error
		if js[i], err = json.Marshal(&bids[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := DecodeBid(bin[i%len(bin)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			var v Bid
			if err := json.Unmarshal(js[i%len(js)], &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
