package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/stream"
)

// DefaultKafkaTransactionTimeout is the transaction timeout of a
// transactional [KafkaSink] unless [KafkaTransactionTimeout] says
// otherwise (kgo.TransactionTimeout, Kafka's transaction.timeout.ms): 10 s,
// Kafka Streams' setting under exactly_once_v2, against the Java
// producer's 60 s and franz-go's 40 s. The broker aborts a transaction
// still open that long after its first record. A sink whose previous
// process died with a transaction open aborts it at once anyway (see
// [KafkaTransactionalID]), so the timeout bounds how long a stalled or
// vanished process, never restarted, holds back read_committed readers.
const DefaultKafkaTransactionTimeout = 10 * time.Second

// The interfaces a transactional KafkaSink implements: it runs the
// transactions of a stream.ExactlyOnce pipeline and keeps its positions.
var (
	_ stream.Transactor   = (*KafkaSink)(nil)
	_ TransactionClienter = (*KafkaSink)(nil)
)

// KafkaTransactionalID makes the sink a transactional producer with the
// Kafka transactional id id, and a stream.Transactor: the checkpoint store
// of a stream.ExactlyOnce pipeline that reads from the log (or any source
// whose positions a checkpoint.Store keeps) and writes to Kafka. Give the
// sink to the pipeline's Checkpointing and to the source's
// source.FromStore:
//
//	out, err := sink.Kafka(brokers, "orders-out", sink.KafkaTransactionalID("orders-relay"))
//	...
//	err = stream.From(source.Topic(lg, "orders", source.FromStore(out)), stream.ExactlyOnce()).
//		Map(enrich).
//		To(out).
//		Checkpointing(out).
//		Run(ctx)
//
// Each transaction (one per stream.TransactionInterval) holds the records
// the sink produced and, in the positions topic ([KafkaPositionsTopic]:
// id + "-positions", created compacted when missing), the source positions
// past the records that made them: a reader that reads only committed
// records (kgo.FetchIsolationLevel(kgo.ReadCommitted()), Kafka's
// isolation.level=read_committed) sees both or neither. After a crash the
// pipeline starts from the committed positions, so each record's output is
// visible once; a reader of uncommitted records also sees the records of
// aborted transactions. A transaction that cannot commit is aborted and
// the Run fails with an error wrapping stream.ErrTransactionAborted: run
// the pipeline again (a new Run, with this sink) and it starts from the
// committed positions.
//
// The id must stay the same across restarts, and no two running sinks may
// share it: a sink that begins its transactions fences any earlier
// producer with its id (Kafka's InitProducerId aborts that one's open
// transaction and makes its later commits fail, with [ErrFenced]). That is
// what stops a process thought dead, and its restart, from both writing.
// Its positions topic name, id + "-positions", must be a legal topic name.
//
// The client produces with acks=all, idempotence, and a transaction timeout
// of [DefaultKafkaTransactionTimeout] ([KafkaTransactionTimeout]). A transactional sink produces only
// inside transactions: outside a stream.ExactlyOnce pipeline its writes
// fail, and its Save returns [ErrNoTransaction]. It cannot be combined with
// [KafkaClient], and does not join another transactor's transactions
// (source.Kafka's); other KafkaSinks of the pipeline (a dead-letter sink)
// join its own.
func KafkaTransactionalID(id string) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) { c.txnID = id })
}

// KafkaTransactionTimeout sets how long a transaction of a sink with
// [KafkaTransactionalID] may stay open before the broker aborts it
// (default [DefaultKafkaTransactionTimeout]); d <= 0 keeps the default. It
// must exceed the pipeline's stream.TransactionInterval by far: a
// transaction also waits for the pipeline to drain.
func KafkaTransactionTimeout(d time.Duration) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) {
		if d > 0 {
			c.txnTimeout = d
		}
	})
}

// checkTransactional checks the transactional settings of c, for Kafka.
func (c *kafkaConfig) checkTransactional() error {
	if c.txnID == "" {
		return nil
	}
	if c.client != nil {
		return fmt.Errorf("sink: Kafka: KafkaTransactionalID(%q) and KafkaClient: the sink makes its transactional client itself", c.txnID)
	}
	if err := topicname.Validate(KafkaPositionsTopic(c.txnID)); err != nil {
		return fmt.Errorf("sink: Kafka: KafkaTransactionalID(%q): its positions topic is not a legal topic name: %w", c.txnID, err)
	}
	return nil
}

