package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultKafkaMaxRecords is the default bound on the records one
// [KafkaSource.Read] returns: 2,500, about what a 256 KiB batch of the log
// source holds at 100 B records (see [DefaultMaxBytes] for why a batch of
// that size is the fast one). Override it with [KafkaMaxRecords].
const DefaultKafkaMaxRecords = 2500

// DefaultKafkaTimeout is the default of [KafkaTimeout]: how long opening
// the source waits for the brokers to answer and the topics to exist, and
// how long one commit may take. 10 s.
const DefaultKafkaTimeout = 10 * time.Second

// KafkaOption configures a [KafkaSource]; pass options to [Kafka].
type KafkaOption func(*kafkaConfig)

type kafkaConfig struct {
	start      Start         // Earliest or Latest: where a partition with no commit starts
	clientOpts []kgo.Opt     // KafkaClientOpts
	maxRecords int           // KafkaMaxRecords
	readAhead  int64         // KafkaReadAheadBytes: the fetched bytes the client buffers
	timeout    time.Duration // KafkaTimeout
	stateDir   string        // KafkaStateDir: the changelogs' local snapshot cache; "" for none
	txnID      string        // KafkaTransactionalID; "" for the default
	txnTimeout time.Duration // KafkaTransactionTimeout; 0 for the default
	balancers  []string      // KafkaBalancers; nil for DefaultKafkaBalancers
}

// KafkaStart sets where a partition the group has never committed starts:
// [Earliest] (the default, Kafka's auto.offset.reset=earliest) or [Latest]
// (only records produced after the member is assigned the partition). A
// partition with a commit always resumes at it. Any other Start makes
// [Kafka] return an error.
func KafkaStart(start Start) KafkaOption {
	return func(c *kafkaConfig) { c.start = start }
}

// KafkaClientOpts adds franz-go options to the source's client: TLS, SASL,
// a logger, [kgo.FetchMaxWait], session and heartbeat timings... They are
// applied after the source's own, so they may override them, except for
// the ones the source depends on: the group, the topics, disabled
// auto-commit, [kgo.BlockRebalanceOnPoll] and the partition callbacks are
// set again after them.
func KafkaClientOpts(opts ...kgo.Opt) KafkaOption {
	return func(c *kafkaConfig) { c.clientOpts = append(c.clientOpts, opts...) }
}

// KafkaMaxRecords bounds the records one Read returns (default
// [DefaultKafkaMaxRecords]); n <= 0 keeps the default.
func KafkaMaxRecords(n int) KafkaOption {
	return func(c *kafkaConfig) {
		if n > 0 {
			c.maxRecords = n
		}
	}
}

// kafkaReadAheadFetches is how many fetches [KafkaReadAheadBytes] lets
// the client have in flight or buffered at once (kgo.MaxConcurrentFetches):
// enough to fetch from four brokers at a time, each fetch a quarter of the
// bound.
const kafkaReadAheadFetches = 4

// KafkaReadAheadBytes bounds the bytes of records the source's client
// fetches ahead of Read, over all partitions and brokers together, to
// about n, overriding the default of [DefaultReadAheadBytes] (64 MiB);
// n <= 0 keeps the default. It is [ReadAheadBytes] for Kafka: kgo buffers
// what it fetched until Read polls it, and without a bound a client buffers
// up to kgo's FetchMaxBytes (50 MiB) per broker.
//
// It sets the client's [kgo.MaxConcurrentFetches] to 4 and
// [kgo.FetchMaxBytes] to n/4, so at most four fetches of n/4 bytes each
// are in flight or buffered, and lowers [kgo.FetchMaxPartitionBytes] (1
// MiB by default) to n/4 when that is smaller. The bytes are as the broker
// sends them: compressed if the topic's batches are, so the records they
// decompress to may take more. A broker still sends a record batch larger
// than the bound, alone, so the client makes progress. Those kgo options
// given in [KafkaClientOpts] override these.
func KafkaReadAheadBytes(n int) KafkaOption {
	return func(c *kafkaConfig) {
		if n > 0 {
			c.readAhead = int64(n)
		}
	}
}

// fetchOpts returns the client options that bound the bytes it fetches
// ahead (KafkaReadAheadBytes).
func (c *kafkaConfig) fetchOpts() []kgo.Opt {
	n := c.readAhead
	if n <= 0 {
		n = DefaultReadAheadBytes
	}
	per := min(n/kafkaReadAheadFetches, math.MaxInt32)
	per = max(per, 1)
	return []kgo.Opt{
		kgo.MaxConcurrentFetches(kafkaReadAheadFetches),
		kgo.FetchMaxBytes(int32(per)),
		kgo.FetchMaxPartitionBytes(int32(min(per, 1<<20))),
	}
}

