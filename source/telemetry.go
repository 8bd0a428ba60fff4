package source

import (
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// The sources that tell a pipeline the high watermark of what they read,
// for its metrics (strom.partition.high_watermark and strom.partition.lag,
// see package stream, "Metrics and traces").
var (
	_ stream.HighWatermarker = (*PartitionSource)(nil)
	_ stream.HighWatermarker = (*TopicSource)(nil)
)

// HighWatermark returns the high watermark (next offset) of the partition
// the source reads, once the first Read opened it; ok is false before, and
// for any other topic or partition. It is safe to call from any goroutine,
// also while Read runs; on a log opened read-only it looks for records the
// writing process appended (log.Partition.HighWatermark).
//
// With [ReadCommitted] it is the partition's committed end when that is
// lower (Kafka's last stable offset), read from the transaction file at
// each call: the end of what the source can read, so the pipeline's lag
// counts only committed records not yet read, as a read_committed Kafka
// consumer's does, and drops to 0 while a transaction is open or its
// writer is killed. A file that cannot be read leaves the high watermark.
func (s *PartitionSource) HighWatermark(topic string, partition int32) (hwm int64, ok bool) {
	p := s.opened.Load()
	if p == nil || topic != s.topic || partition != s.partition {
		return 0, false
	}
	hwm = p.HighWatermark()
	if s.cfg.readCommitted {
		if t, err := s.lg.Topic(s.topic); err == nil {
			hwm = lastStable(t, partition, hwm)
		}
	}
	return hwm, true
}

// lastStable returns the smaller of hwm and the committed end of
// partition of t, or hwm when t has no transaction file or it cannot be
// read.
func lastStable(t *log.Topic, partition int32, hwm int64) int64 {
	if end, found, err := committedEndOf(t.Dir(), t.Partitions(), partition); err == nil && found {
		return min(hwm, end)
	}
	return hwm
}

// HighWatermark returns the high watermark (next offset) of partition of
// the topic the source reads, once the first Read or Resume opened the
// topic; ok is false before, for another topic and for a partition the
// topic does not have. It is safe to call from any goroutine, also while
// Read runs. With [ReadCommitted] it is the committed end when lower, as
// [PartitionSource.HighWatermark] says.
func (s *TopicSource) HighWatermark(topic string, partition int32) (hwm int64, ok bool) {
	t := s.opened.Load()
	if t == nil || topic != s.topic {
		return 0, false
	}
	p, err := t.Partition(partition)
	if err != nil {
		return 0, false
	}
	hwm = p.HighWatermark()
	if s.cfg.part.readCommitted {
		hwm = lastStable(t, partition, hwm)
	}
	return hwm, true
}

var _ stream.HighWatermarker = (*KafkaSource)(nil)

// HighWatermark returns the high watermark of a partition assigned to this
// member: the highest that a fetch of it or a listing of its end offset
// reported. The source lists the end offsets of its assigned partitions at
// once after an assignment and then every [KafkaLagInterval], also while
// Read is not called (a back-pressured pipeline), so the value is at most
// about that far behind the brokers, and an empty partition reports
// (0, true) shortly after the assignment. ok is false for a partition not
// assigned to this member, and for an assigned one while neither a fetch
// nor a listing has answered. It is safe to call from any goroutine.
func (s *KafkaSource) HighWatermark(topic string, partition int32) (hwm int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.assigned[topicPartition{topic, partition}]
	if st == nil || st.hwm < 0 {
		return 0, false
	}
	return st.hwm, true
}
