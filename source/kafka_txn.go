package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultKafkaTransactionTimeout is how long a transaction of a
// [KafkaSource] under stream.ExactlyOnce may stay open before the broker
// aborts it, unless [KafkaTransactionTimeout] says otherwise: 10 s, Kafka
// Streams' transaction.timeout.ms under exactly_once_v2. It bounds how long
// a member killed with a transaction open holds back read_committed
// readers of what it wrote (and the next owner of its partitions), when no
// process takes over its transactional id sooner (see
// [KafkaTransactionalID]).
const DefaultKafkaTransactionTimeout = 10 * time.Second

// KafkaTransactionalID sets the transactional id of the source's
// transactions under stream.ExactlyOnce (Kafka's transactional.id). It
// must be unique among the processes running at once, and should be the
// same when a process is restarted in the same place (a host name, a pod
// of a StatefulSet, the relay's --instance-id): a new process with the id
// of a killed one aborts the killed one's open transaction at once, where
// a new id leaves it open until [KafkaTransactionTimeout]. Zombies are
// fenced either way, by the group's generation (Kafka's KIP-447). Default:
// "<group>-<hostname>-<pid>", unique but new at every start.
func KafkaTransactionalID(id string) KafkaOption {
	return func(c *kafkaConfig) { c.txnID = id }
}

// KafkaTransactionTimeout sets how long a transaction may stay open before
// the broker aborts it (default [DefaultKafkaTransactionTimeout]); d <= 0
// keeps the default. It must exceed the pipeline's
// stream.TransactionInterval by far: a transaction also waits for the
// pipeline to drain.
func KafkaTransactionTimeout(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) {
		if d > 0 {
			c.txnTimeout = d
		}
	}
}

// kafkaTxn is the state of a source's transactions (stream.ExactlyOnce).
type kafkaTxn struct {
	id   string
	sess *kgo.GroupTransactSession // nil while the source is closed

	// pollMu is held by Read's poll and by EndTransaction: franz-go's
	// session must not poll while a transaction ends. ending (under
	// KafkaSource.mu) makes Read wait for resumed before it polls again;
	// pollCancel ends the poll in flight.
	pollMu     sync.Mutex
	ending     bool
	resumed    chan struct{}
	pollCancel context.CancelFunc

	// known are the changelog topics the transactional client produced
	// to, with the partitions it saw (waitProducerSees).
	known map[string]int32
	// readAborts is the count of aborts when Read's last poll returned
	// (StaleRead).
	readAborts atomic.Int64
	// saved are the changes of the open transaction, for the caches once
	// it commits (a cache holds committed changes only).
	saved []txnSave
}

// txnSave is one SaveChanges of an open transaction.
type txnSave struct {
	changes []checkpoint.Change
	recs    []kgo.Record
}

// The interfaces a KafkaSource implements for stream.ExactlyOnce.
var _ stream.Transactor = (*KafkaSource)(nil)

// errNotTransactional is returned by EndTransaction before
// BeginTransactions.
var errNotTransactional = errors.New("the source's transactions have not begun (stream.ExactlyOnce calls BeginTransactions)")

// defaultTransactionalID is "<group>-<hostname>-<pid>".
func (s *KafkaSource) defaultTransactionalID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return s.group + "-" + host + "-" + strconv.Itoa(os.Getpid())
}

// BeginTransactions switches the source to exactly-once
// (stream.Transactor; stream.ExactlyOnce calls it once the pipeline's
// hooks are set, before the first Read): it opens the source as a member
// of its group with a franz-go GroupTransactSession (transactional id
// [KafkaTransactionalID], records read with read_committed, acks from all
// in-sync replicas, changes of source partition P to changelog partition
// P, and every other record to the partition murmur2 of its key picks, as
// sink.Kafka's), and begins the first transaction. From then on sinks
// produce with [KafkaSource.TransactionClient], SaveChanges writes into
// the open transaction, and positions are committed only by
// EndTransaction: Save and SaveBatch return an error. Close ends the mode.
//
// It returns a [*KafkaError] when no broker answers or a topic is missing
// (as opening does), or when the session cannot be made or begun.
func (s *KafkaSource) BeginTransactions(ctx context.Context) error {
	s.mu.Lock()
	if s.cl != nil && s.txn == nil {
		s.mu.Unlock()
		return s.kafkaErr(errors.New("transactions must begin before the source is first read"))
	}
	if s.txn == nil {
		id := s.cfg.txnID
		if id == "" {
			id = s.defaultTransactionalID()
		}
		s.txn = &kafkaTxn{id: id, resumed: make(chan struct{}), known: make(map[string]int32)}
	}
	s.mu.Unlock()
	return s.open(ctx)
}