// KafkaTimeout bounds how long opening the source (the first Read, or
// Resume) waits for a broker to answer and for every topic to exist, and
// how long one commit may take (default [DefaultKafkaTimeout]); d <= 0
// keeps the default.
func KafkaTimeout(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// KafkaError is the error a [KafkaSource] returns for a failure that is not
// one partition's: no broker answered, the client failed. It names the
// brokers and the group and wraps the cause.
type KafkaError struct {
	Brokers []string // the seed brokers, as given to Kafka
	Group   string   // the consumer group
	Err     error    // the cause
}

// Error returns "source: kafka group G at brokers B1,B2: cause".
func (e *KafkaError) Error() string {
	return fmt.Sprintf("source: kafka group %s at brokers %s: %v", e.Group, strings.Join(e.Brokers, ","), e.Err)
}

// Unwrap returns the cause.
func (e *KafkaError) Unwrap() error { return e.Err }

// KafkaStats counts what a [KafkaSource] did with commits and rebalances.
type KafkaStats struct {
	Commits        int64 // positions committed to the group (one per partition per commit)
	DroppedSaves   int64 // saves not committed: the partition was not assigned to this member (revoked meanwhile), the coordinator refused the commit for a stale membership (session expired, rebalance), or the position was below the group's commit
	DroppedRecords int64 // records polled for a partition no longer assigned, not handed on
	Revoked        int64 // partitions revoked from this member (their finished positions committed first)
	Lost           int64 // partitions lost (session expired): nothing committed for them
	Transactions   int64 // transactions committed (stream.ExactlyOnce)
	Aborts         int64 // transactions aborted (stream.ExactlyOnce): asked, or a rebalance or a stale membership refused the commit
}

// KafkaSource reads topics of a Kafka cluster as a member of a consumer
// group, as a stream.Source[log.Record]. Build it with [Kafka].
//
// Each element carries the record as a [log.Record] (Key, Value, Headers,
// Timestamp in milliseconds, Topic, Partition, Offset, and the record's
// leader epoch as Epoch) and the same lineage, so the handlers written for
// the log work unchanged.
//
// # Commits go through the pipeline's checkpoints
//
// Auto-commit is off. A KafkaSource is also the [checkpoint.Store] of its
// group: Save commits a position (the next offset to read, with the leader
// epoch of the record below it) and Load returns the group's commit. Give
// the source to Checkpointing:
//
//	src, err := source.Kafka(brokers, "billing", []string{"orders"})
//	...
//	err = stream.From(src).Map(handle).Checkpointing(src).Run(ctx)
//
// The pipeline's completion tracker then decides what is committed, exactly
// as with the log: a partition's commit is the lowest offset not yet
// finished, so with Parallel stages, filters, splits and batches no commit
// passes a record that has not been handled. The same source works with
// stream.Forever and stream.ConsumeForever(ctx, src, src, handle).
//
// A save for a partition that is not assigned to this member (revoked since
// its records were read) is dropped and counted in [KafkaStats]: the new
// owner commits it, and a late commit from here could move its commit back.
// So is a save the group's coordinator refuses because this member's place
// in the group is stale: its session expired (it could not heartbeat within
// the session timeout, on a slow machine or with a slow broker) or the
// group is rebalancing. The client rejoins by itself, and the pipeline
// goes on instead of failing on the save.
// A save that begins while partitions are being revoked is dropped too, and
// one committing then is cancelled and dropped: kgo holds a commit back
// while the group rebalances, and the rebalance waits for this member's
// revocation, which commits the finished positions of every assigned
// partition itself.
// A save below the offset the current assignment of a partition started at,
// or below what this member already committed for it, is dropped too: it
// comes from records of an earlier assignment still finishing, and would
// move the group's commit backwards.
//
// # Rebalances
//
// The source implements [stream.PositionsAware]: Run hands it the
// tracker's finished positions. When partitions are revoked (a member
// joined or left, or the source closes) their finished positions are
// committed synchronously before they are given up; when partitions are
// lost (the session expired: the group already gave them to someone else)
// nothing is committed. Records of a revoked partition are never handed on
// after the revocation. Records of it already in the pipeline still run to
// their end (at-least-once: the new owner starts at the commit and may
// handle some of them again), unless Run's hooks stop them.
//
// It also implements [stream.Assignable]: Run gives it its
// [stream.RebalanceHooks], and the source calls them from the group's
// callbacks, never holding its own lock (a hook may Save) and never two at
// once:
//
//   - Assigned, once the group's commits of newly assigned partitions are
//     known and before any of their records is fetched, so before Read
//     returns one: each [stream.PartitionStart] carries the group's commit
//     (-1 for none). A start whose Offset the hook changes (lowered to
//     what the partition's restored state reflects) is where the partition
//     starts reading, and saves from there on are committed (the group's
//     commit may so move back to match the state). An error from Assigned
//     is returned by the next Read (a [*KafkaError] naming the group and
//     the partitions) and ends the member's group session: the client
//     treats the partitions as lost (Lost is called, nothing is committed,
//     nothing of them is fetched) and rejoins the group, which assigns
//     them again, calling Assigned again. Nothing is skipped that way.
//   - Revoked, when partitions are being revoked, before their positions
//     are committed: the positions the pipeline gives after it returns are
//     the ones committed. Its context ends after the group's rebalance
//     timeout ([kgo.RebalanceTimeout], read back from the client: 60 s
//     unless [KafkaClientOpts] set another), the time the group gives a
//     member to rejoin. Closing the source leaves the group, which revokes
//     every partition: Revoked is called then too, from Close.
//   - Lost, when partitions were lost (or were revoked after their
//     Assigned failed: their state was never whole), after the source
//     forgot them, so no save of them is committed meanwhile.
//
// The group balancers the source offers are [DefaultKafkaBalancers]
// (cooperative-sticky, then range) unless [KafkaBalancers] says otherwise,
// so that members of other clients on their defaults (librdkafka's
// range,roundrobin; Java's range,cooperative-sticky) can share the group.
// Under cooperative-sticky a rebalance revokes only the partitions that
// move; under an eager protocol (range, chosen when a member does not offer
// cooperative-sticky) every rebalance revokes every partition first, with
// the same commits and hooks as above, and assigns them again, those this
// member keeps included.
//
// Revoked and Lost are called only for partitions Assigned was called
// for: Run sets its hooks before its first Read, which is when the source
// joins the group (Resume checks the brokers and topics but joins no
// group), so a pipeline hears of every partition it is assigned.
//
// # Lag while the pipeline is back-pressured
//
// Fetches tell the source its partitions' high watermarks only when Read
// polls them, which a back-pressured pipeline does not do. So while the
// source is open, a goroutine lists the end offsets of the assigned
// partitions every [KafkaLagInterval] (at once after an assignment, never
// while nothing is assigned), and [KafkaSource.HighWatermark], with it the
// pipeline's lag gauge, is at most about that far behind the brokers. A
// high watermark only moves forward: a fetch or listing that answered with
// a lower value than one already known is ignored.
//
// # Opening, errors, Resume
//
// The source opens on the first Read: it checks, within [KafkaTimeout],
// that a broker answers and that every topic exists, and then joins the
// group (Resume makes the same checks, and leaves the join to Read). An
// unreachable broker is a [*KafkaError] naming the brokers; a missing
// topic a [*PartitionError] for [AllPartitions] of that topic wrapping
// [log.ErrUnknownTopic]: a topic that does not exist when the timeout
// ends is an error, not a silent wait. Both are retryable
// (stream.ConsumeForever and stream.Forever back off and try again, as for
// a log topic not yet created). A fetch error from the client comes back
// from Read as a *PartitionError naming the topic and partition (a
// *KafkaError when it concerns no partition), also retryable. Once joined,
// a broker that goes away is retried by the client: Read waits.
//
// Resume (stream.Resumer) prepares the source again after Close: the next
// Read joins the group, which resumes from its commits. The store passed
// to Resume is used only to check it is not nil: positions always come
// from the group's commits, which is where this source saves them. A
// pipeline that also saves to another store (a FileStore, for example)
// keeps it up to date, but a KafkaSource never reads it.
//
// # Concurrency
//
// Read, Resume and Close are called by one goroutine at a time, as for
// every source; Save, Load, Stats, HighWatermark, SetPositions and
// SetRebalanceHooks may be called concurrently with them.
type KafkaSource struct {
	brokers []string
	group   string
	topics  []string
	cfg     kafkaConfig

	// commitMu orders commits: a save's with a revocation's, which must
	// not be overtaken by an older position. Taken before mu, never
	// while holding it.
	commitMu sync.Mutex
	// saving holds the cancel functions of the saves committing now: a
	// rebalance cancels them (kgo holds a commit back while the group
	// joins and syncs, and the rebalance waits for this member's
	// callbacks: a save waiting there would wait for itself), and a
	// cancelled save is dropped as a save for a partition being taken.
	saving map[*context.CancelFunc]struct{}
	// revoking counts the revocations running: a save that begins
	// meanwhile is dropped at once, for the same reason.
	revoking int
	// droppedInRevoke: a save was dropped or cancelled for a revocation
	// since the last revocation's commit.
	droppedInRevoke bool
	mu              sync.Mutex                    // guards what follows
	cl              *kgo.Client                   // the group member; nil while closed
	adm             *kgo.Client                   // a plain client for metadata and Load; nil while closed
	assigned        map[topicPartition]*kafkaPart // partitions this member owns now
	positions       stream.Positions              // the running pipeline's, or nil

	pending error // an error that came with records, returned by the next Read

	hooks stream.RebalanceHooks // Run's (SetRebalanceHooks), or nil
	// assignErr is the error of the last Assigned that failed, returned
	// by Read through pending; the group session kgo ended for it comes
	// back from a poll too, wrapping it, and is not returned again.
	assignErr error

	// listing counts the goroutine refreshing the high watermarks
	// (refreshHighWatermarks, kafka_lag.go); Close stops it (stopLag) and
	// waits for it before it closes adm.
	listing sync.WaitGroup
	stopLag context.CancelFunc // ends the refresh; nil while closed
	lagWake chan struct{}      // asks the refresh to list now (an assignment), capacity 1

	commits, droppedSaves, droppedRecords, revoked, lost atomic.Int64
	txnCommits, txnAborts                                atomic.Int64

	// txn is the state of the transactions under stream.ExactlyOnce
	// (kafka_txn.go); nil without them. Set by BeginTransactions, cleared
	// by Close.
	txn *kafkaTxn

	changelog kafkaChangelog // the checkpoint.ChangelogStore's clients and caches (kafka_changelog.go)
}

type topicPartition struct {
	topic     string
	partition int32
}

// kafkaPart is the state of an assigned partition.
type kafkaPart struct {
	// announced is true once the Assigned hook was called for this
	// assignment of the partition (onOffsetsFetched): only then are
	// Revoked and Lost called for it. failed is true when that Assigned
	// returned an error: the partition is then reported Lost, never
	// Revoked, since the pipeline's state of it is not whole.
	announced, failed bool
	// ready is false between the assignment and the fetch of the group's
	// commit: no save is committed then, since its floor is not known.
	ready bool
	// floor is the highest offset committed for the partition that this
	// member knows of in this assignment (the commit it started from, or
	// the start the Assigned hook asked for, or its own last commit); -1
	// for none. A save at or below it is dropped.
	floor int64
	// first is the offset of the first record this assignment read; -1
	// before one. An aborted transaction rewinds a partition the group
	// never committed to it (exactly-once, kafka_txn.go): franz-go's
	// session rewinds only partitions with a commit.
	first int64
	// hwm is the partition's high watermark: the highest that a fetch of
	// it or a listing of its end offset (refreshHighWatermarks) reported;
	// -1 while none has answered (HighWatermark, telemetry.go).
	hwm int64
}

// The interfaces a KafkaSource implements.
var (
	_ stream.Source[log.Record] = (*KafkaSource)(nil)
	_ stream.Resumer            = (*KafkaSource)(nil)
	_ stream.PositionsAware     = (*KafkaSource)(nil)
	_ stream.Assignable         = (*KafkaSource)(nil)
	_ checkpoint.Store          = (*KafkaSource)(nil)
)

// Kafka returns a source consuming topics from the Kafka cluster at brokers
// as a member of the consumer group group. Nothing is contacted until the
// first Read or Resume. It returns an error for an empty broker list, group
// or topic list, a topic name Kafka would refuse, a [KafkaStart] other
// than Earliest or Latest, or an unknown or repeated [KafkaBalancers]
// name.
func Kafka(brokers []string, group string, topics []string, opts ...KafkaOption) (*KafkaSource, error) {
	cfg := kafkaConfig{start: Earliest, maxRecords: DefaultKafkaMaxRecords, timeout: DefaultKafkaTimeout,
		readAhead: DefaultReadAheadBytes}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case len(brokers) == 0:
		return nil, errors.New("source: Kafka: no brokers")
	case group == "":
		return nil, errors.New("source: Kafka: empty group")
	case len(topics) == 0:
		return nil, errors.New("source: Kafka: no topics")
	case cfg.start.kind != startEarliest && cfg.start.kind != startLatest:
		return nil, fmt.Errorf("source: Kafka: start %s: only Earliest and Latest apply to a consumer group", cfg.start)
	}
	if cfg.stateDir != "" {
		// A file there would disable the cache silently at every restore.
		if fi, err := os.Stat(cfg.stateDir); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("source: Kafka: KafkaStateDir %s: %w", cfg.stateDir, syscall.ENOTDIR)
		}
	}
	for _, t := range topics {
		if err := log.ValidateTopicName(t); err != nil {
			return nil, fmt.Errorf("source: Kafka: %w", err)
		}
	}
	if _, err := kafkaBalancers(cfg.balancers); err != nil {
		return nil, fmt.Errorf("source: Kafka: KafkaBalancers: %w", err)
	}
	return &KafkaSource{
		brokers:  append([]string(nil), brokers...),
		group:    group,
		topics:   append([]string(nil), topics...),
		cfg:      cfg,
		assigned: make(map[topicPartition]*kafkaPart),
		lagWake:  make(chan struct{}, 1),
	}, nil
}

