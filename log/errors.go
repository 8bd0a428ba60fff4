package log

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns once a log is open wraps
// one of these (or an *os.PathError from the file system) so callers can
// test with errors.Is; the struct errors below carry the coordinates and
// match their sentinel. Errors of a caller's own making that no retry can
// change (an invalid option to Open, an Ack or an option value out of
// range, text ParseAck or ParseTimestampType cannot read) wrap none: they
// name the value instead.
var (
	// ErrOffsetOutOfRange is returned by reads and seeks below the log start
	// offset or above the high watermark. The *OffsetOutOfRangeError that
	// carries it gives the current start and next offsets.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrCorrupt is returned by Open (through Topic and CreateTopic) when a
	// frame that should be intact is not: a bad frame in a sealed segment
	// (sealed segments are forced to disk before the next one is created),
	// a gap between segments, a bad frame followed by intact ones, or an
	// end of log below the partition's recovery point (records known to be
	// on disk are missing). A sealed segment trusted from its seal marker is
	// checked on its first read instead, which returns it. *CorruptError
	// names where. A recovery point file
	// that does not parse is ErrCorrupt naming the file, and so is a
	// partition entry named like a segment that is not a regular file (a
	// directory, a symbolic link), and a symbolic link or special file in
	// place of a topic's writer.lock, topic.json, or a partition's
	// recovery-point.json or leader-epoch-checkpoint.
	ErrCorrupt = errors.New("log: corrupt segment")
	// ErrCorruptMetadata is returned when a topic's metadata file or a
	// partition's epoch file does not parse, or contradicts the folders
	// beside it. It wraps ErrCorrupt, so errors.Is(err, ErrCorrupt) holds
	// too.
	ErrCorruptMetadata = fmt.Errorf("%w: metadata", ErrCorrupt)
	// ErrNoLog is returned by Open for a directory that does not exist
	// (without CreateIfMissing; the error then matches fs.ErrNotExist too)
	// or a path that is not a directory. The message names the path.
	ErrNoLog = errors.New("log: no log directory")
	// ErrUnknownTopic is returned by Topic when the topic was never created.
	ErrUnknownTopic = errors.New("log: unknown topic")
	// ErrTopicExists is returned by CreateTopic when the topic exists with a
	// different partition count.
	ErrTopicExists = errors.New("log: topic exists")
	// ErrInvalidTopic is returned for a topic name that breaks Kafka's rule:
	// 1 to 249 characters of [a-zA-Z0-9._-], and not "." or "..".
	ErrInvalidTopic = errors.New("log: invalid topic name")
	// ErrInvalidPartitions is returned by CreateTopic for a partition count
	// outside 1..MaxPartitions.
	ErrInvalidPartitions = errors.New("log: invalid partition count")
	// ErrPartitionOutOfRange is returned for a partition number outside
	// 0..partitions-1 of its topic.
	ErrPartitionOutOfRange = errors.New("log: partition out of range")
	// ErrRecordTooLarge is returned by Append for a record whose frame does
	// not fit in an empty segment. *RecordTooLargeError gives both sizes.
	ErrRecordTooLarge = errors.New("log: record too large")
	// ErrLocked is returned when another writer (in this or another process)
	// holds a topic's writer lock. *LockedError names the lock file and pid.
	ErrLocked = errors.New("log: topic locked by another writer")
	// ErrReadOnly is returned by every write (Append, Truncate, CreateTopic,
	// Sync) through a log opened with ReadOnly.
	ErrReadOnly = errors.New("log: opened read-only")
	// ErrClosed is returned by operations on a closed Log, Topic or Partition.
	ErrClosed = errors.New("log: closed")
	// ErrTruncated is returned by an append whose records a concurrent
	// Partition.Truncate removed before the append's ack (written or
	// synced) came.
	ErrTruncated = errors.New("log: records truncated before their ack")
)

// OffsetOutOfRangeError reports a read or truncation outside
// [StartOffset, NextOffset]. It matches ErrOffsetOutOfRange.
type OffsetOutOfRangeError struct {
	Topic       string
	Partition   int32
	Offset      int64 // the offset asked for
	StartOffset int64 // the log start offset when the error was made
	NextOffset  int64 // the high watermark when the error was made
}

// Error names the coordinates, as the type doc lists them.
func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("log: topic %s partition %d: offset %d out of range [%d, %d]",
		e.Topic, e.Partition, e.Offset, e.StartOffset, e.NextOffset)
}

// Unwrap returns ErrOffsetOutOfRange.
func (e *OffsetOutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// CorruptError names a frame that failed verification where the log promised
// an intact one. It matches ErrCorrupt.
type CorruptError struct {
	Topic     string
	Partition int32
	Segment   string // path of the segment file
	Position  int64  // byte position of the bad frame in the segment
	Offset    int64  // offset the frame should have held
	Reason    string // what failed: "crc mismatch", "length past end of file", ...
}

// Error names the coordinates, as the type doc lists them.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("log: topic %s partition %d: corrupt frame in segment %s at byte %d (offset %d): %s",
		e.Topic, e.Partition, e.Segment, e.Position, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// RecordTooLargeError reports a record whose frame is larger than a
// segment. It matches ErrRecordTooLarge.
type RecordTooLargeError struct {
	Topic        string
	Partition    int32
	FrameBytes   int64 // bytes the record needs on disk, frame header and padding included
	SegmentBytes int64 // the configured segment size
}

// Error names the coordinates, as the type doc lists them.
func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("log: topic %s partition %d: record needs %d bytes but a segment holds %d bytes",
		e.Topic, e.Partition, e.FrameBytes, e.SegmentBytes)
}

// Unwrap returns ErrRecordTooLarge.
func (e *RecordTooLargeError) Unwrap() error { return ErrRecordTooLarge }

// LockedError reports that a topic's writer lock is held. It matches
// ErrLocked.
type LockedError struct {
	Topic string
	Path  string // the lock file
	PID   int    // the holder's process id as written in the lock file; 0 if unreadable
}

// Error names the coordinates, as the type doc lists them.
func (e *LockedError) Error() string {
	return fmt.Sprintf("log: topic %s is locked for writing by pid %d (lock file %s)", e.Topic, e.PID, e.Path)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }
