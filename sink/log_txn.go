package sink

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/internal/txnfile"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// TransactionFile is the name of the file, in the output topic's folder
// (log.Topic.Dir), that holds the last transaction a [LogSink] committed
// under stream.ExactlyOnce: the committed end of each partition, the input
// positions and the state snapshots. Renaming a new one over it is the
// commit. The log reads nothing of that name (it reads topic.json,
// writer.lock and the partition folders), so the file does not change the
// topic; [CommittedEnds] and source.ReadCommitted read it.
const TransactionFile = txnfile.Name

// The interfaces a LogSink implements for stream.ExactlyOnce: it runs the
// transactions of a pipeline that writes into its topic, keeping the
// positions and the state beside the topic.
var (
	_ stream.Transactor        = (*LogSink)(nil)
	_ stream.TransactionalSink = (*LogSink)(nil)
	_ checkpoint.StateStore    = (*LogSink)(nil)
)

// logTxn is a LogSink's transactions: the last committed one, and what
// the open one saved of the state.
type logTxn struct {
	mu      sync.Mutex
	began   bool              // BeginTransactions succeeded
	broken  error             // a commit failed: transactions stop until the next BeginTransactions
	last    *txnfile.Record   // the last committed transaction; nil before BeginTransactions
	pending map[string][]byte // SaveState in the open transaction
}

// transactional reports whether the sink's transactions have begun (its
// writes then belong to them).
func (s *LogSink) transactional() bool {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	return s.txn.began
}

// BeginTransactions makes the sink the transactor of a stream.ExactlyOnce
// pipeline (stream.Transactor; Run calls it before anything is read): it
// takes the topic's writer lock (log.Topic.LockWriter), reads the topic's
// [TransactionFile], and truncates every partition of the topic back to
// the end the last committed transaction gave it, so the records of a
// transaction that never committed (the process was killed, or it
// aborted) are gone before anything is written. With no transaction file
// (the first run), it writes one that commits the topic as it is, with no
// positions and no state. Temporary files a killed commit left are
// removed.
//
// Errors: ErrNilTopic; the lock's (a *log.LockedError when another
// process writes the topic); an error wrapping checkpoint.ErrCorrupt for
// a damaged transaction file, or one for a topic of another partition
// count; [ErrCommittedLost] when a partition ends below its committed
// end; the truncation's and the file's I/O errors, naming the partition
// or the file. A new BeginTransactions (a new Run after an abort) starts
// again from the file.
func (s *LogSink) BeginTransactions(ctx context.Context) error {
	if s.t == nil {
		return ErrNilTopic
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	s.txn.began, s.txn.broken, s.txn.last, s.txn.pending = false, nil, nil, nil
	if err := s.t.LockWriter(); err != nil {
		return &TopicError{Topic: s.t.Name(), Partition: -1, Err: fmt.Errorf("begin transactions: %w", err)}
	}
	dir := s.t.Dir()
	if err := txnfile.RemoveTemps(dir); err != nil {
		return err
	}
	rec, err := txnfile.Read(dir)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &txnfile.Record{Ends: s.nextOffsets(), Positions: map[txnfile.TP]checkpoint.Position{}, States: map[string][]byte{}}
		if err := txnfile.Write(dir, rec); err != nil {
			return err
		}
	}
	if len(rec.Ends) != s.t.Partitions() {
		return txnfile.Corrupt(filepath.Join(dir, TransactionFile), "it gives ends of %d partitions, topic %s has %d",
			len(rec.Ends), s.t.Name(), s.t.Partitions())
	}
	if err := s.rollBackLocked(rec); err != nil {
		return err
	}
	s.txn.last, s.txn.began = rec, true
	return nil
}

// nextOffsets returns every partition's next offset, partition 0 first.
func (s *LogSink) nextOffsets() []int64 {
	ends := make([]int64, s.t.Partitions())
	for i := range ends {
		p, _ := s.t.Partition(int32(i)) // i is in range
		ends[i] = p.NextOffset()
	}
	return ends
}

// rollBackLocked truncates every partition whose next offset is past its
// end in rec back to it.
func (s *LogSink) rollBackLocked(rec *txnfile.Record) error {
	for i, end := range rec.Ends {
		p, _ := s.t.Partition(int32(i)) // rec.Ends has the topic's partition count
		next := p.NextOffset()
		switch {
		case next < end:
			return &TopicError{Topic: s.t.Name(), Partition: int32(i), Err: fmt.Errorf(
				"%w: the partition ends at offset %d, the committed transaction %d ended it at %d: %d committed records are gone "+
					"(without sink.Synced, committed records are not forced to disk and a power loss can drop them)",
				ErrCommittedLost, next, rec.Seq, end, end-next)}
		case next > end:
			if err := p.Truncate(end); err != nil {
				return &TopicError{Topic: s.t.Name(), Partition: int32(i), Err: fmt.Errorf(
					"roll back %d records written after committed transaction %d: %w", next-end, rec.Seq, err)}
			}
		}
	}
	return nil
}

