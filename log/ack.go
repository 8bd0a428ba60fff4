package log

import (
	"fmt"
	"time"
)

// Ack says when an append returns, that is, what has happened to its
// records by then. The package doc's "Durability" section states what each
// policy promises and the loss window of the weaker ones.
//
// The zero value means "the log's default" (WithAck; AckWritten unless
// overridden), so an Ack field left unset in a caller's config does the
// usual thing.
type Ack int

const (
	// AckNone returns once the records are accepted: validated, given their
	// offsets and encoded into the partition's write buffer, which the
	// appender currently writing for the partition stores next (or the
	// caller itself when no one is). The records' slices may be reused as
	// soon as the call returns. The records are lost if the process dies
	// before that write: under a steady load of AckNone appenders up to
	// maxPendingBytes (4 MiB) of accepted frames per partition may be
	// waiting; a write error is returned by the next append, Sync
	// or Close (a failed write fails the partition, see Partition.AppendAck).
	AckNone Ack = 1
	// AckWritten returns once the records' frames are in the page cache:
	// readers (also in other processes) see them, and they survive the
	// death of the process, but not a crash of the machine before the next
	// sync. The default.
	AckWritten Ack = 2
	// AckSynced returns once the records are on stable storage: a sync
	// (fdatasync for ModeFile, msync(MS_SYNC) for ModeMmap) that began
	// after they were written has completed, and the directory entry of
	// their segment was fsynced when the segment was created. One sync
	// serves every appender waiting for one, so concurrent AckSynced
	// appenders share its cost.
	AckSynced Ack = 3
)

// DefaultAck is the ack policy of Append when WithAck is not given:
// AckWritten, which was the only behaviour before ack policies existed.
const DefaultAck = AckWritten

// String returns "none", "written" or "synced" (the names ParseAck accepts),
// or "default" for the zero value.
func (a Ack) String() string {
	switch a {
	case 0:
		return "default"
	case AckNone:
		return "none"
	case AckWritten:
		return "written"
	case AckSynced:
		return "synced"
	}
	return fmt.Sprintf("Ack(%d)", int(a))
}

// ParseAck parses "none", "written" or "synced" (the names String returns).
func ParseAck(s string) (Ack, error) {
	switch s {
	case "none":
		return AckNone, nil
	case "written":
		return AckWritten, nil
	case "synced":
		return AckSynced, nil
	}
	return 0, fmt.Errorf("log: unknown ack policy %q (want none, written or synced)", s)
}

func (a Ack) valid() bool { return a >= AckNone && a <= AckSynced }

// WithAck sets the ack policy of Partition.Append and Topic.Append,
// overriding DefaultAck (AckWritten). AppendAck chooses per call.
func WithAck(a Ack) Option { return optionFunc(func(c *config) { c.ack = a }) }

// WithFlushPolicy bounds the loss window of AckNone and AckWritten appends:
// a partition forces its records to disk once records or more of them are
// not yet synced, and interval after a record was written if no sync has
// covered it by then, whichever comes first. Zero disables either bound;
// both are zero by default (no flush policy: records reach the disk when
// the kernel writes them back, on Sync, AckSynced, a segment roll or
// Close).
//
// The records bound is checked by the appender whose write crosses it,
// which then runs the sync itself (so that append takes about one sync
// longer) unless a sync is already running. The interval bound is kept by
// one background goroutine per partition, started only when interval is
// non-zero and stopped by Close; it sleeps while nothing is unsynced.
// Negative values are an error.
func WithFlushPolicy(records int, interval time.Duration) Option {
	return optionFunc(func(c *config) { c.flushRecords, c.flushInterval = records, interval })
}

// validateWriter checks the options of this file; config.validate calls
// it.
func (c *config) validateWriter() error {
	if c.ack != 0 && !c.ack.valid() {
		return fmt.Errorf("log: invalid ack policy %d (want AckNone, AckWritten or AckSynced)", int(c.ack))
	}
	if c.flushRecords < 0 {
		return fmt.Errorf("log: flush policy of %d records must not be negative", c.flushRecords)
	}
	if c.flushInterval < 0 {
		return fmt.Errorf("log: flush policy interval %v must not be negative", c.flushInterval)
	}
	return nil
}

// ackOrDefault resolves the zero Ack to the log's default.
func (c *config) ackOrDefault(a Ack) Ack {
	if a != 0 {
		return a
	}
	if c.ack != 0 {
		return c.ack
	}
	return DefaultAck
}