// transactionalOpts are the client options of KafkaTransactionalID, before
// the caller's KafkaClientOpts.
func (c *kafkaConfig) transactionalOpts() []kgo.Opt {
	if c.txnID == "" {
		return nil
	}
	return []kgo.Opt{kgo.TransactionalID(c.txnID), kgo.TransactionTimeout(c.txnTimeout)}
}

// newTxn returns the transaction state of a sink with c's settings, nil
// without a transactional id.
func (c *kafkaConfig) newTxn() *kafkaTxn {
	if c.txnID == "" {
		return nil
	}
	return &kafkaTxn{id: c.txnID, positions: KafkaPositionsTopic(c.txnID)}
}

// kafkaTxn is the transaction state of a transactional KafkaSink.
type kafkaTxn struct {
	id        string // the transactional id
	positions string // its positions topic

	begun atomic.Bool // BeginTransactions succeeded once: TransactionClient returns the client

	mu      sync.Mutex // serializes BeginTransactions, EndTransaction and Close; guards the fields below
	open    bool       // a transaction is open: begun on the client, not ended
	topicOK bool       // the positions topic is known to exist
	fatal   error      // an error the producer cannot recover from (fenced): every later call returns it

	cacheMu sync.Mutex
	cache   map[string]checkpoint.Position // committed positions by key; nil until BeginTransactions loaded them
}

// TransactionClient returns the sink's transactional client once
// BeginTransactions succeeded, nil before and for a sink without
// [KafkaTransactionalID] ([TransactionClienter]: another KafkaSink of the
// pipeline produces into the sink's transactions with it).
func (s *KafkaSink) TransactionClient() *kgo.Client {
	if s.txn == nil || !s.txn.begun.Load() {
		return nil
	}
	return s.cl
}

// BeginTransactions prepares the sink to run a stream.ExactlyOnce
// pipeline's transactions (stream.Transactor; Run calls it before the
// first record): it aborts a transaction an earlier Run left open, makes
// sure the positions topic exists (creating it compacted, one partition,
// the brokers' replication factor), initializes the transactional producer
// (Kafka's InitProducerId, which fences an earlier producer with the id and
// aborts its open transaction), begins a transaction, and reads the
// committed positions, which Load returns from then on. That read goes
// through the whole positions topic: compaction keeps it to about one
// record per source partition, plus those written since the last
// compaction.
//
// It returns an error wrapping [ErrNoTransaction] for a sink without
// [KafkaTransactionalID], [ErrSinkClosed] after Close, an error wrapping
// [ErrFenced] once a newer producer took the id over, and otherwise the
// error of the step that failed (the brokers cannot be reached, the topic
// cannot be created, a position record is corrupt: checkpoint.ErrCorrupt);
// it may be called again after those.
func (s *KafkaSink) BeginTransactions(ctx context.Context) error {
	t := s.txn
	if t == nil {
		return fmt.Errorf("sink: Kafka topic %s: %w: the sink has no transactional id (sink.KafkaTransactionalID)", s.topic, ErrNoTransaction)
	}
	if s.closed.Load() {
		return ErrSinkClosed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return t.fatal
	}
	// What an earlier Run left open (a Run whose last transaction could
	// not end) is aborted, so that nothing of it joins this Run's first
	// transaction. Nothing open: no request is sent.
	if err := s.abortLocked(ctx); err != nil {
		return err
	}
	if !t.topicOK {
		if err := s.ensurePositionsTopic(ctx); err != nil {
			return err
		}
		t.topicOK = true
	}
	// The producer id first, explicitly: InitProducerId fences the
	// previous producer of the id and completes its last transaction
	// (aborts it, or finishes a commit already decided) before it answers,
	// so the positions read below are final. kgo's BeginTransaction alone
	// would go on without an id when the brokers cannot be reached.
	if _, _, err := s.cl.ProducerID(ctx); err != nil {
		return s.txnError("initialize the transactional producer", err)
	}
	if err := s.cl.BeginTransaction(); err != nil {
		return s.txnError("begin a transaction", err)
	}
	t.open = true
	positions, err := s.readPositions(ctx)
	if err != nil {
		return err
	}
	t.cacheMu.Lock()
	t.cache = positions
	t.cacheMu.Unlock()
	t.begun.Store(true)
	return nil
}