// TransactionClient returns the client of the source's transactions, which
// sink.Kafka produces with once it joined them (sink.TransactionClienter),
// or nil before BeginTransactions and after Close.
func (s *KafkaSource) TransactionClient() *kgo.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txn == nil {
		return nil
	}
	return s.cl
}

// transactional reports whether the source runs transactions.
func (s *KafkaSource) transactional() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txn != nil
}

// txnClientOpts are the options of the transactional session, after the
// source's own and the caller's.
func (s *KafkaSource) txnClientOpts(id string) []kgo.Opt {
	timeout := s.cfg.txnTimeout
	if timeout <= 0 {
		timeout = DefaultKafkaTransactionTimeout
	}
	return []kgo.Opt{
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(timeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(txnPartitioner{group: s.group, keyed: kgo.StickyKeyPartitioner(nil), manual: kgo.ManualPartitioner()}),
		// The first record to a changelog just created waits for the
		// next metadata refresh (see changelogClient).
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
}

// txnPartitioner partitions the records of a transaction: a change of
// source partition P goes to partition P of its changelog (set by
// SaveChanges), every other record where murmur2 of its key says, as
// sink.Kafka's own client does.
type txnPartitioner struct {
	group         string
	keyed, manual kgo.Partitioner
}

func (p txnPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if strings.HasPrefix(topic, p.group+"-") && strings.HasSuffix(topic, changelogTopicSuffix) {
		return p.manual.ForTopic(topic)
	}
	return p.keyed.ForTopic(topic)
}

// The interface a KafkaSource implements for stream.ExactlyOnce's rewinds.
var _ stream.RewindingSource = (*KafkaSource)(nil)

// StaleRead reports whether the records the last Read returned were polled
// before an aborted transaction rewound the source (stream.RewindingSource):
// the pipeline drops them, and the source reads them again from the
// committed offsets. Without transactions it reports false.
func (s *KafkaSource) StaleRead() bool {
	s.mu.Lock()
	t := s.txn
	s.mu.Unlock()
	return t != nil && t.readAborts.Load() != s.txnAborts.Load()
}

// stopReads ends the poll in flight and keeps Read from polling until
// resumeReads.
func (s *KafkaSource) stopReads(t *kafkaTxn) {
	s.mu.Lock()
	t.ending = true
	if t.pollCancel != nil {
		t.pollCancel()
	}
	s.mu.Unlock()
	t.pollMu.Lock()
}

func (s *KafkaSource) resumeReads(t *kafkaTxn) {
	s.mu.Lock()
	t.ending = false
	close(t.resumed)
	t.resumed = make(chan struct{})
	s.mu.Unlock()
	t.pollMu.Unlock()
}

// pollTxn is Read's poll under transactions: it waits while a transaction
// ends, and polls with a context EndTransaction cancels. It returns the
// records, the poll's error, and whether an ending transaction cut the
// poll short (its error is then no failure).
func (s *KafkaSource) pollTxn(ctx context.Context, t *kafkaTxn, cl *kgo.Client) ([]stream.Element[log.Record], error, bool) {
	for {
		s.mu.Lock()
		ending, resumed := t.ending, t.resumed
		s.mu.Unlock()
		if !ending {
			break
		}
		select {
		case <-resumed:
		case <-ctx.Done():
			return nil, ctx.Err(), false
		}
	}
	t.pollMu.Lock()
	defer t.pollMu.Unlock()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if t.ending { // began between the wait and the lock
		s.mu.Unlock()
		return nil, nil, true
	}
	t.pollCancel = cancel
	s.mu.Unlock()
	fetches := cl.PollRecords(pctx, s.cfg.maxRecords)
	t.readAborts.Store(s.txnAborts.Load()) // EndTransaction counts aborts under pollMu
	elems, err := s.take(pctx, fetches)
	cl.AllowRebalance()
	s.mu.Lock()
	t.pollCancel = nil
	s.mu.Unlock()
	cut := pctx.Err() != nil && ctx.Err() == nil
	if cut && errors.Is(err, context.Canceled) {
		err = nil
	}
	return elems, err, cut
}

// EndTransaction ends the open transaction and begins the next
// (stream.Transactor). With commit true it commits, in one Kafka
// transaction: what the joined sinks produced, the changes SaveChanges
// wrote, and positions as the group's offsets (a TxnOffsetCommit with the
// member's generation, which fences a member the group expelled; positions
// of partitions this member does not own are left out). franz-go's
// GroupTransactSession aborts instead when the group rebalanced since the
// transaction began, or when the commit is refused for a stale membership.
//
// On an abort (asked, or one of those) nothing of the transaction is
// visible, and the source rewinds the pipeline to the last committed
// transaction: it calls the Lost hook for every partition it owns, then
// the Assigned hook with their committed offsets (the stateful stages
// restore the state the changelog committed), and reads them from those
// offsets again. It returns (false, nil) then.
//
// It returns an error when transactions have not begun, when the session
// fails in a way franz-go says it cannot go on from, or when a new
// transaction cannot begin; the pipeline stops. A fenced producer (the
// transaction outlived [KafkaTransactionTimeout] and the broker aborted it,
// or another process took the transactional id) wraps
// stream.ErrTransactionAborted: stream.Forever runs the pipeline again, with
// a new session, from the committed state.
func (s *KafkaSource) EndTransaction(ctx context.Context, positions []checkpoint.TopicPosition, commit bool) (bool, error) {
	s.mu.Lock()
	t := s.txn
	s.mu.Unlock()
	if t == nil || t.sess == nil {
		return false, s.kafkaErr(errNotTransactional)
	}
	s.stopReads(t)
	defer s.resumeReads(t)
	offsets := s.txnOffsets(positions)
	ectx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		setTxnOffsets(req, offsets)
		return nil
	})
	committed, err := t.sess.End(ectx, kgo.TransactionEndTry(commit))
	saved := t.saved
	t.saved = nil
	if err != nil {
		if fenced(err) {
			// The broker aborted the transaction for outliving its
			// timeout (a member stuck in a rebalance), or another
			// process took the id: this session cannot go on, a new
			// one can (stream.Forever runs again on it, as Kafka
			// Streams rejoins on a ProducerFencedException).
			return false, s.kafkaErr(fmt.Errorf("%w: ending transaction (transactional id %s): %w", stream.ErrTransactionAborted, t.id, err))
		}
		return false, s.kafkaErr(fmt.Errorf("ending transaction (transactional id %s): %w", t.id, err))
	}
	if committed {
		s.txnCommits.Add(1)
		s.mu.Lock()
		for topic, ps := range offsets {
			for p, eo := range ps {
				if st := s.assigned[topicPartition{topic, p}]; st != nil {
					st.floor = max(st.floor, eo.Offset)
					s.commits.Add(1)
				}
			}
		}
		s.mu.Unlock()
		for _, sv := range saved {
			s.appendToCaches(sv.changes, sv.recs, nil)
		}
	} else {
		s.txnAborts.Add(1)
		if err := s.rewind(ctx); err != nil {
			return false, err
		}
	}
	if err := t.sess.Begin(); err != nil {
		return committed, s.kafkaErr(fmt.Errorf("beginning a transaction (transactional id %s): %w", t.id, err))
	}
	return committed, nil
}

