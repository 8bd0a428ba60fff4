package web

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRateRingGivesRecordsPerSecondOldestFirst ensures a rate is the rise
// of the high watermark over the time between two samples, that a fall
// counts as no appends, and that the ring keeps the newest rates, oldest
// first.
func TestRateRingGivesRecordsPerSecondOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	r := &rateRing{rates: make([]float64, 0, 3)}
	r.add(100, t0)
	assert.Empty(t, r.series(), "no rate before the second sample")
	r.add(110, t0.Add(time.Second))
	r.add(130, t0.Add(1500*time.Millisecond))
	assert.Equal(t, []float64{10, 40}, r.series())
	r.add(5, t0.Add(2500*time.Millisecond)) // truncated, or created again
	r.add(8, t0.Add(5500*time.Millisecond))
	assert.Equal(t, []float64{40, 0, 1}, r.series(), "the oldest dropped, oldest first")
	r.add(8, t0.Add(6500*time.Millisecond))
	assert.Equal(t, []float64{0, 1, 0}, r.series())
}

// TestRateHistoryForgetsDeletedPartitions ensures a partition a sample no
// longer holds loses its rates, unless its topic failed to read (its
// partitions were then not sampled, not deleted).
func TestRateHistoryForgetsDeletedPartitions(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	h := newRateHistory(10)
	snap := func(at time.Duration, next int64, topicErr string) *LogSnapshot {
		return &LogSnapshot{Time: t0.Add(at), Topics: []TopicFigures{
			{Topic: "a", Partitions: []PartitionFigures{{Partition: 0, NextOffset: next}}},
			{Topic: "b", Error: topicErr, Partitions: []PartitionFigures{}},
		}}
	}
	h.record(&LogSnapshot{Time: t0, Topics: []TopicFigures{
		{Topic: "a", Partitions: []PartitionFigures{{Partition: 0}}},
		{Topic: "b", Partitions: []PartitionFigures{{Partition: 0}}},
	}})
	h.record(snap(time.Second, 4, "damaged"))
	assert.Len(t, h.rings, 2, "b failed to read: its ring stays")
	h.record(snap(2*time.Second, 6, ""))
	assert.Len(t, h.rings, 1, "b has no partition 0 any more")
	s := snap(2*time.Second, 6, "")
	h.fill(s)
	assert.Equal(t, []float64{4, 2}, s.Topics[0].Partitions[0].Rates)
	assert.Equal(t, 2.0, s.Topics[0].Partitions[0].Rate)
}
