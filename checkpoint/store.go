package checkpoint

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/internal/topicid"
	"github.com/strom-dev/strom/internal/topicname"
)

// NoEpoch is the Epoch of a Position whose epoch is unknown: saved by a
// source without epochs (a slice; lines of a file whose source keeps no file
// identities), or by hand.
const NoEpoch int32 = -1

// TopicID is a topic's identity, the same type as log.TopicID: Kafka's
// topic ID (KIP-516), 16 random bytes drawn when the topic is created,
// written as 22 characters of unpadded URL-safe base64 (String; parse with
// ParseTopicID). The zero TopicID (IsZero) means unknown.
type TopicID = topicid.ID

// ParseTopicID parses the text of a TopicID (what its String returns; ""
// is the zero ID). Other text is an error quoting it.
func ParseTopicID(s string) (TopicID, error) { return topicid.Parse(s) }

// Position is what a checkpoint stores for one topic-partition: where the
// consumer reads next, the epoch of the last record it handled, and the
// identity of the topic the offset counts records of. The first two are
// Kafka's (offset, leader epoch) of KIP-320: a source resuming from it
// asks the log where that epoch ended, and resumes there when the epoch
// ended below Offset (the records it had "passed" were cut by a crash
// recovery and the offsets reused), so no record is skipped. The topic ID
// tells a position of a topic deleted and created again under the same
// name, whose offsets count other records, from one of the topic as it is
// (see source.ErrTopicRecreated).
//
// Its JSON form (a pipeline's live page, stream.Snapshot) is
// {"offset": 42, "epoch": 3, "topicId": "ZtbcOJ8_SA-ji9PcQpfNBw"}, the
// topic ID left out when zero.
type Position struct {
	// Offset is the next offset to read: one past the last record handled,
	// never the last record handled itself.
	Offset int64 `json:"offset"`
	// Epoch is the log epoch (log.Record.Epoch) of the last record handled,
	// or NoEpoch. A source of file lines (source.Lines) puts the generation
	// of the file there instead, which names the file identity the offset
	// counts lines of.
	Epoch int32 `json:"epoch"`
	// TopicID is the identity of the topic the position was read from
	// (log.Topic.ID), set by the pipeline from its source; the zero ID
	// when unknown (a position saved before topic IDs, by a source of
	// another kind, or by hand), and then the position is trusted as it
	// is.
	TopicID TopicID `json:"topicId,omitzero"`
}

// At returns the Position of offset with no epoch.
func At(offset int64) Position { return Position{Offset: offset, Epoch: NoEpoch} }

// String formats p as "offset 42 (epoch 3)" or "offset 42", followed by
// " of topic ID ZtbcOJ8_SA-ji9PcQpfNBw" when p has a topic ID.
func (p Position) String() string {
	s := fmt.Sprintf("offset %d", p.Offset)
	if p.Epoch >= 0 {
		s = fmt.Sprintf("offset %d (epoch %d)", p.Offset, p.Epoch)
	}
	if !p.TopicID.IsZero() {
		s += " of topic ID " + p.TopicID.String()
	}
	return s
}

// Store keeps a consumer's position (the NEXT offset to read, with the
// epoch of the last record handled) per topic-partition.
//
// Implementations must be safe for concurrent use. A Save that returns nil
// must be visible to every later Load; whether it also survives a crash is the
// implementation's to document ([FileStore]: yes; [MemoryStore]: no).
type Store interface {
	// Load returns (position, true, nil) when found, (Position{}, false, nil)
	// when never saved, (Position{}, false, err) on failure (a corrupt file is
	// ErrCorrupt naming the path).
	Load(ctx context.Context, topic string, partition int32) (position Position, found bool, err error)

	// Save records position for topic-partition, replacing any earlier
	// position. It returns an error when the position could not be stored;
	// the caller must then assume nothing was stored.
	Save(ctx context.Context, topic string, partition int32, position Position) error
}

// validateTopic checks topic against Kafka's naming rule, which also
// guarantees that a file named after it stays inside the store's directory.
func validateTopic(topic string) error { return validateName(ErrInvalidTopic, topic) }

// validateName checks name against Kafka's topic-naming rule (1 to 249
// bytes of [a-zA-Z0-9._-], not "." or ".."), and returns an error wrapping
// sentinel, quoting the name and saying what is wrong, when it breaks it.
func validateName(sentinel error, name string) error {
	if err := topicname.Validate(name); err != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return nil
}

// validateKey checks a topic-partition for Load and Save.
func validateKey(topic string, partition int32) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	if partition < 0 {
		return fmt.Errorf("%w: partition %d of topic %q is negative", ErrInvalidPosition, partition, topic)
	}
	return nil
}

// validateSave checks the arguments of Save.
func validateSave(topic string, partition int32, position Position) error {
	if err := validateKey(topic, partition); err != nil {
		return err
	}
	if position.Offset < 0 {
		return fmt.Errorf("%w: position %d for %s-%d is negative", ErrInvalidPosition, position.Offset, topic, partition)
	}
	if position.Epoch < NoEpoch {
		return fmt.Errorf("%w: epoch %d for %s-%d is below %d (NoEpoch)", ErrInvalidPosition, position.Epoch, topic, partition, NoEpoch)
	}
	return nil
}

// TopicPosition is one topic-partition's position, for [BatchStore]. Its
// JSON form is {"topic": ..., "partition": ..., "position": {...}}.
type TopicPosition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Position  Position `json:"position"`
}

// BatchStore is a [Store] that saves the positions of several partitions in
// one call, cheaper than one Save each: [FileStore] forces the directory to
// disk once for all of them, a Kafka consumer group commits them in one
// request. A pipeline saves through SaveBatch when its store has it.
//
// SaveBatch has the effect of Save for each position, in any order; on an
// error some of them may have been saved and others not, each holding
// either its old position or its new one.
type BatchStore interface {
	Store
	SaveBatch(ctx context.Context, positions []TopicPosition) error
}

// StateStore is a [Store] that also keeps named state snapshots: the state of
// a pipeline's stateful stages (windows, per-key aggregates) as opaque bytes,
// saved next to the positions it reflects and loaded when the pipeline
// starts. A snapshot is replaced whole on every save; the store never looks
// inside it.
//
// Names follow the rule of topic names (1 to 249 characters from
// [a-zA-Z0-9._-], not "." or ".."); any other name is an error wrapping
// [ErrInvalidStateName]. Names and topic-partitions are separate: a state
// named "events-0" does not touch the position of events/0.
//
// Implementations must be safe for concurrent use. As with Save, a SaveState
// that returns nil must be visible to every later LoadState; whether it
// survives a crash is the implementation's to document ([FileStore]: yes;
// [MemoryStore]: no).
type StateStore interface {
	Store

	// SaveState replaces the snapshot saved under name with state,
	// atomically: after a crash LoadState returns the old snapshot or the new
	// one, whole, never a mix. The store does not keep state after it
	// returns, so the caller may reuse the slice. A nil or empty state is a
	// snapshot of 0 bytes, and is found by LoadState. On an error the caller
	// must assume the old snapshot is still the one saved.
	SaveState(ctx context.Context, name string, state []byte) error

	// LoadState returns the snapshot last saved under name, in a new slice
	// the caller owns (non-nil, possibly empty, when found); (nil, false,
	// nil) when none was ever saved; an error wrapping [ErrCorrupt] naming
	// the file when it is damaged.
	LoadState(ctx context.Context, name string) (state []byte, found bool, err error)
}
