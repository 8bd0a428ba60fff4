package source

import (
	"errors"
	"fmt"

	"github.com/strom-dev/strom/checkpoint"
)

// ErrNilLog is returned, wrapped in a [*PartitionError], by the Read of a
// source built by [Partition] or [Topic] with a nil *log.Log (and by
// [TopicSource.Resume], which needs the log to learn the partitions).
var ErrNilLog = errors.New("source: nil log")

// ErrNilStore is returned, wrapped with the source's coordinates, by Read
// when the source starts [FromStore] with a nil store, and by Resume when it
// is given a nil store.
var ErrNilStore = errors.New("source: nil checkpoint store")

// ErrNoPartitions is returned, wrapped in a [*PartitionError], by
// [TopicSource.Read] and [TopicSource.Resume] when [Partitions] was given no
// partition ids: an empty subset is a mistake, not a request for every
// partition.
var ErrNoPartitions = errors.New("source: empty partition subset")

// PartitionError is the error a [PartitionSource] returns for anything that
// goes wrong while opening or reading its partition. It names the topic and
// partition and wraps the cause, so errors.Is sees through it (for example to
// log.ErrOffsetOutOfRange, log.ErrUnknownTopic or checkpoint.ErrCorrupt).
//
// The end of a replay (io.EOF) and a cancelled context (ctx.Err()) are not
// failures and are returned bare, never wrapped in a PartitionError.
//
// A [TopicSource] returns it too: for a failure of one partition, and with
// Partition -1 ([AllPartitions]) for a failure of the whole topic (an unknown
// topic, a nil log).
type PartitionError struct {
	Topic     string // topic the source reads
	Partition int32  // partition the source reads; -1 for the whole topic
	Err       error  // the cause
}

// AllPartitions is the Partition of a [PartitionError] about a whole topic
// rather than one of its partitions.
const AllPartitions int32 = -1

// Error returns "source: topic T partition P: cause", or "source: topic T:
// cause" when Partition is [AllPartitions], or the message of a
// [*TopicRecreatedError] cause alone, which names them itself.
func (e *PartitionError) Error() string {
	if ce, ok := e.Err.(*TopicRecreatedError); ok && ce.Topic == e.Topic && ce.Partition == e.Partition {
		return ce.Error()
	}
	if e.Partition == AllPartitions {
		return fmt.Sprintf("source: topic %s: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("source: topic %s partition %d: %v", e.Topic, e.Partition, e.Err)
}

// Unwrap returns the cause.
func (e *PartitionError) Unwrap() error { return e.Err }

// FileError is the error a [LinesSource] returns when its file cannot be
// opened or read, when its lineage topic is not a legal name, when its
// checkpoint store fails, or when its file changed under [FileChangeFail]
// (then Err is a [*FileChangedError]). It names the file and wraps the
// cause, so errors.Is sees through it (for example to fs.ErrNotExist,
// checkpoint.ErrCorrupt or [ErrFileChanged]).
//
// The end of the file (io.EOF) and a cancelled context are returned bare.
type FileError struct {
	Path string // the file, as given to Lines
	Err  error  // the cause
}

// Error returns "source: file PATH: cause", or the message of a
// [*FileChangedError] cause alone, which names the file itself.
func (e *FileError) Error() string {
	if ce, ok := e.Err.(*FileChangedError); ok && ce.Path == e.Path {
		return ce.Error()
	}
	return fmt.Sprintf("source: file %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// ErrTopicRecreated is matched (errors.Is) by every [*TopicRecreatedError]:
// the position a source was to resume from was saved against another
// incarnation of its topic, one deleted since and created again under the
// same name.
var ErrTopicRecreated = errors.New("source: topic created again since its position was saved")

// TopicRecreatedError is the error a [PartitionSource] or [TopicSource]
// with [ResetError] returns (wrapped in a [*PartitionError], and marked
// stream.Permanent so that ConsumeForever returns it instead of retrying)
// when the position it resumes from carries a topic ID
// (checkpoint.Position.TopicID) other than the topic's (log.Topic.ID): the
// topic was deleted and created again, and the saved offset counts records
// of the old one, so resuming there would skip the new topic's first
// records (or fail, when it holds fewer). It keeps failing until the
// position is moved: for example by reading with the default
// [ResetEarliest], which resets to the log start offset instead and
// reports it to [OnReset] with this error as its Recreated, or by deleting
// the saved position. errors.Is(err, [ErrTopicRecreated]) holds.
type TopicRecreatedError struct {
	Topic     string // topic the source reads
	Partition int32  // partition the source reads
	// Position is the saved position, with the topic ID it was saved
	// against.
	Position checkpoint.Position
	// TopicID is the ID of the topic as it is now.
	TopicID checkpoint.TopicID
	// StartOffset and NextOffset are the partition's log start offset and
	// high watermark when the mismatch was found.
	StartOffset, NextOffset int64
}

// Error names the topic, the partition, the saved position and both topic
// IDs: "source: topic events partition 0: created again since position 5
// was saved: the position is of topic ID ZtbcOJ8_SA-ji9PcQpfNBw, the topic
// now has ID 8hM7wGQpRgyAq6m1J8fF5A".
func (e *TopicRecreatedError) Error() string {
	return fmt.Sprintf("source: topic %s partition %d: created again since position %d was saved: the position is of topic ID %s, the topic now has ID %s",
		e.Topic, e.Partition, e.Position.Offset, e.Position.TopicID, e.TopicID)
}

// Is reports whether target is [ErrTopicRecreated].
func (e *TopicRecreatedError) Is(target error) bool { return target == ErrTopicRecreated }