// JoinTransaction lets the sink write into t's transactions
// (stream.TransactionalSink): t must be the sink itself, as
// Checkpointing(sink) makes it. A LogSink writes only into the
// transactions of its own topic, whose file holds the positions and the
// state; a second LogSink in the pipeline, or another transactor (a Kafka
// source's transactions), is refused with an error saying so, and Run
// names the sink.
func (s *LogSink) JoinTransaction(t stream.Transactor) error {
	name := "<nil>"
	if s.t != nil {
		name = s.t.Name()
	}
	if other, ok := t.(*LogSink); ok && other != s {
		oname := "<nil>"
		if other.t != nil {
			oname = other.t.Name()
		}
		return fmt.Errorf("sink: log topic %s: the transactions are those of the sink of log topic %s: "+
			"one pipeline can write exactly once into one log topic, whose sink checkpoints it (Checkpointing(sink))", name, oname)
	}
	if t != stream.Transactor(s) {
		return fmt.Errorf("sink: log topic %s: a LogSink writes only into its own transactions, not those of a %T: "+
			"checkpoint the pipeline with the sink (Checkpointing(sink))", name, t)
	}
	if !s.transactional() {
		return fmt.Errorf("sink: log topic %s: the sink's transactions have not begun", name)
	}
	return nil
}

// EndTransaction ends the open transaction (stream.Transactor; Run calls
// it at each checkpoint, with the pipeline drained).
//
// With commit true it commits: every partition the transaction wrote is
// synced when the sink is [Synced], then the [TransactionFile] is
// replaced (temporary file, fsync, rename, folder fsync) by one holding
// the next sequence number, the partitions' next offsets as their
// committed ends, positions merged into the committed ones, and the
// snapshots SaveState saved merged into the committed ones. The rename is
// the commit: a crash before it leaves the last transaction, whose ends
// the next BeginTransactions truncates back to. A transaction that wrote
// nothing and saved no position or state commits without touching the
// file. A failed commit returns the error (Run stops with it), and every
// later call fails until the next BeginTransactions, which reads back
// whichever transaction the file holds.
//
// With commit false it aborts: it truncates the partitions back to their
// committed ends, drops the snapshots saved, and returns (false, nil);
// Run then stops with stream.ErrTransactionAborted (a LogSink is not
// stream.Assignable), and a new Run goes on from the committed
// transaction.
func (s *LogSink) EndTransaction(ctx context.Context, positions []checkpoint.TopicPosition, commit bool) (bool, error) {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return false, err
	}
	if !commit {
		s.txn.pending = nil
		if err := s.rollBackLocked(s.txn.last); err != nil {
			s.txn.broken = err
			return false, err
		}
		return false, nil
	}
	for _, tp := range positions {
		if err := validPosition(tp); err != nil {
			return false, err
		}
	}
	last := s.txn.last
	ends := s.nextOffsets()
	wrote := false
	for i, end := range ends {
		if end == last.Ends[i] {
			continue
		}
		wrote = true
		if s.cfg.synced {
			p, _ := s.t.Partition(int32(i))
			if err := p.Sync(); err != nil {
				s.txn.broken = &TopicError{Topic: s.t.Name(), Partition: int32(i), Err: fmt.Errorf("sync before commit: %w", err)}
				return false, s.txn.broken
			}
		}
	}
	if !wrote && len(s.txn.pending) == 0 && unmoved(last.Positions, positions) {
		return true, nil
	}
	next := &txnfile.Record{Seq: last.Seq + 1, Ends: ends, Positions: maps.Clone(last.Positions), States: maps.Clone(last.States)}
	for _, tp := range positions {
		next.Positions[txnfile.TP{Topic: tp.Topic, Partition: tp.Partition}] = tp.Position
	}
	maps.Copy(next.States, s.txn.pending)
	if err := ctx.Err(); err != nil {
		return false, err // nothing done: the transaction stays open
	}
	if err := txnfile.Write(s.t.Dir(), next); err != nil {
		s.txn.broken = err
		return false, err
	}
	s.txn.last, s.txn.pending = next, nil
	return true, nil
}

// unmoved reports whether every position is already the committed one.
func unmoved(committed map[txnfile.TP]checkpoint.Position, positions []checkpoint.TopicPosition) bool {
	for _, tp := range positions {
		if p, ok := committed[txnfile.TP{Topic: tp.Topic, Partition: tp.Partition}]; !ok || p != tp.Position {
			return false
		}
	}
	return true
}

// usableLocked returns why the transactions cannot go on, or nil.
func (s *LogSink) usableLocked() error {
	switch {
	case s.t == nil:
		return ErrNilTopic
	case s.txn.broken != nil:
		return fmt.Errorf("sink: log topic %s: a commit failed, begin the transactions again: %w", s.t.Name(), s.txn.broken)
	case !s.txn.began:
		return fmt.Errorf("%w (log topic %s: BeginTransactions was not called)", ErrNoTransaction, s.t.Name())
	}
	return nil
}