// Group returns the consumer group.
func (s *KafkaSource) Group() string { return s.group }

// Stats returns the source's counters since it was built.
func (s *KafkaSource) Stats() KafkaStats {
	return KafkaStats{
		Commits:        s.commits.Load(),
		DroppedSaves:   s.droppedSaves.Load(),
		DroppedRecords: s.droppedRecords.Load(),
		Revoked:        s.revoked.Load(),
		Lost:           s.lost.Load(),
		Transactions:   s.txnCommits.Load(),
		Aborts:         s.txnAborts.Load(),
	}
}

// SetPositions is called by Run (stream.PositionsAware) with the pipeline's
// finished positions, and with nil when Run ends.
func (s *KafkaSource) SetPositions(p stream.Positions) {
	s.mu.Lock()
	s.positions = p
	s.mu.Unlock()
}

func (s *KafkaSource) kafkaErr(err error) error {
	return &KafkaError{Brokers: s.brokers, Group: s.group, Err: err}
}

// clientOpts returns the options of the group's client: the source's
// defaults, then KafkaClientOpts, then what the source depends on.
func (s *KafkaSource) clientOpts() []kgo.Opt {
	start := kgo.NewOffset().AtStart()
	if s.cfg.start.kind == startLatest {
		start = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.brokers...),
		kgo.ConsumeStartOffset(start),
		// An offset out of range (retention passed the commit) resumes at
		// the log start, as the log sources' default ResetEarliest does:
		// every record that still exists is read.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	// KafkaBalancers, checked by Kafka; a kgo.Balancers in
	// KafkaClientOpts overrides it.
	if bs, err := kafkaBalancers(s.cfg.balancers); err == nil {
		opts = append(opts, kgo.Balancers(bs...))
	}
	opts = append(opts, s.cfg.fetchOpts()...) // KafkaReadAheadBytes
	opts = append(opts, s.cfg.clientOpts...)
	opts = append(opts,
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topics...),
		kgo.DisableAutoCommit(),
		// Read polls, converts and filters, then allows rebalances before
		// it returns: a revocation therefore runs either before a poll (and
		// kgo returns no record of a revoked partition after it) or after
		// Read returned the records it polled, never in between. The
		// alternative, a mutex around the whole of Read, would hold the
		// revocation up for as long as Read waits for records; this holds
		// it up only while Read copies a batch it already has.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.AdjustFetchOffsetsFn(s.onOffsetsFetched),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
	)
	return opts
}

