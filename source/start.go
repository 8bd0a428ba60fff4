package source

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
)

// startKind says how a [Start] picks the first offset.
type startKind uint8

const (
	startEarliest startKind = iota // the log start offset; the zero value
	startLatest                    // the high watermark
	startAt                        // a fixed offset
	startStore                     // a checkpoint store's position, else the log start offset
	startSaved                     // a position loaded from a store: offset and epoch
)

// Start says where a source begins reading when it opens. Build one with
// [Earliest], [Latest], [At] or [FromStore]; the zero value is [Earliest].
//
// A Start is resolved when the source opens (on its first Read), not when it
// is built: Earliest and Latest mean the log start offset and the high
// watermark at that moment.
type Start struct {
	kind    startKind
	offset  int64              // for startAt and startSaved
	epoch   int32              // for startSaved
	topicID checkpoint.TopicID // for startSaved
	store   checkpoint.Store   // for startStore
}

// saved is the Start of a position loaded from a store.
func saved(p checkpoint.Position) Start {
	return Start{kind: startSaved, offset: p.Offset, epoch: p.Epoch, topicID: p.TopicID}
}

// position is the saved position of a Start of kind startSaved.
func (s Start) position() checkpoint.Position {
	return checkpoint.Position{Offset: s.offset, Epoch: s.epoch, TopicID: s.topicID}
}

// Earliest starts at the partition's log start offset, the lowest offset still
// stored (0 until retention drops a segment). Kafka calls it
// auto.offset.reset=earliest.
var Earliest = Start{kind: startEarliest}

// Latest starts at the partition's high watermark as it is when the source
// opens, so only records appended afterwards are read. With [Replay] a source
// that starts at Latest ends at once with io.EOF.
var Latest = Start{kind: startLatest}

// At starts at the given offset. The offset should lie in
// [log start offset, high watermark] when the source opens (the high
// watermark itself is allowed: reading begins with the next record
// appended). An offset below the log start offset (retention deleted it) is
// handled by the [OnOutOfRange] policy, by default a reported move to the
// log start offset; an offset above the high watermark, or a negative one,
// makes Read return an error wrapping log.ErrOffsetOutOfRange.
func At(offset int64) Start { return Start{kind: startAt, offset: offset} }

// FromStore starts at the position saved in store for the source's topic and
// partition (the next offset to read), or at [Earliest] when the store has
// none. A store that fails to load, for example with checkpoint.ErrCorrupt,
// makes Read (or Resume) return that error, wrapped: a broken checkpoint never
// silently restarts from the beginning. The saved position goes through
// log.Partition.ResumeOffset: when a later epoch began below it (a crash
// recovery or truncation reused offsets the consumer had passed), the source
// starts where that epoch began, so the new records are handled, not
// skipped. A position below the log start offset (retention deleted it while
// the consumer was away) is handled by the [OnOutOfRange] policy, by default
// a reported move to the log start offset; a position above the high
// watermark is always an error wrapping log.ErrOffsetOutOfRange, never a
// jump. A position saved against another incarnation of the topic (its
// topic ID is not the topic's: the topic was deleted and created again, and
// its offsets count other records) is not trusted at all: the
// [OnOutOfRange] policy applies to it too, by default a reported move to
// the log start offset, or a [*TopicRecreatedError] with [ResetError]. A
// position without a topic ID (saved before topic IDs), or a topic without
// one (created before them, and not yet written since), is trusted as it
// is. A nil store is [ErrNilStore].
func FromStore(store checkpoint.Store) Start { return Start{kind: startStore, store: store} }

// String describes the start: "earliest", "latest", "offset N" or "store".
func (s Start) String() string {
	switch s.kind {
	case startLatest:
		return "latest"
	case startAt:
		return fmt.Sprintf("offset %d", s.offset)
	case startStore:
		return "store"
	case startSaved:
		return "saved " + s.position().String()
	default:
		return "earliest"
	}
}

// resolve turns s into an offset of p, which belongs to topic/partition of
// topic ID id. The error is not yet wrapped with the coordinates.
func (s Start) resolve(ctx context.Context, p *log.Partition, id log.TopicID, topic string, partition int32) (int64, error) {
	switch s.kind {
	case startLatest:
		return p.HighWatermark(), nil
	case startAt:
		return checkOffset(p, topic, partition, s.offset)
	case startStore:
		if s.store == nil {
			return 0, ErrNilStore
		}
		pos, found, err := s.store.Load(ctx, topic, partition)
		if err != nil {
			return 0, fmt.Errorf("loading checkpoint: %w", err)
		}
		if !found {
			return p.StartOffset(), nil
		}
		return resumeSaved(p, id, topic, partition, pos)
	case startSaved:
		return resumeSaved(p, id, topic, partition, s.position())
	default:
		return p.StartOffset(), nil
	}
}

// checkOffset returns offset if it lies in [p.StartOffset(), p.HighWatermark()],
// else the log's out-of-range error.
func checkOffset(p *log.Partition, topic string, partition int32, offset int64) (int64, error) {
	start, next := p.StartOffset(), p.HighWatermark()
	if offset < start || offset > next {
		return 0, &log.OffsetOutOfRangeError{
			Topic:       topic,
			Partition:   partition,
			Offset:      offset,
			StartOffset: start,
			NextOffset:  next,
		}
	}
	return offset, nil
}

// resumeSaved returns where to resume p, of topic ID id, from pos: a
// *TopicRecreatedError when pos was saved against another topic ID,
// otherwise p.ResumeOffset of it (see FromStore). A zero ID on either side
// is unknown, and pos is then trusted.
func resumeSaved(p *log.Partition, id log.TopicID, topic string, partition int32, pos checkpoint.Position) (int64, error) {
	if !pos.TopicID.IsZero() && !id.IsZero() && pos.TopicID != id {
		return 0, &TopicRecreatedError{Topic: topic, Partition: partition, Position: pos, TopicID: id,
			StartOffset: p.StartOffset(), NextOffset: p.HighWatermark()}
	}
	return p.ResumeOffset(pos.Offset, pos.Epoch)
}
