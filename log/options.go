package log

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Mode selects a log's write path. Both store the same bytes; they differ
// in how the bytes get to the page cache and where the end of a segment is.
type Mode int

const (
	// ModeFile writes through the file descriptor (pwrite); the file's
	// length is the end of the active segment.
	ModeFile Mode = 1
	// ModeMmap writes the active segment through a shared mapping
	// (golang.org/x/sys/unix), reserving its file with fallocate before
	// the bytes are written, 1 MiB first and then the rest of the segment;
	// a zero length prefix is the end.
	ModeMmap Mode = 2
)

// DefaultMode is the write path used when WithMode is not given.
//
// ModeMmap, because it measured faster where it matters most, one record
// per Append call (a publisher's usual shape): on this project's 2-core CI
// machine (BenchmarkSegmentAppend, 2026-11-30, -benchtime 1s, no sync) 2.06 M
// records/s at 64 B against 0.55 M/s for ModeFile, which pays one pwrite per
// call, and 0.45 M/s against 0.22 M/s at 1 KiB. With 64 records per call the
// two are within noise of each other (3.0 to 3.8 M/s at 64 B, 0.58 M/s at
// 1 KiB, the order flipping between runs). ModeFile stays for file systems
// without fallocate or shared writable mappings.
const DefaultMode = ModeMmap

// String returns "file" or "mmap", the names ParseMode accepts.
func (m Mode) String() string {
	switch m {
	case ModeFile:
		return "file"
	case ModeMmap:
		return "mmap"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "file" or "mmap" (the names String returns).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "file":
		return ModeFile, nil
	case "mmap":
		return ModeMmap, nil
	}
	return 0, fmt.Errorf("log: unknown write mode %q (want file or mmap)", s)
}

// Defaults, overridden by the options below.
const (
	// DefaultSegmentBytes is the size at which a partition rolls to a new
	// segment: 64 MiB.
	DefaultSegmentBytes = 64 << 20
	// DefaultIndexIntervalBytes is the distance between sparse index
	// entries: 4 KiB, Kafka's index.interval.bytes. A partition of 10 GiB of
	// 64 B records, every segment indexed, keeps 2.58 M entries of 16 bytes:
	// 39.8 MiB of heap measured (TestIndexOf10GiBOf64ByteRecordsStaysUnder64MiB,
	// BenchmarkIndexMemory).
	DefaultIndexIntervalBytes = 4 << 10
	// DefaultPollInterval is how often a follower of a log opened read-only
	// looks for records appended by another process even when nothing woke
	// it: 100 ms. Where inotify works (local file systems on Linux) another
	// process's append wakes the follower at once (BenchmarkFollowLatency);
	// the poll is the fallback for file systems where it does not (network
	// and FUSE file systems), and costs one pread per interval per idle
	// follower.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultRetentionCheckInterval is how often a writable Log applies the
	// retention policy of the topics it has open: 5 minutes, Kafka's
	// log.retention.check.interval.ms.
	DefaultRetentionCheckInterval = 5 * time.Minute
	// MaxPartitions bounds a topic's partition count.
	MaxPartitions = 10000
	// minSegmentBytes keeps a segment able to hold at least one small record.
	minSegmentBytes = 64
)

// Option configures Open.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	mode            Mode
	segmentBytes    int64
	indexInterval   int
	readOnly        bool
	createIfMissing bool // CreateIfMissing
	repair          bool
	pollInterval    time.Duration
	partitioner     Partitioner
	ack             Ack           // WithAck; 0 means DefaultAck
	flushRecords    int           // WithFlushPolicy; 0: no record bound
	flushInterval   time.Duration // WithFlushPolicy; 0: no time bound, no flusher

	retentionCheckInterval time.Duration                 // 0: no background check
	maxTimestampAhead      time.Duration                 // WithMaxTimestampAhead; <= 0: no check
	now                    func() time.Time              // the writer's and retention's clock: time.Now but in tests
	retentionObserver      func(RetentionReport, error)  // nil: none
	cleanerInterval        time.Duration                 // WithCleanerInterval; 0: no background cleaner
	cleanerObserver        func(CompactionReport, error) // nil: none

	meterProvider metric.MeterProvider // WithMeterProvider; nil: otel.GetMeterProvider()
	tel           *logTelemetry        // the instruments, made by Open
}

func defaultConfig() config {
	return config{
		mode:          DefaultMode,
		segmentBytes:  DefaultSegmentBytes,
		indexInterval: DefaultIndexIntervalBytes,
		pollInterval:  DefaultPollInterval,

		retentionCheckInterval: DefaultRetentionCheckInterval,
		cleanerInterval:        DefaultCleanerInterval,
		maxTimestampAhead:      DefaultMaxTimestampAhead,
		now:                    time.Now,
	}
}