// open creates the clients unless they exist: it checks the brokers answer
// and the topics exist, then joins the group.
func (s *KafkaSource) open(ctx context.Context) error {
	s.mu.Lock()
	open := s.cl != nil
	s.mu.Unlock()
	if open {
		return nil
	}
	adm, err := s.admin()
	if err != nil {
		return err
	}
	if err := s.checkTopics(ctx, adm); err != nil {
		return err
	}
	opts := s.clientOpts()
	s.mu.Lock()
	t := s.txn
	s.mu.Unlock()
	var cl *kgo.Client
	if t != nil {
		opts = append(opts, s.txnClientOpts(t.id)...)
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return s.kafkaErr(err)
		}
		if err := sess.Begin(); err != nil {
			sess.Close()
			return s.kafkaErr(fmt.Errorf("beginning a transaction (transactional id %s): %w", t.id, err))
		}
		s.mu.Lock()
		t.sess = sess
		s.mu.Unlock()
		cl = sess.Client()
	} else {
		var err error
		if cl, err = kgo.NewClient(opts...); err != nil {
			return s.kafkaErr(err)
		}
	}
	s.mu.Lock()
	s.cl = cl
	s.startRefreshLocked(adm)
	s.mu.Unlock()
	return nil
}

// admin returns the plain client used for metadata and Load, creating it.
func (s *KafkaSource) admin() (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adm != nil {
		return s.adm, nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.brokers...)}, s.cfg.clientOpts...)
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, s.kafkaErr(err)
	}
	s.adm = adm
	return adm, nil
}