// validPosition checks a position given to EndTransaction.
func validPosition(tp checkpoint.TopicPosition) error {
	switch {
	case topicname.Validate(tp.Topic) != nil:
		return fmt.Errorf("%w: %w", checkpoint.ErrInvalidTopic, topicname.Validate(tp.Topic))
	case tp.Partition < 0, tp.Position.Offset < 0, tp.Position.Epoch < checkpoint.NoEpoch:
		return fmt.Errorf("%w: %s/%d at %s", checkpoint.ErrInvalidPosition, tp.Topic, tp.Partition, tp.Position)
	}
	return nil
}

// Load returns the position the last committed transaction holds for
// topic/partition (checkpoint.Store): (position, true, nil) when it holds
// one, (Position{}, false, nil) when it holds none or no transaction was
// ever committed. Before BeginTransactions it reads the
// [TransactionFile] at every call (another process may be committing);
// afterwards it answers from memory. A damaged file is an error wrapping
// checkpoint.ErrCorrupt.
func (s *LogSink) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	if err := ctx.Err(); err != nil {
		return checkpoint.Position{}, false, err
	}
	rec, err := s.committed()
	if err != nil || rec == nil {
		return checkpoint.Position{}, false, err
	}
	p, ok := rec.Positions[txnfile.TP{Topic: topic, Partition: partition}]
	return p, ok, nil
}

// committed returns the last committed transaction: from memory once the
// transactions began, else read from the file (nil when none).
func (s *LogSink) committed() (*txnfile.Record, error) {
	if s.t == nil {
		return nil, ErrNilTopic
	}
	s.txn.mu.Lock()
	last := s.txn.last
	s.txn.mu.Unlock()
	if last != nil {
		return last, nil
	}
	return txnfile.Read(s.t.Dir())
}

// Save always fails with an error wrapping [ErrNoTransaction]
// (checkpoint.Store): a LogSink keeps positions only by committing them in
// a transaction with the records they made (stream.ExactlyOnce hands them
// to EndTransaction). A position saved on its own, in an at-least-once
// pipeline, would not match the topic's end: records written past it
// would be kept and written again after a restart, which is what a
// checkpoint.FileStore already does.
func (s *LogSink) Save(_ context.Context, topic string, partition int32, position checkpoint.Position) error {
	name := "<nil>"
	if s.t != nil {
		name = s.t.Name()
	}
	return fmt.Errorf("%w: position %s/%d at %s for log topic %s: run the pipeline with stream.ExactlyOnce, or checkpoint it to a checkpoint.FileStore",
		ErrNoTransaction, topic, partition, position, name)
}

// SaveState saves state under name into the open transaction
// (checkpoint.StateStore): it is committed with the transaction's
// records and positions by EndTransaction, or dropped with them by an
// abort. The slice is copied. LoadState sees it at once (the transaction
// reads its own writes). Errors: one wrapping checkpoint.ErrInvalidStateName
// for a name that breaks the topic-name rule, one wrapping
// [ErrNoTransaction] before BeginTransactions or after a failed commit.
func (s *LogSink) SaveState(ctx context.Context, name string, state []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := topicname.Validate(name); err != nil {
		return fmt.Errorf("%w: %w", checkpoint.ErrInvalidStateName, err)
	}
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if s.txn.pending == nil {
		s.txn.pending = make(map[string][]byte)
	}
	s.txn.pending[name] = append([]byte{}, state...)
	return nil
}

// LoadState returns the snapshot saved under name (checkpoint.StateStore):
// the one SaveState saved in the open transaction, else the last committed
// transaction's; (nil, false, nil) when there is none. The slice is the
// caller's. Before BeginTransactions it reads the [TransactionFile], as
// Load does. Errors: one wrapping checkpoint.ErrInvalidStateName, one
// wrapping checkpoint.ErrCorrupt for a damaged file.
func (s *LogSink) LoadState(ctx context.Context, name string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := topicname.Validate(name); err != nil {
		return nil, false, fmt.Errorf("%w: %w", checkpoint.ErrInvalidStateName, err)
	}
	s.txn.mu.Lock()
	st, ok := s.txn.pending[name]
	s.txn.mu.Unlock()
	if ok {
		return bytes.Clone(st), true, nil
	}
	rec, err := s.committed()
	if err != nil || rec == nil {
		return nil, false, err
	}
	st, ok = rec.States[name]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, st...), true, nil
}

// CommittedEnds returns, per partition of t (partition 0 first), the end
// of its committed records: its next offset when the last transaction of
// the [LogSink] writing t under stream.ExactlyOnce committed. found is
// false when t has no [TransactionFile] (no such sink ever wrote it).
//
// Records at and above a partition's end are not committed: a
// transaction still open, or one whose process was killed and that the
// next BeginTransactions truncates away. A reader of t that must see only
// committed records (Kafka's read_committed) reads each partition below
// its end. It reads the file at each call, so it works in any process,
// on a log opened read-only too. Errors: one wrapping checkpoint.ErrCorrupt
// for a damaged file, I/O errors naming it.
func CommittedEnds(t *log.Topic) (ends []int64, found bool, err error) {
	if t == nil {
		return nil, false, ErrNilTopic
	}
	rec, err := txnfile.Read(t.Dir())
	if err != nil || rec == nil {
		return nil, false, err
	}
	return rec.Ends, true, nil
}