func (c *config) validate() error {
	if c.mode != ModeFile && c.mode != ModeMmap {
		return fmt.Errorf("log: invalid write mode %d (want ModeFile or ModeMmap)", int(c.mode))
	}
	if c.segmentBytes < minSegmentBytes {
		return fmt.Errorf("log: segment size %d bytes is below the minimum of %d", c.segmentBytes, minSegmentBytes)
	}
	if c.segmentBytes > maxFrameBytes {
		return fmt.Errorf("log: segment size %d bytes is above the maximum of %d", c.segmentBytes, int64(maxFrameBytes))
	}
	if c.indexInterval <= 0 {
		return fmt.Errorf("log: index interval %d bytes must be positive", c.indexInterval)
	}
	if c.pollInterval <= 0 {
		return fmt.Errorf("log: poll interval %v must be positive", c.pollInterval)
	}
	if c.readOnly && c.createIfMissing {
		return fmt.Errorf("log: ReadOnly and CreateIfMissing together: a read-only open never creates the directory")
	}
	if c.retentionCheckInterval < 0 {
		return fmt.Errorf("log: retention check interval %v must not be negative (0 disables the check)", c.retentionCheckInterval)
	}
	if c.cleanerInterval < 0 {
		return fmt.Errorf("log: cleaner interval %v must not be negative (0 disables the background cleaner)", c.cleanerInterval)
	}
	return c.validateWriter()
}

// WithMode selects the write path, overriding DefaultMode. The mode of a
// directory is not stored: a log written in one mode opens in the other.
func WithMode(m Mode) Option { return optionFunc(func(c *config) { c.mode = m }) }

// WithSegmentBytes sets the segment size in bytes, overriding the default
// of DefaultSegmentBytes (64 MiB). A record whose frame is larger fails with
// ErrRecordTooLarge. Tests use tiny sizes to force many segments.
func WithSegmentBytes(n int64) Option { return optionFunc(func(c *config) { c.segmentBytes = n }) }

// WithIndexIntervalBytes sets the bytes between sparse index entries,
// overriding DefaultIndexIntervalBytes (4 KiB).
func WithIndexIntervalBytes(n int) Option {
	return optionFunc(func(c *config) { c.indexInterval = n })
}

// ReadOnly opens the log for reading only: no lock is taken, nothing is
// created (the directory must exist, see Open; its topics are simply
// unknown until a writer creates them), followers are woken by the writing
// process's appends (inotify) and look every poll interval regardless, and
// every write returns ErrReadOnly. To wake followers of a ModeMmap writer
// the process needs write permission on each partition's follow.waiters
// file; without it they wake within the poll interval. It cannot be
// combined with CreateIfMissing.
func ReadOnly() Option { return optionFunc(func(c *config) { c.readOnly = true }) }

// CreateIfMissing lets Open create the log directory when it does not
// exist: the directory and any missing parents, each 0o755, and each
// parent that gained an entry is fsynced so the new directory survives a
// crash. Without it, the default, Open of a missing directory fails with
// ErrNoLog, so that a mistyped path is reported at once rather than becoming
// a new, empty log a consumer then waits on forever. Give it where the
// process is the one that makes the log (a publisher that creates its
// topics, a test's fresh directory), never to a consumer. ReadOnly with
// CreateIfMissing fails Open.
func CreateIfMissing() Option { return optionFunc(func(c *config) { c.createIfMissing = true }) }

// WithRepair lets Open truncate at a corrupt frame (see ErrCorrupt) instead
// of failing with ErrCorrupt: it cuts there, deletes later segments, lowers
// the recovery point (rewriting one that does not parse) and reports the
// records it dropped in Partition.Recovery. Without it, valid records are
// never dropped.
func WithRepair() Option { return optionFunc(func(c *config) { c.repair = true }) }

// WithPollInterval sets how often a read-only follower looks for records
// appended by another process when nothing woke it, overriding
// DefaultPollInterval (100 ms). Lower it on file systems without inotify.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.pollInterval = d })
}

// WithPartitioner replaces the default KafkaPartitioner used by
// Topic.Append.
func WithPartitioner(p Partitioner) Option {
	return optionFunc(func(c *config) { c.partitioner = p })
}

// WithRetentionCheckInterval sets how often a writable Log applies the
// retention policy (RetentionBytes, Retention) of every topic it has open,
// in a background goroutine that Close stops, overriding
// DefaultRetentionCheckInterval (5 minutes, Kafka's
// log.retention.check.interval.ms). 0 disables the background check;
// Topic.EnforceRetention still applies the policy on demand. A negative
// interval fails Open. A log opened ReadOnly never deletes anything.
func WithRetentionCheckInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retentionCheckInterval = d })
}

// WithRetentionObserver sets fn to receive the report of every background
// retention check of a topic that deleted a segment or failed (errors of the
// background check have nowhere else to go). fn runs on the check's
// goroutine, one topic after another, and must not block; it must not call
// Close. By default there is none.
func WithRetentionObserver(fn func(RetentionReport, error)) Option {
	return optionFunc(func(c *config) { c.retentionObserver = fn })
}
