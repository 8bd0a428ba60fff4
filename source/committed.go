package source

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/internal/notify"
	"github.com/strom-dev/strom/internal/txnfile"
	"github.com/strom-dev/strom/log"
)

// ReadCommitted makes the source return only committed records of a topic
// written exactly once by a sink.LogSink (under stream.ExactlyOnce): each
// partition is read below its committed end, the end the last committed
// transaction gave it in the topic's transaction file
// (sink.TransactionFile), as Kafka's read_committed reads below the last
// stable offset. Records of a transaction still open, or of one whose
// writer was killed (its next start truncates them and writes their
// offsets again with other records), are never returned, so a pipeline
// that reads such a topic never acts on records that later vanish. That
// is what makes log -> Kafka exactly once behind a Kafka -> log relay
// that is exactly once and killed: without it the reader relays the
// killed transaction's records, and then the records written again in
// their place.
//
// At the committed end the source waits for the next commit, woken by
// inotify on the topic's folder (the transaction file is renamed into
// it), and in any case every [CommittedPollInterval]; so records become
// readable a transaction at a time (the writer's transaction interval,
// 100 ms by default), not as they are appended. A topic without a
// transaction file (never written by a LogSink) is read whole, as
// without this option; once the file appears, reads stop at its ends.
// With [Replay] the source ends at the smaller of the high watermark and
// the committed end as they were at open (a start above the committed end
// ends at once). [Latest] starts at the committed end. A position above
// the committed end (one saved by a reader of uncommitted records) waits
// there until a commit passes it, as a read_committed Kafka consumer
// above the last stable offset does. The high watermark the source
// reports (the pipeline's strom.partition.high_watermark, and so its lag)
// is the committed end when lower. A damaged transaction file, or one
// giving the ends of another number of partitions than the topic has,
// fails Read with an error wrapping checkpoint.ErrCorrupt, naming the
// file. Default: off (records are returned as they are appended: Kafka's
// read_uncommitted).
func ReadCommitted() Option {
	return sharedOption(func(c *partitionConfig) { c.readCommitted = true })
}

// CommittedPollInterval bounds how long a [ReadCommitted] source waiting
// at a committed end takes to see a commit inotify did not report (a file
// system without inotify, no instance left): it looks at the transaction
// file at least this often. The log's follow poll has the same default
// (log.DefaultPollInterval).
const CommittedPollInterval = 100 * time.Millisecond

// committedEnd returns the committed end of the source's partition from
// the transaction file in the topic folder dir: found false when there is
// none.
func (s *PartitionSource) committedEnd(dir string) (end int64, found bool, err error) {
	return committedEndOf(dir, s.nparts, s.partition)
}

// committedEnd returns the committed end of partition of the topic with
// nparts partitions from the transaction file in the topic folder dir:
// found false when there is none. A file whose count of ends is not the
// topic's partition count belongs to another topic (one deleted and
// created again with other partitions, say) and is corrupt here, as it is
// to the sink.LogSink that would write it (its BeginTransactions refuses
// it): capping partitions at another topic's ends would hide committed
// records, or return uncommitted ones.
func committedEndOf(dir string, nparts int, partition int32) (end int64, found bool, err error) {
	ends, err := readEnds(dir)
	if h := committedLookHook.Load(); h != nil {
		(*h)()
	}
	if err != nil || ends == nil {
		return 0, false, err
	}
	if len(ends) != nparts {
		return 0, false, txnfile.Corrupt(filepath.Join(dir, txnfile.Name),
			"it gives the committed ends of %d partitions, the topic has %d", len(ends), nparts)
	}
	return ends[partition], true, nil
}

// CommittedRereadInterval is the longest a [ReadCommitted] source trusts
// the ends it read from a transaction file that looks unchanged (the same
// device, inode, size and modification time): past it, it reads the file
// again. A commit renames a new file into place, so a changed file is
// seen by its stat alone; the interval only bounds how long a replacement
// that a stat cannot tell apart (a freed inode number reused within the
// file system's timestamp granularity, at the same size) goes unseen.
const CommittedRereadInterval = time.Second

// endsCache holds the ends of each topic folder's transaction file as
// last read, shared by every source in the process: the file carries the
// writer's state snapshots too (megabytes, for a large aggregation), and
// without it every partition of every waiting source read and decoded it
// whole at every look, and all of them at every commit: 4 partitions
// waiting on a file with a 1 MiB snapshot took 12% of a core, 1.4% with
// it.
var endsCache = struct {
	sync.Mutex
	m map[string]*endsEntry // by topic folder
}{m: map[string]*endsEntry{}}

