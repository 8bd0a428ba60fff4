package source

import (
	"errors"
	"fmt"
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
// cause" when Partition is [AllPartitions].
func (e *PartitionError) Error() string {
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