// checkTopics waits, within the timeout, until a broker answers and every
// topic exists.
func (s *KafkaSource) checkTopics(ctx context.Context, adm *kgo.Client) error {
	tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	ac := kadm.NewClient(adm)
	missing := "" // a topic found missing, kept when the last try times out
	for {
		details, err := ac.ListTopics(tctx, s.topics...)
		if err == nil {
			missing = ""
			for _, t := range s.topics {
				d, ok := details[t]
				if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
					missing = t
					break
				}
				if d.Err != nil {
					err = &PartitionError{Topic: t, Partition: AllPartitions, Err: d.Err}
					break
				}
			}
			if err == nil && missing == "" {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if tctx.Err() != nil || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
			switch {
			case missing != "":
				return &PartitionError{Topic: missing, Partition: AllPartitions,
					Err: fmt.Errorf("kafka: %w: not in the cluster after %v", log.ErrUnknownTopic, s.cfg.timeout)}
			case errors.As(err, new(*PartitionError)):
				return err
			case err != nil && !errors.Is(err, context.DeadlineExceeded):
				return s.kafkaErr(err)
			default:
				return s.kafkaErr(fmt.Errorf("no broker answered within %v", s.cfg.timeout))
			}
		}
		// The topic may be being created: look again shortly.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-tctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// onAssigned records newly assigned partitions; their saves wait for the
// group's commit (onOffsetsFetched). It has their end offsets listed at
// once (refreshHighWatermarks), so that their high watermarks are known
// before a fetch returns records of them, or when none ever does.
func (s *KafkaSource) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range assigned {
		for _, p := range ps {
			s.assigned[topicPartition{t, p}] = &kafkaPart{floor: -1, hwm: -1, first: -1}
		}
	}
	select {
	case s.lagWake <- struct{}{}:
	default: // a listing is asked for already
	}
}

// onOffsetsFetched learns where each new assignment starts, the group's
// commit: saves below it would move the commit back. With Run's hooks set
// it first calls Assigned with the starts (see the type's doc, and
// callAssigned), and a partition starts where the hook moved its start.
// kgo calls it once the commits are fetched and before it fetches a record
// of the partitions; ctx ends when the group session begins revoking.
func (s *KafkaSource) onOffsetsFetched(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	starts, moved, err := s.callAssigned(ctx, offsets)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ps := range starts {
		st := s.assigned[topicPartition{ps.Topic, ps.Partition}]
		if st == nil {
			continue
		}
		st.ready = true
		st.floor = ps.Offset
		if moved[i] >= 0 {
			offsets[ps.Topic][ps.Partition] = kgo.NewOffset().At(moved[i])
			st.floor = moved[i]
		}
	}
	return offsets, nil
}

// onRevoked calls the Revoked hook for the revoked partitions (callRevoked),
// then commits their finished positions and forgets them: a later Save for
// them is dropped.
func (s *KafkaSource) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.beginRevoke()
	defer s.endRevoke()
	s.callRevoked(ctx, cl, revoked)
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txn != nil {
		// Exactly once: positions are committed only in transactions
		// (the open one aborts: the group rebalanced under it).
		for t, ps := range revoked {
			for _, p := range ps {
				if _, ok := s.assigned[topicPartition{t, p}]; ok {
					delete(s.assigned, topicPartition{t, p})
					s.revoked.Add(1)
				}
			}
		}
		return
	}
	// After a save dropped for a revocation (see saveCommit), every
	// assigned partition, not only the revoked ones: the save may have
	// held positions of partitions this member keeps, and the pipeline,
	// told they were saved, saves them again only once they move.
	which := revoked
	if s.droppedInRevoke {
		which, s.droppedInRevoke = nil, false
	}
	s.commitFinishedLocked(ctx, cl, which)
	for t, ps := range revoked {
		for _, p := range ps {
			if _, ok := s.assigned[topicPartition{t, p}]; ok {
				delete(s.assigned, topicPartition{t, p})
				s.revoked.Add(1)
			}
		}
	}
}