// endsEntry is one topic folder's transaction file as last read. Its mu
// is held while the file is looked at and read, so the sources a commit
// wakes together read it once, the others finding it in the cache.
type endsEntry struct {
	mu       sync.Mutex
	ok       bool // the fields below describe a file read
	dev, ino uint64
	size     int64
	mtime    time.Time
	readAt   time.Time
	ends     []int64 // never written to: shared by the sources reading it
}

// readEnds returns the committed ends in the transaction file of the
// topic folder dir, nil when there is none: from endsCache while a stat
// shows the file unchanged, for at most [CommittedRereadInterval], else
// read and decoded whole (txnfile.Read), with its errors.
func readEnds(dir string) ([]int64, error) {
	endsCache.Lock()
	e := endsCache.m[dir]
	if e == nil {
		e = &endsEntry{}
		endsCache.m[dir] = e
	}
	endsCache.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	fi, err := os.Lstat(filepath.Join(dir, txnfile.Name))
	var dev, ino uint64
	if err == nil {
		dev, ino = devInode(fi)
		if e.ok && e.dev == dev && e.ino == ino && e.size == fi.Size() && e.mtime.Equal(fi.ModTime()) &&
			time.Since(e.readAt) < CommittedRereadInterval {
			return e.ends, nil
		}
	}
	// Read after the stat: what is read is at least as new as what the
	// stat saw, so the cache never pairs a stat with older ends (a file
	// replaced in between only costs one more read).
	now := time.Now()
	rec, rerr := txnfile.Read(dir)
	if h := committedReadHook.Load(); h != nil {
		(*h)()
	}
	e.ok = false
	switch {
	case rerr != nil:
		return nil, rerr
	case rec == nil:
		return nil, nil
	case err == nil:
		e.ok, e.dev, e.ino, e.size, e.mtime, e.readAt, e.ends = true, dev, ino, fi.Size(), fi.ModTime(), now, rec.Ends
	}
	return rec.Ends, nil // without a stat (the file appeared after it), not cached
}

// committedLookHook, set only by tests (export_test.go), runs after every
// look at a transaction file, before its ends are used: a test writes the
// file or appends records there, between the look and what follows it.
var committedLookHook atomic.Pointer[func()]

// committedReadHook, set only by tests (export_test.go), runs after every
// read of a transaction file (not after a look the cache answered).
var committedReadHook atomic.Pointer[func()]

// bound sets the reader's end to the partition's committed end, first
// waiting, when the reader is at or past it, until a commit moves it past
// the reader's position. Without a transaction file it sets no end.
func (s *PartitionSource) bound(ctx context.Context) error {
	pos := s.reader.Position()
	if s.committed > pos {
		s.reader.SetEnd(s.committed)
		return nil
	}
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	var t *time.Timer
	for {
		end, found, err := s.committedEnd(s.dir)
		switch {
		case err != nil:
			return err
		case !found:
			s.committed = -1
			s.reader.SetEnd(-1)
			return nil
		case end > pos:
			s.committed = end
			s.reader.SetEnd(end)
			return nil
		}
		if stop == nil {
			// Watch before looking again, so a commit between the look
			// above and the watch is not missed. Without inotify stop is
			// a no-op and the timer alone wakes the wait.
			if s.wake == nil {
				s.wake = make(chan struct{}, 1)
			}
			stop, _ = notify.Watch(s.dir, committedNotifyMask, func([]notify.Event) {
				select {
				case s.wake <- struct{}{}:
				default: // one pending wake is enough
				}
			})
			continue
		}
		if t == nil {
			t = time.NewTimer(CommittedPollInterval)
			defer t.Stop()
		} else {
			t.Reset(CommittedPollInterval)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-t.C:
		}
	}
}

// uncommittedSince handles the one batch a [ReadCommitted] source read
// with no end set, because the topic had no transaction file: if the file
// appeared meanwhile, the batch may hold records of its first,
// uncommitted transaction. It returns how many of recs are below the
// committed end (all of them when there still is no file), and whether
// the reader must be reopened at the first record dropped.
func (s *PartitionSource) uncommittedSince(recs []log.Record) (keep int, reopen bool, err error) {
	end, found, err := s.committedEnd(s.dir)
	if err != nil || !found {
		return len(recs), false, err
	}
	s.committed = end
	for i, r := range recs {
		if r.Offset >= end {
			return i, true, nil
		}
	}
	return len(recs), false, nil
}

// replayEndOr returns where a replay of p ends: the end a [ReadCommitted]
// replay set at open (the committed end, when below the high watermark),
// else p's high watermark.
func (s *PartitionSource) replayEndOr(p *log.Partition) int64 {
	if end := s.replayEnd.Load(); end >= 0 {
		return end
	}
	return p.HighWatermark()
}
