package source

import "github.com/strom-dev/strom/stream"

// The sources that tell a pipeline whether a partition has records left to
// read, for stream.Idleness: a silent partition counts as idle only once it
// is caught up, so a slow or blocked one does not make its own records
// late. (A Kafka source is a consumer-group member, whose partitions each
// have a watermark of their own: Idleness does not apply to it.)
var (
	_ stream.CaughtUpReporter = (*PartitionSource)(nil)
	_ stream.CaughtUpReporter = (*TopicSource)(nil)
)

// CaughtUp reports whether the partition the source reads has no record
// below its high watermark at or above next, the lowest offset the
// pipeline has not finished (see stream.CaughtUpReporter): next is at the
// high watermark, or, with next -1 (the pipeline finished none), Read has
// returned no record and the source started at the high watermark. The
// offsets of a log partition are dense, so nothing else lies between. A
// [Replay] counts up to where it ends, not what was appended since. ok
// is false before the first Read opened the partition, and for any other
// topic or partition. Under [ReadCommitted] records past the committed
// end count as left to read: they will come once committed. It is safe to
// call from any goroutine, also while Read runs.
func (s *PartitionSource) CaughtUp(topic string, partition int32, next int64) (caughtUp, ok bool) {
	p := s.opened.Load()
	if p == nil || topic != s.topic || partition != s.partition {
		return false, false
	}
	// A high watermark only grows, so a replay's end (taken at or below
	// the high watermark after it opened) is its high watermark for good,
	// and a followed partition's is asked again only once next reaches
	// the greatest one seen: on a log opened read-only HighWatermark
	// looks at the folder (a stat, maybe an open), and a windowed join
	// asks at every push (Nexmark q8 spent 41% of its CPU time here).
	hwm := s.replayEnd.Load() // a replay reads nothing appended after it opened
	if hwm < 0 {
		hwm = s.hwmSeen.Load()
		if next < 0 || next >= hwm {
			hwm = max(hwm, p.HighWatermark())
			s.hwmSeen.Store(hwm)
		}
	}
	if next >= 0 {
		return next >= hwm, true
	}
	return !s.returned.Load() && s.openedAt.Load() >= hwm, true
}

// CaughtUp reports whether partition of the topic the source reads has no
// record below its high watermark at or above next, as
// [PartitionSource.CaughtUp] does; with next -1 a partition whose records
// were read ahead, though not yet returned by Read, is not caught up. ok is
// false before the partition opened, for another topic and for a partition
// the source does not read. It is safe to call from any goroutine, also
// while Read runs.
func (s *TopicSource) CaughtUp(topic string, partition int32, next int64) (caughtUp, ok bool) {
	parts := s.view.Load()
	if parts == nil || topic != s.topic {
		return false, false
	}
	for _, p := range *parts {
		if p.src.partition == partition {
			return p.src.CaughtUp(topic, partition, next)
		}
	}
	return false, false
}