// EndTransaction ends the open transaction and begins the next
// (stream.Transactor; Run calls it at each checkpoint, with the pipeline
// drained). With commit true it produces one record per position to the
// positions topic ([KafkaPositionsTopic]), flushes, and commits: the
// positions and every record the sink (and the KafkaSinks that joined it)
// produced since the last commit become visible to read_committed readers
// together, and Load returns the new positions. It returns (true, nil).
//
// With commit false, or when the commit cannot be made (a produce or the
// commit failed in a way Kafka lets abort: kerr.TransactionAbortable, a
// broker that stopped answering, a commit whose outcome is unknown), it
// aborts: records not yet sent are dropped, nothing of the transaction
// becomes visible, and it returns (false, nil). The sink then begins no
// new transaction until the next BeginTransactions, so that a record a
// failing pipeline still writes fails instead of joining a later
// transaction; the pipeline's Run fails with stream.ErrTransactionAborted
// (the sink cannot rewind it) and a new Run starts from the committed
// positions.
//
// It returns an error wrapping [ErrFenced] when a newer producer took the
// transactional id over (this one can never commit again), and an error
// wrapping [ErrNoTransaction] when no transaction is open.
func (s *KafkaSink) EndTransaction(ctx context.Context, positions []checkpoint.TopicPosition, commit bool) (committed bool, err error) {
	t := s.txn
	if t == nil {
		return false, fmt.Errorf("sink: Kafka topic %s: %w: the sink has no transactional id (sink.KafkaTransactionalID)", s.topic, ErrNoTransaction)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return false, t.fatal
	}
	if !t.open {
		return false, fmt.Errorf("sink: Kafka transactional id %q: %w: none is open (BeginTransactions first; an abort ends them until the next)", t.id, ErrNoTransaction)
	}
	if commit {
		err := s.commitLocked(ctx, positions)
		if err == nil {
			t.cacheMu.Lock()
			for _, tp := range positions {
				t.cache[positionKey(tp.Topic, tp.Partition)] = tp.Position
			}
			t.cacheMu.Unlock()
			if err := s.cl.BeginTransaction(); err != nil {
				return true, s.txnError("begin the next transaction", err)
			}
			t.open = true
			return true, nil
		}
		if t.fatal != nil {
			return false, err
		}
		// Abortable: abort below.
	}
	if err := s.abortLocked(ctx); err != nil && t.fatal != nil {
		return false, err
	}
	// An abort Kafka did not confirm (the brokers stopped answering)
	// leaves a transaction that can only be aborted: the next
	// BeginTransactions aborts it again, or re-initializes the producer,
	// which aborts it on the broker.
	return false, nil
}

// commitLocked produces the positions, flushes and commits the open
// transaction. On success the transaction is ended; on an error it is
// still open (kgo keeps it so, for the abort), and t.fatal is set when
// the producer cannot go on.
func (s *KafkaSink) commitLocked(ctx context.Context, positions []checkpoint.TopicPosition) error {
	t := s.txn
	if len(positions) > 0 {
		recs := make([]*kgo.Record, len(positions))
		for i, tp := range positions {
			recs[i] = &kgo.Record{Topic: t.positions, Key: []byte(positionKey(tp.Topic, tp.Partition)), Value: encodePosition(tp.Position)}
		}
		if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return s.txnError(fmt.Sprintf("produce %d positions to %s", len(recs), t.positions), err)
		}
	}
	if err := s.cl.Flush(ctx); err != nil {
		return s.txnError("flush", err)
	}
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return s.txnError("commit", err)
	}
	t.open = false
	return nil
}

// abortLocked drops the records not yet sent and aborts the transaction
// the client has open, if any (no request is sent when none is). An abort
// Kafka does not confirm is tried twice more. It returns nil once aborted,
// and otherwise the last error (t.fatal set when the producer cannot go
// on).
func (s *KafkaSink) abortLocked(ctx context.Context) error {
	t := s.txn
	if err := s.cl.AbortBufferedRecords(ctx); err != nil {
		return s.txnError("drop the records not yet sent", err)
	}
	var err error
	for range 3 {
		if err = s.cl.EndTransaction(ctx, kgo.TryAbort); err == nil || fatalTxnError(err) {
			break
		}
	}
	t.open = false
	if err != nil {
		return s.txnError("abort", err)
	}
	return nil
}

// ensurePositionsTopic creates the positions topic, compacted, when it
// does not exist.
func (s *KafkaSink) ensurePositionsTopic(ctx context.Context) error {
	name := s.txn.positions
	adm := kadm.NewClient(s.cl)
	details, err := adm.ListTopics(ctx, name)
	if err != nil {
		return fmt.Errorf("sink: Kafka positions topic %s: metadata: %w", name, err)
	}
	if d, ok := details[name]; ok && d.Err == nil {
		return nil
	} else if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("sink: Kafka positions topic %s: metadata: %w", name, d.Err)
	}
	compact := "compact"
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, name)
	if err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("sink: Kafka positions topic %s: create (compacted, 1 partition): %w", name, err)
	}
	return nil
}

// txnError wraps err, the failure of what, with the transactional id, and
// records it as the sink's fatal error when the producer cannot go on: it
// was fenced (it then wraps [ErrFenced] too), or its client is closed.
func (s *KafkaSink) txnError(what string, err error) error {
	t := s.txn
	if fencedError(err) {
		err = fmt.Errorf("sink: Kafka transactional id %q: %s: %w: %w", t.id, what, ErrFenced, err)
	} else {
		err = fmt.Errorf("sink: Kafka transactional id %q: %s: %w", t.id, what, err)
	}
	if fatalTxnError(err) {
		t.fatal = err
	}
	return err
}

// fencedError reports whether err says a newer producer took the
// transactional id over: Kafka answers a fenced producer
// PRODUCER_FENCED, or, under KIP-890 (Kafka 4's transactions),
// INVALID_PRODUCER_EPOCH.
func fencedError(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// fatalTxnError reports whether err leaves the producer unable to run
// transactions: fenced, not allowed to use its transactional id, or closed.
// Anything else (Kafka says abort, a broker did not answer) ends in an
// abort, and the next BeginTransactions tries again.
func fatalTxnError(err error) bool {
	return fencedError(err) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kgo.ErrClientClosed)
}

// Load returns the committed position of topic-partition (checkpoint.Store):
// after BeginTransactions, the positions it read, updated by each commit
// since; before, it reads the positions topic each time, as a
// read_committed reader sees it (a monitor may so watch a sink's
// positions without taking part in its transactions). found is false when
// no position was ever committed for it, or the topic does not exist yet.
// A position record that does not decode is an error wrapping
// checkpoint.ErrCorrupt.
func (s *KafkaSink) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	t := s.txn
	if t == nil {
		return checkpoint.Position{}, false, fmt.Errorf("sink: Kafka topic %s: %w: the sink has no transactional id (sink.KafkaTransactionalID)", s.topic, ErrNoTransaction)
	}
	key := positionKey(topic, partition)
	t.cacheMu.Lock()
	if t.cache != nil {
		pos, ok := t.cache[key]
		t.cacheMu.Unlock()
		return pos, ok, nil
	}
	t.cacheMu.Unlock()
	positions, err := s.readPositions(ctx)
	if err != nil {
		return checkpoint.Position{}, false, err
	}
	pos, ok := positions[key]
	return pos, ok, nil
}

// Save refuses: a transactional sink saves positions only in its
// transactions (EndTransaction), with the records they cover. It returns
// an error wrapping [ErrNoTransaction]; run the pipeline with
// stream.ExactlyOnce.
func (s *KafkaSink) Save(_ context.Context, topic string, partition int32, _ checkpoint.Position) error {
	return fmt.Errorf("sink: Kafka topic %s: save the position of %s/%d: %w: a Kafka sink keeps positions only in transactions (stream.ExactlyOnce and sink.KafkaTransactionalID)",
		s.topic, topic, partition, ErrNoTransaction)
}

// closeTransactions aborts the transaction open on Close, if any: a Run
// that ended commits its last transaction, so what is open is empty or
// the leftovers of a failed Run.
func (s *KafkaSink) closeTransactions(ctx context.Context) error {
	t := s.txn
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fatal != nil {
		return nil // fenced: the newer producer aborted it
	}
	return s.abortLocked(ctx)
}

// joinOwn is JoinTransaction of a transactional sink: the pipeline's
// transactor is the sink itself, or the sink cannot take part.
func (s *KafkaSink) joinOwn(t stream.Transactor) error {
	if t == stream.Transactor(s) {
		return nil
	}
	return fmt.Errorf("sink: Kafka topic %s: the sink runs its own transactions (transactional id %q) and cannot join those of a %T: make it the pipeline's store (Checkpointing), or drop KafkaTransactionalID",
		s.topic, s.txn.id, t)
}