// onLost forgets lost partitions without committing, the group has given
// them to another member already, then calls the Lost hook for them.
func (s *KafkaSource) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	hooks := s.hooks
	whole, failed := s.announcedLocked(lost)
	for t, ps := range lost {
		for _, p := range ps {
			if _, ok := s.assigned[topicPartition{t, p}]; ok {
				delete(s.assigned, topicPartition{t, p})
				s.lost.Add(1)
			}
		}
	}
	s.mu.Unlock()
	if parts := append(whole, failed...); hooks != nil && len(parts) > 0 {
		sortParts(parts)
		hooks.Lost(parts)
	}
}

// commitFinishedLocked commits the pipeline's finished positions of the
// given partitions (nil: every assigned one). Errors are not returned: a
// revocation cannot be refused, and a commit that failed only means the
// next owner handles those records again.
func (s *KafkaSource) commitFinishedLocked(ctx context.Context, cl *kgo.Client, which map[string][]int32) {
	if s.positions == nil {
		return
	}
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	add := func(tp topicPartition, st *kafkaPart) {
		pos, ok := s.positions.Position(tp.topic, tp.partition)
		if !ok || !st.ready || pos.Offset <= st.floor {
			return
		}
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = make(map[int32]kgo.EpochOffset)
		}
		offsets[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: pos.Epoch, Offset: pos.Offset}
	}
	if which == nil {
		for tp, st := range s.assigned {
			add(tp, st)
		}
	} else {
		for t, ps := range which {
			for _, p := range ps {
				if st := s.assigned[topicPartition{t, p}]; st != nil {
					add(topicPartition{t, p}, st)
				}
			}
		}
	}
	if len(offsets) == 0 {
		return
	}
	_ = s.commitLocked(ctx, cl, offsets)
}

// commitLocked commits offsets synchronously, within the timeout, and
// raises the floor of every partition the group took. A partition the
// coordinator refused because this member's place in the group is stale
// (memberGone) is dropped, counted in [KafkaStats].DroppedSaves, and is no
// error: the partition is being taken from this member, as at a revocation.
// Any other refusal, or a failed request, is the error returned.
func (s *KafkaSource) commitLocked(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	committed, gone, err := commitOffsets(context.WithoutCancel(ctx), s.cfg.timeout, cl, offsets)
	s.noteCommitsLocked(offsets, committed, gone)
	return err
}

// commitOffsets commits offsets synchronously within timeout (or ctx), and
// returns the partitions the group took, how many it refused because this
// member's place is stale (memberGone), and any other failure.
func commitOffsets(ctx context.Context, timeout time.Duration, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) (committed []topicPartition, gone int64, cerr error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if memberGone(err) {
			for _, ps := range offsets {
				gone += int64(len(ps))
			}
			return
		}
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				switch err := kerr.ErrorForCode(p.ErrorCode); {
				case err == nil:
					committed = append(committed, topicPartition{t.Topic, p.Partition})
				case memberGone(err):
					gone++
				case cerr == nil:
					cerr = &PartitionError{Topic: t.Topic, Partition: p.Partition, Err: fmt.Errorf("kafka commit: %w", err)}
				}
			}
		}
	})
	return committed, gone, cerr
}

// noteCommitsLocked counts a commit's outcome and raises the floor of
// every partition the group took.
func (s *KafkaSource) noteCommitsLocked(offsets map[string]map[int32]kgo.EpochOffset, committed []topicPartition, gone int64) {
	s.droppedSaves.Add(gone)
	s.commits.Add(int64(len(committed)))
	for _, tp := range committed {
		if st := s.assigned[tp]; st != nil {
			st.floor = max(st.floor, offsets[tp.topic][tp.partition].Offset)
		}
	}
}

// memberGone reports whether err is the coordinator refusing a commit
// because this member's place in the group is stale: its session expired
// and the group expelled it (UNKNOWN_MEMBER_ID: a member that could not
// heartbeat within the session timeout, on a slow or loaded machine or
// broker), the group moved on to a newer generation or member epoch
// (ILLEGAL_GENERATION, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH), is
// rebalancing (REBALANCE_IN_PROGRESS), or another member took its
// instance id (FENCED_INSTANCE_ID). The client learns the same at its next
// heartbeat and rejoins (its partitions lost or revoked, and assigned
// again from the group's commits), so such a commit is a save for a
// partition this member may no longer own, dropped as for a revoked one:
// failing the save would stop the pipeline for what the group heals by
// itself.
func memberGone(err error) bool {
	for _, e := range []error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.StaleMemberEpoch, kerr.FencedMemberEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Save commits position for topic-partition to the group (checkpoint.Store),
// when the partition is assigned to this member and position is past what
// the group has; otherwise it drops the save, counted in
// [KafkaStats].DroppedSaves, and returns nil, as it does when the
// coordinator refuses the commit for a stale membership (see the type's
// doc). Any other failed commit returns the error.
func (s *KafkaSource) Save(ctx context.Context, topic string, partition int32, position checkpoint.Position) error {
	return s.SaveBatch(ctx, []checkpoint.TopicPosition{{Topic: topic, Partition: partition, Position: position}})
}

// saveCommit commits offsets for a save, holding commitMu but not mu, with
// a context a rebalance cancels (see KafkaSource.saving): a save cancelled
// so is dropped, counted in DroppedSaves, and returns nil.
func (s *KafkaSource) saveCommit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.revoking > 0 {
		for _, ps := range offsets {
			s.droppedSaves.Add(int64(len(ps)))
		}
		s.droppedInRevoke = true
		s.mu.Unlock()
		return nil
	}
	if s.saving == nil {
		s.saving = make(map[*context.CancelFunc]struct{})
	}
	s.saving[&cancel] = struct{}{}
	s.mu.Unlock()
	committed, gone, err := commitOffsets(cctx, s.cfg.timeout, cl, offsets)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.saving, &cancel)
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		// Cancelled by a rebalance: the partitions' positions are
		// committed by the revocation, or by the next save.
		for _, ps := range offsets {
			gone += int64(len(ps))
		}
		s.droppedInRevoke = true
		err = nil
	}
	s.noteCommitsLocked(offsets, committed, gone)
	return err
}

// beginRevoke cancels the saves committing now and drops those that begin
// until endRevoke: a revocation begins.
func (s *KafkaSource) beginRevoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoking++
	for c := range s.saving {
		(*c)()
	}
}

func (s *KafkaSource) endRevoke() {
	s.mu.Lock()
	s.revoking--
	s.mu.Unlock()
}

var _ checkpoint.BatchStore = (*KafkaSource)(nil)

// SaveBatch commits every position in one commit request
// (checkpoint.BatchStore), dropping, as Save does, those of partitions not
// assigned to this member or not past what the group has. One request for
// all partitions instead of one round trip each: the pipeline saves through
// it.
func (s *KafkaSource) SaveBatch(ctx context.Context, positions []checkpoint.TopicPosition) error {
	s.mu.Lock()
	if s.txn != nil {
		s.mu.Unlock()
		return s.kafkaErr(errors.New("under exactly-once, positions are committed only in transactions (EndTransaction), not saved"))
	}
	cl := s.cl
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, tp := range positions {
		st := s.assigned[topicPartition{tp.Topic, tp.Partition}]
		if s.cl == nil || st == nil || !st.ready || tp.Position.Offset <= st.floor {
			s.droppedSaves.Add(1)
			continue
		}
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: tp.Position.Epoch, Offset: tp.Position.Offset}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	if err := s.saveCommit(ctx, cl, offsets); err != nil {
		var pe *PartitionError
		if errors.As(err, &pe) {
			return err
		}
		if len(positions) == 1 {
			return &PartitionError{Topic: positions[0].Topic, Partition: positions[0].Partition, Err: fmt.Errorf("kafka commit: %w", err)}
		}
		return &PartitionError{Topic: positions[0].Topic, Partition: AllPartitions, Err: fmt.Errorf("kafka commit: %w", err)}
	}
	return nil
}

