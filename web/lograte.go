package web

import (
	"math"
	"sync"
	"time"
)

// partitionKey names a partition of the log.
type partitionKey struct {
	topic     string
	partition int32
}

// rateRing is one partition's append rates, the last cap(rates) of them,
// and the sample the next rate is measured from.
type rateRing struct {
	lastNext int64     // the high watermark at the last sample
	lastAt   time.Time // when it was taken
	rates    []float64 // a ring of records per second, its oldest at head once full
	head     int
	seen     uint64 // the sampler's round that last saw the partition
}

// add takes a sample: the high watermark next at time at. From the second
// sample on it records the rate since the previous one; a high watermark
// that fell (the partition was truncated, or deleted and created again)
// counts as no appends.
func (r *rateRing) add(next int64, at time.Time) {
	if !r.lastAt.IsZero() {
		rate := 0.0
		if dt := at.Sub(r.lastAt).Seconds(); dt > 0 && next > r.lastNext {
			rate = float64(next-r.lastNext) / dt
		}
		rate = math.Round(rate*100) / 100 // two decimals: shorter JSON, nothing lost to a sparkline
		if len(r.rates) < cap(r.rates) {
			r.rates = append(r.rates, rate)
		} else {
			r.rates[r.head] = rate
			r.head = (r.head + 1) % len(r.rates)
		}
	}
	r.lastNext, r.lastAt = next, at
}

// series returns a copy of the rates, oldest first.
func (r *rateRing) series() []float64 {
	out := make([]float64, 0, len(r.rates))
	out = append(out, r.rates[r.head:]...)
	return append(out, r.rates[:r.head]...)
}

// rateHistory keeps a rateRing per partition. It is safe for concurrent
// use: the sampler records, any request reads.
type rateHistory struct {
	history int // rates kept per partition

	mu    sync.Mutex
	rings map[partitionKey]*rateRing
	round uint64 // counts record calls
}

// newRateHistory returns an empty history keeping history rates per
// partition.
func newRateHistory(history int) *rateHistory {
	return &rateHistory{history: history, rings: make(map[partitionKey]*rateRing)}
}

// record takes a sample of every partition of snap, a snapshot of the
// whole log, and forgets the partitions it no longer holds (a topic
// deleted).
func (h *rateHistory) record(snap *LogSnapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.round++
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			k := partitionKey{t.Topic, p.Partition}
			r := h.rings[k]
			if r == nil {
				r = &rateRing{rates: make([]float64, 0, h.history)}
				h.rings[k] = r
			}
			r.add(p.NextOffset, snap.Time)
			r.seen = h.round
		}
	}
	for k, r := range h.rings {
		if r.seen != h.round && !snapHasTopicError(snap, k.topic) {
			delete(h.rings, k)
		}
	}
}

// snapHasTopicError reports whether snap lists topic with an error: its
// partitions past the error were not read, and their rates are kept.
func snapHasTopicError(snap *LogSnapshot, topic string) bool {
	for _, t := range snap.Topics {
		if t.Topic == topic {
			return t.Error != ""
		}
	}
	return false
}

// fill sets the Rate and Rates of every partition of snap from the history.
func (h *rateHistory) fill(snap *LogSnapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range snap.Topics {
		t := &snap.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if r := h.rings[partitionKey{t.Topic, p.Partition}]; r != nil {
				p.Rates = r.series()
				if len(p.Rates) > 0 {
					p.Rate = p.Rates[len(p.Rates)-1]
				}
			}
		}
	}
}
