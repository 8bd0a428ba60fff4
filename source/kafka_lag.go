package source

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaLagInterval is how often an open [KafkaSource] lists the end
// offsets of its assigned partitions, to keep their high watermarks, and
// with them the pipeline's lag gauge, current while Read is not called
// (a back-pressured pipeline): 1 s. One ListOffsets request per topic
// leader per interval; none while nothing is assigned. So a record
// produced shows in the lag within about 1 s plus one listing's round
// trip.
const KafkaLagInterval = time.Second

// startRefreshLocked starts refreshHighWatermarks on adm, stopped by
// Close. s.mu is held.
func (s *KafkaSource) startRefreshLocked(adm *kgo.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopLag = cancel
	s.listing.Add(1)
	go s.refreshHighWatermarks(ctx, adm)
}

// refreshHighWatermarks lists the end offsets of the assigned partitions
// every KafkaLagInterval, and at once when an assignment asks for it
// (lagWake), until ctx ends. Fetches say the high watermark only when
// Read polls them, and kgo hands out no fetch of a partition without new
// records: without this the high watermark of a partition would freeze
// while the pipeline is back-pressured, and stay unknown for an empty one
// or one the group has read to its end.
func (s *KafkaSource) refreshHighWatermarks(ctx context.Context, adm *kgo.Client) {
	defer s.listing.Done()
	tick := time.NewTicker(KafkaLagInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.lagWake:
		}
		s.listHighWatermarks(ctx, adm)
	}
}

// listHighWatermarks lists the end offsets (ListOffsets, latest) of the
// partitions assigned now, within the timeout, and raises each one's high
// watermark to it: a listing never moves one back, below what a fetch
// answered since it was sent. A failed listing changes nothing; the next
// one tries again.
func (s *KafkaSource) listHighWatermarks(ctx context.Context, adm *kgo.Client) {
	s.mu.Lock()
	parts := make(map[topicPartition]*kafkaPart, len(s.assigned))
	var topics []string
	for tp, st := range s.assigned {
		parts[tp] = st
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
	}
	s.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	listed, err := kadm.NewClient(adm).ListEndOffsets(ctx, topics...)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, st := range parts {
		o, ok := listed.Lookup(tp.topic, tp.partition)
		// Only for the same assignment (not revoked and assigned again
		// since).
		if ok && o.Err == nil && s.assigned[tp] == st && o.Offset > st.hwm {
			st.hwm = o.Offset
		}
	}
}