// Load returns the group's committed position for topic-partition
// (checkpoint.Store): found is false when the group has no commit for it.
// It uses a plain client (not a group member), opened when needed and
// closed by Close.
func (s *KafkaSource) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	adm, err := s.admin()
	if err != nil {
		return checkpoint.Position{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	resp, err := kadm.NewClient(adm).FetchOffsets(ctx, s.group)
	if err != nil {
		return checkpoint.Position{}, false, s.kafkaErr(fmt.Errorf("fetching the group's commits: %w", err))
	}
	o, ok := resp.Lookup(topic, partition)
	if !ok || o.At < 0 {
		return checkpoint.Position{}, false, nil
	}
	if o.Err != nil {
		return checkpoint.Position{}, false, &PartitionError{Topic: topic, Partition: partition, Err: o.Err}
	}
	epoch := o.LeaderEpoch
	if epoch < checkpoint.NoEpoch {
		epoch = checkpoint.NoEpoch
	}
	return checkpoint.Position{Offset: o.At, Epoch: epoch}, true, nil
}

// Read returns the next records polled from the partitions assigned to
// this member, at most [KafkaMaxRecords], opening the source on the first
// call (see the type's doc). It waits until records arrive or ctx is done,
// and then returns ctx.Err(). Records of a partition revoked meanwhile are
// dropped, counted in [KafkaStats].DroppedRecords.
//
// A Close from another goroutine while Read waits (against the rule that one
// goroutine at a time calls Read, Resume and Close, but what a test's
// cleanup or a shutdown path may do) makes Read return an error wrapping
// kgo.ErrClientClosed, never use the client Close let go of.
func (s *KafkaSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	for {
		// Before every poll: a failed Assigned sets pending while a poll
		// waits, and ends the poll.
		s.mu.Lock()
		cl, err := s.cl, s.pending
		s.pending = nil
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if cl == nil {
			return nil, s.kafkaErr(kgo.ErrClientClosed)
		}
		var elems []stream.Element[log.Record]
		s.mu.Lock()
		t := s.txn
		s.mu.Unlock()
		if t != nil {
			var cut bool
			elems, err, cut = s.pollTxn(ctx, t, cl)
			if cut && len(elems) == 0 && err == nil {
				continue // a transaction ended: poll again
			}
		} else {
			fetches := cl.PollRecords(ctx, s.cfg.maxRecords)
			elems, err = s.take(ctx, fetches)
			cl.AllowRebalance()
		}
		if err != nil {
			if len(elems) == 0 {
				return nil, err
			}
			s.mu.Lock()
			s.pending = err
			s.mu.Unlock()
		}
		if len(elems) > 0 {
			return elems, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// take converts what a poll returned, dropping records of partitions not
// assigned, and returns the first error of the poll.
func (s *KafkaSource) take(ctx context.Context, fetches kgo.Fetches) ([]stream.Element[log.Record], error) {
	var ferr error
	errs := fetches.Errors()
	if len(errs) > 0 {
		// The group session kgo ended because Assigned failed: that error
		// reached Read through pending already.
		s.mu.Lock()
		if s.assignErr != nil {
			errs = slices.DeleteFunc(errs, func(fe kgo.FetchError) bool { return errors.Is(fe.Err, s.assignErr) })
		}
		s.mu.Unlock()
		// The coordinator forgot this member (its session expired in a
		// pause) or moved to a newer generation: kgo rejoins by itself,
		// its partitions lost and assigned again. Not a failure of the
		// source; another member taking its instance id is one.
		errs = slices.DeleteFunc(errs, func(fe kgo.FetchError) bool {
			return fe.Topic == "" && memberGone(fe.Err) && !errors.Is(fe.Err, kerr.FencedInstanceID)
		})
	}
	if len(errs) > 0 {
		fe := errs[0]
		switch {
		case errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded):
			if ctx.Err() != nil {
				ferr = ctx.Err()
			} else {
				ferr = s.kafkaErr(fe.Err)
			}
		case fe.Topic == "":
			ferr = s.kafkaErr(fe.Err)
		default:
			ferr = &PartitionError{Topic: fe.Topic, Partition: fe.Partition, Err: fmt.Errorf("kafka fetch: %w", fe.Err)}
		}
	}
	n := fetches.NumRecords()
	if n == 0 {
		return nil, ferr
	}
	elems := make([]stream.Element[log.Record], 0, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		st := s.assigned[topicPartition{p.Topic, p.Partition}]
		if st != nil && p.Err == nil {
			st.hwm = max(st.hwm, p.HighWatermark) // a listing may have said more since
		}
		if len(p.Records) == 0 {
			return
		}
		if st == nil {
			s.droppedRecords.Add(int64(len(p.Records)))
			return
		}
		if st.first < 0 {
			st.first = p.Records[0].Offset
		}
		for _, r := range p.Records {
			var hs []log.Header
			if len(r.Headers) > 0 {
				hs = make([]log.Header, len(r.Headers))
				for i, h := range r.Headers {
					hs[i] = log.Header{Key: h.Key, Value: h.Value}
				}
			}
			elems = append(elems, stream.Element[log.Record]{
				Value: log.Record{
					Key:       r.Key,
					Value:     r.Value,
					Timestamp: r.Timestamp.UnixMilli(),
					Headers:   hs,
					Topic:     r.Topic,
					Partition: r.Partition,
					Offset:    r.Offset,
					Epoch:     r.LeaderEpoch,
				},
				Topic:     r.Topic,
				Partition: r.Partition,
				Offset:    r.Offset,
				Epoch:     r.LeaderEpoch,
				Timestamp: r.Timestamp.UnixMilli(),
			})
		}
	})
	return elems, ferr
}

// Resume prepares the source to be read again after Close
// (stream.Resumer): it checks, as opening does, that a broker answers and
// that every topic exists, returning the same errors. The group is joined
// by the next Read, and resumes from its commits: not here, so that no
// partition is assigned before the pipeline that Reads has set its hooks
// (see the type's doc, "Rebalances"). store must not be nil, but is
// otherwise not read: positions come from the group. On an open source
// Resume closes it first (committing finished positions, as Close does),
// so records handed out but not committed are read again.
func (s *KafkaSource) Resume(ctx context.Context, store checkpoint.Store) error {
	if store == nil {
		return s.kafkaErr(ErrNilStore)
	}
	s.mu.Lock()
	open := s.cl != nil
	s.mu.Unlock()
	if open {
		if err := s.Close(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
	adm, err := s.admin()
	if err != nil {
		return err
	}
	return s.checkTopics(ctx, adm)
}

// Close leaves the group, which revokes every assigned partition: the
// Revoked hook is called for them (from Close's goroutine, see the type's
// doc), then their finished positions are committed (when a pipeline is
// running, or has just ended). Then it closes the clients. The source may
// be opened again by Read or Resume. Close returns nil.
func (s *KafkaSource) Close() error {
	s.mu.Lock()
	cl, adm, stopLag := s.cl, s.adm, s.stopLag
	s.mu.Unlock()
	s.mu.Lock()
	t := s.txn
	s.mu.Unlock()
	if cl != nil && t != nil {
		// The transaction open now holds nothing a checkpoint committed:
		// abort it, rather than leave it to the transaction timeout.
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
		if cl.AbortBufferedRecords(ctx) == nil {
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
	}
	if cl != nil {
		// Leaving the group revokes every partition: onRevoked calls the
		// Revoked hook, commits and forgets them. s.mu is not held, and
		// s.cl stays set meanwhile, so that what the hook saves reaches
		// the group.
		cl.CloseAllowingRebalance()
	}
	s.mu.Lock()
	s.cl, s.adm, s.stopLag = nil, nil, nil
	s.txn = nil // the next Run begins them again (stream.ExactlyOnce)
	s.mu.Unlock()
	// The high watermarks' refresh ends before adm closes under it.
	if stopLag != nil {
		stopLag()
	}
	s.listing.Wait()
	if adm != nil {
		adm.Close()
	}
	s.mu.Lock()
	clear(s.assigned)
	s.pending, s.assignErr = nil, nil
	s.mu.Unlock()
	s.closeChangelog() // after leaving the group: a revocation may save state
	return nil
}
