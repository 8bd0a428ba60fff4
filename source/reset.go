package source

import (
	"errors"
	"fmt"

	"github.com/strom-dev/strom/log"
)

// ResetPolicy says what a [PartitionSource] does when the position it is
// to read from is below the partition's log start offset: retention deleted
// those records (see the log package doc, "Retention") while the consumer
// was behind or away. It is Kafka's auto.offset.reset; set it with
// [OnOutOfRange]. The zero value is [ResetEarliest].
//
// It applies as well to a position saved against another incarnation of
// the topic (its topic ID is not the topic's, see [ErrTopicRecreated]): the
// topic was deleted and created again, and the saved offset counts records
// of the old one, so it is no position in the new one at all.
//
// A position above the high watermark is never reset, whatever the policy:
// it means the log lost records the consumer had already passed (a
// truncation, or a checkpoint of another log), and jumping would skip or
// repeat records silently, so Read fails with an error wrapping
// log.ErrOffsetOutOfRange. A negative position is never reset either.
type ResetPolicy uint8

const (
	// ResetEarliest continues at the log start offset: the oldest records
	// still stored. Nothing still stored is skipped. The default.
	ResetEarliest ResetPolicy = iota
	// ResetLatest continues at the high watermark: only records appended
	// from then on are read, the stored backlog is skipped too.
	ResetLatest
	// ResetError resets nothing: Read fails with a [*PartitionError]
	// wrapping the *log.OffsetOutOfRangeError (whose StartOffset says where
	// the log now starts), and keeps failing until the source is moved, for
	// example by a checkpoint saved elsewhere and [PartitionSource.Resume].
	// Kafka calls it auto.offset.reset=none. For a position of a topic
	// created again it wraps a [*TopicRecreatedError] naming both topic
	// IDs, marked stream.Permanent.
	ResetError
)

// String returns "earliest", "latest" or "error".
func (p ResetPolicy) String() string {
	switch p {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	case ResetError:
		return "error"
	}
	return fmt.Sprintf("ResetPolicy(%d)", uint8(p))
}

// OnOutOfRange sets what the source does when its position is below the
// partition's log start offset (see [ResetPolicy]), overriding the default,
// [ResetEarliest]. It applies wherever the position comes from: the start
// ([At], [FromStore]), a store read by Resume, or the reader itself falling
// behind retention while it runs. Every reset is counted
// ([PartitionSource.Resets]) and handed to the [OnReset] hook.
func OnOutOfRange(p ResetPolicy) Option {
	return sharedOption(func(c *partitionConfig) { c.reset = p })
}

// OnReset sets fn to be called each time the source moves its position
// because of its [ResetPolicy]. A [PartitionSource] calls it on the goroutine
// calling Read; a [TopicSource] calls it on the goroutine reading the
// partition, one call at a time across partitions. fn must not block; by
// default there is none, and resets are only counted.
func OnReset(fn func(Reset)) Option {
	return sharedOption(func(c *partitionConfig) { c.onReset = fn })
}

// Reset describes one move of a source's position by its [ResetPolicy].
type Reset struct {
	Topic       string      // topic the source reads
	Partition   int32       // partition the source reads
	Policy      ResetPolicy // ResetEarliest or ResetLatest
	From        int64       // the position that was no longer stored
	To          int64       // the position reading continues at
	StartOffset int64       // the partition's log start offset at the time
	NextOffset  int64       // the partition's high watermark at the time
	// Recreated is set for the reset of a position saved against another
	// incarnation of the topic (deleted and created again; it names both
	// topic IDs), whose From counts records of the old topic; nil for a
	// position below the log start offset.
	Recreated *TopicRecreatedError
}

// Skipped returns how many offsets the reset passed over without reading
// them: those retention deleted, and with ResetLatest also the stored
// backlog. For a reset of a topic created again (Recreated), whose From
// counts records of the old topic, it is the records of the new topic
// passed over: 0 with ResetEarliest, the stored backlog with ResetLatest.
func (r Reset) Skipped() int64 {
	if r.Recreated != nil {
		return r.To - r.StartOffset
	}
	return r.To - r.From
}

// Resets returns how many times the source moved its position because of
// its [ResetPolicy] since it was built. It is safe to call from any
// goroutine.
func (s *PartitionSource) Resets() int64 { return s.resets.Load() }

// resetOnOutOfRange decides, for an error from resolving the start or from
// the reader, whether the policy moves the position: only for a
// non-negative position below the log start offset, or a position of a
// topic created again (a *TopicRecreatedError), and not with ResetError.
// It counts and reports the move and returns the new position.
func (s *PartitionSource) resetOnOutOfRange(err error) (int64, bool) {
	if err == nil {
		return 0, false
	}
	var r Reset
	var oor *log.OffsetOutOfRangeError
	var rec *TopicRecreatedError
	switch {
	case errors.As(err, &rec):
		r = Reset{From: rec.Position.Offset, StartOffset: rec.StartOffset, NextOffset: rec.NextOffset, Recreated: rec}
	case errors.As(err, &oor) && oor.Offset >= 0 && oor.Offset < oor.StartOffset:
		r = Reset{From: oor.Offset, StartOffset: oor.StartOffset, NextOffset: oor.NextOffset}
	default:
		return 0, false
	}
	r.Topic, r.Partition, r.Policy = s.topic, s.partition, s.cfg.reset
	switch s.cfg.reset {
	case ResetEarliest:
		r.To = r.StartOffset
	case ResetLatest:
		r.To = r.NextOffset
	default:
		return 0, false
	}
	s.resets.Add(1)
	if s.cfg.onReset != nil {
		s.cfg.onReset(r)
	}
	return r.To, true
}