// fenced reports whether err says the session's producer was fenced: its
// epoch is no longer the transactional id's.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

// txnOffsets returns the positions of the partitions this member owns, as
// offsets to commit.
func (s *KafkaSource) txnOffsets(positions []checkpoint.TopicPosition) map[string]map[int32]kgo.EpochOffset {
	s.mu.Lock()
	defer s.mu.Unlock()
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	for _, tp := range positions {
		st := s.assigned[topicPartition{tp.Topic, tp.Partition}]
		if st == nil || !st.ready {
			s.droppedSaves.Add(1)
			continue
		}
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		offsets[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: tp.Position.Epoch, Offset: tp.Position.Offset}
	}
	return offsets
}

// setTxnOffsets makes req commit offsets and nothing else: franz-go's
// session would commit every partition's polled head, past records
// polled and not yet handed in, or handed in and not finished.
func setTxnOffsets(req *kmsg.TxnOffsetCommitRequest, offsets map[string]map[int32]kgo.EpochOffset) {
	ids := make(map[string][16]byte, len(req.Topics))
	for _, t := range req.Topics {
		ids[t.Topic] = t.TopicID
	}
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	req.Topics = req.Topics[:0]
	for _, topic := range topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, ids[topic]
		ps := offsets[topic]
		parts := make([]int32, 0, len(ps))
		for p := range ps {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition = p
			rp.Offset = ps[p].Offset
			rp.LeaderEpoch = ps[p].Epoch
			rp.Metadata = &req.MemberID
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
}

// rewind takes the pipeline back to the last committed transaction after
// an abort: Lost, then Assigned with the committed offsets, for every
// partition announced to it; franz-go's session has set the client's
// fetch positions back to the committed offsets already, and a start the
// Assigned hook moves is set here.
func (s *KafkaSource) rewind(ctx context.Context) error {
	s.mu.Lock()
	hooks, cl := s.hooks, s.cl
	var parts []stream.TopicPartition
	for tp, st := range s.assigned {
		if st.announced && !st.failed {
			parts = append(parts, stream.TopicPartition{Topic: tp.topic, Partition: tp.partition})
		}
	}
	s.mu.Unlock()
	if hooks == nil || len(parts) == 0 || cl == nil {
		return nil
	}
	sortParts(parts)
	committed := cl.CommittedOffsets()
	starts := make([]stream.PartitionStart, len(parts))
	rewound := make(map[string]map[int32]kgo.EpochOffset) // partitions without a commit
	s.mu.Lock()
	for i, tp := range parts {
		starts[i] = stream.PartitionStart{TopicPartition: tp, Offset: -1}
		if eo, ok := committed[tp.Topic][tp.Partition]; ok && eo.Offset >= 0 {
			starts[i].Offset = eo.Offset
		} else if st := s.assigned[topicPartition{tp.Topic, tp.Partition}]; st != nil && st.first >= 0 {
			// Never committed: back to the first record this
			// assignment read, which the session does not rewind.
			starts[i].Offset = st.first
			if rewound[tp.Topic] == nil {
				rewound[tp.Topic] = make(map[int32]kgo.EpochOffset)
			}
			rewound[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: st.first}
		}
	}
	s.mu.Unlock()
	hooks.Lost(parts)
	asked := slices.Clone(starts)
	if err := hooks.Assigned(ctx, asked); err != nil {
		return s.kafkaErr(fmt.Errorf("rewinding to the committed transaction: %w", err))
	}
	moved := rewound
	s.mu.Lock()
	for i := range asked {
		st := s.assigned[topicPartition{asked[i].Topic, asked[i].Partition}]
		if st == nil {
			continue
		}
		st.floor = starts[i].Offset
		if o := asked[i].Offset; o >= 0 && o != starts[i].Offset {
			if moved[asked[i].Topic] == nil {
				moved[asked[i].Topic] = make(map[int32]kgo.EpochOffset)
			}
			moved[asked[i].Topic][asked[i].Partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
			st.floor = o
		}
	}
	s.mu.Unlock()
	if len(moved) > 0 {
		cl.SetOffsets(moved)
	}
	return nil
}
