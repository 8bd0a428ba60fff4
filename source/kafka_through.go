package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// This file is stream.Through over Kafka: the repartition topic that
// stream.Repartition sends a stream through, so that a stateful stage
// keyed by anything else than the input's Kafka key counts every record of
// a key in one process (Kafka Streams' repartition topics).

// throughTopicSuffix ends every repartition topic's name, as in Kafka
// Streams.
const throughTopicSuffix = "-repartition"

// ThroughOption configures a [KafkaThrough]; pass options to
// [KafkaSource.Through].
type ThroughOption func(*throughConfig)

type throughConfig struct {
	partitions int32 // ThroughPartitions; 0: as many as the source's topics
}

// ThroughPartitions sets the partition count the repartition topic is
// created with when it is missing (default: as many as the source's topics
// have, the most of them when they differ, so that a partition of it, and
// the state the stage after it keeps for that partition, fits the
// changelog topics made with as many partitions as the input). n <= 0
// keeps the default. A topic that exists is used as it is.
func ThroughPartitions(n int) ThroughOption {
	return func(c *throughConfig) {
		if n > 0 {
			c.partitions = int32(n)
		}
	}
}

// KafkaThrough is a [stream.Through] over a Kafka topic: the repartition
// topic GROUP-NAME-repartition, which [stream.Repartition] writes a stream
// to, keyed by the new key, and reads back in the same Run. Build it with
// [KafkaSource.Through].
//
// # The topic
//
// It is created when missing, on the first write or read, within the
// source's [KafkaTimeout], with [ThroughPartitions] partitions (as many as
// the source's topics by default) and the brokers' default replication
// factor and configuration (cleanup.policy=delete: records stay for the
// topic's retention; nothing purges them once read, as Kafka Streams
// does). Every process of the group must build the same Through (the same
// name), as every process runs the same pipeline.
//
// # Writing: Sink
//
// The sink is a plain [stream.Sink] that produces each batch with an
// idempotent producer (acks=all) and returns once Kafka acknowledged every
// record of it. Kafka's default partitioner (murmur2 of the key, as
// [kgo.StickyKeyPartitioner] with a nil hasher and the log's own
// partitioner) places a record by its Key, so every record of a key lands
// in one partition; a nil Key is sent as an empty one, which is hashed
// too, instead of being spread over the partitions as Kafka spreads
// records without a key. Each record's Timestamp (milliseconds) is the
// Kafka record's timestamp, read back as the element's event time.
//
// A synchronous sink rather than a [stream.AsyncSink]: a record is
// finished upstream, and the source's position may be saved past it, only
// once Kafka has it, which a Write that returns after the acknowledgement
// gives without tracking acknowledgements apart; the price is one round
// trip to the brokers per batch (up to [DefaultKafkaMaxRecords] records of
// the source), not per record. A failed produce is returned by Write, a
// [*PartitionError] naming the repartition topic and partition, and stops
// the pipeline: the records of the batch are then not finished, and are
// handled again after a restart (at-least-once: some of them may have
// reached the topic and are counted twice after it).
//
// # Reading: Source
//
// The source is a [KafkaSource] over the repartition topic, in the same
// consumer group as the source the Through was made from (its own member:
// a second client, with the same options), its [log.Record]s turned into
// [stream.ThroughRecord]s (Key, Value, Timestamp). It is [stream.Assignable]
// and [stream.PositionsAware], so a partition of the repartition topic and
// the state kept for it move between the group's processes as the input's
// do; and it is the [checkpoint.Store] (Repartition registers it) that
// commits the positions of the repartition topic to the group.
//
// The same group, not a group of its own, as the issue and Kafka Streams
// have it (there, one consumer reads both topics): the group's generation,
// which the changelog's records carry and which fences a member the group
// moved on from, is then one clock for the partitions of both topics, and
// one group's commits say where the whole pipeline is. The cost is that
// every process is two members of the group, and that a member that joins
// or leaves rebalances the partitions of both topics at once (in one
// rebalance, not two).
//
// The source is not a [checkpoint.ChangelogStore], even when a
// KafkaSource is one: the state of the stages after the Repartition is
// saved to the pipeline's changelog store, the source given to
// Checkpointing, named after the group as every stage's changelog is.
// Closing the source (Run does when it returns) also closes the producer,
// which a later write opens again.
type KafkaThrough struct {
	parent *KafkaSource
	name   string // the name given to Through
	topic  string // GROUP-NAME-repartition
	cfg    throughConfig
	src    *throughSource

	mu      sync.Mutex
	created bool        // the topic was found or made
	prod    *kgo.Client // the producer; nil until the first write, and after Close
}

// The interfaces the Through and its source implement, and those its
// source must not (see KafkaThrough's doc).
var (
	_ stream.Through                      = (*KafkaThrough)(nil)
	_ stream.Source[stream.ThroughRecord] = (*throughSource)(nil)
	_ stream.Resumer                      = (*throughSource)(nil)
	_ stream.PositionsAware               = (*throughSource)(nil)
	_ stream.Assignable                   = (*throughSource)(nil)
	_ stream.HighWatermarker              = (*throughSource)(nil)
	_ checkpoint.BatchStore               = (*throughSource)(nil)
)

// Through returns a [KafkaThrough] named name, for [stream.Repartition]:
// a repartition topic GROUP-NAME-repartition, written by a sink and read
// back by a member of the source's group, with the source's
// [KafkaClientOpts], [KafkaMaxRecords] and [KafkaTimeout]: each process
// running the pipeline is then two members of the group, one per topic,
// and a rebalance moves both topics' partitions. Nothing is
// contacted until the first write or read. It returns an error when the
// topic's name breaks Kafka's rule (a name with characters other than
// [a-zA-Z0-9._-], or longer than 249 with the group and the suffix).
//
//	src, err := source.Kafka(brokers, "logins", []string{"ssh"})
//	...
//	via, err := src.Through("by-ip")
//	...
//	byIP := stream.Repartition(attempts, func(a attempt) string { return a.IP }, via)
//	counts := stream.Window(byIP, stream.Tumbling(time.Minute), ...)
//	err = counts.To(out).Checkpointing(src).Run(ctx)
func (s *KafkaSource) Through(name string, opts ...ThroughOption) (*KafkaThrough, error) {
	var cfg throughConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if name == "" {
		return nil, errors.New("source: Kafka Through: empty name")
	}
	topic := s.group + "-" + name + throughTopicSuffix
	if err := log.ValidateTopicName(topic); err != nil {
		return nil, fmt.Errorf("source: Kafka Through %q: the repartition topic: %w", name, err)
	}
	src, err := Kafka(s.brokers, s.group, []string{topic}, KafkaClientOpts(s.cfg.clientOpts...),
		KafkaMaxRecords(s.cfg.maxRecords), KafkaTimeout(s.cfg.timeout), KafkaStart(Earliest))
	if err != nil {
		return nil, fmt.Errorf("source: Kafka Through %q: %w", name, err)
	}
	t := &KafkaThrough{parent: s, name: name, topic: topic, cfg: cfg}
	t.src = &throughSource{t: t, src: src}
	return t, nil
}

// Topic returns the repartition topic's name, GROUP-NAME-repartition.
func (t *KafkaThrough) Topic() string { return t.topic }

// Sink returns the sink that writes to the repartition topic
// (stream.Through); every call returns the same one.
func (t *KafkaThrough) Sink() stream.Sink[stream.ThroughRecord] { return throughSink{t} }

// Source returns the source that reads the repartition topic back
// (stream.Through); every call returns the same one.
func (t *KafkaThrough) Source() stream.Source[stream.ThroughRecord] { return t.src }

// Close closes the producer (the source has its own Close, which Run
// calls, and which closes the producer too). A later write opens it
// again. It returns nil.
func (t *KafkaThrough) Close() error {
	t.mu.Lock()
	prod := t.prod
	t.prod = nil
	t.mu.Unlock()
	if prod != nil {
		prod.Close()
	}
	return nil
}

// ensureTopic creates the repartition topic unless it was found or made
// before, within the timeout: with the configured partition count, or as
// many as the parent source's topics have.
func (t *KafkaThrough) ensureTopic(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.created {
		return nil
	}
	// A client of its own, closed at once: kgo answers a metadata request
	// from its cache for a few seconds (kgo.MetadataMinAge, 5 s), so the
	// source's own client, had it been asked here, would still find the
	// topic missing once it is made, and wait that long.
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(t.parent.brokers...)}, t.parent.cfg.clientOpts...)...)
	if err != nil {
		return t.parent.kafkaErr(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, t.parent.cfg.timeout)
	defer cancel()
	ac := kadm.NewClient(adm)
	details, err := ac.ListTopics(ctx, t.topic)
	if err != nil {
		return t.topicErr(fmt.Errorf("listing it: %w", err))
	}
	if d, ok := details[t.topic]; ok && d.Err == nil {
		t.created = true
		return nil
	}
	n := t.cfg.partitions
	if n == 0 {
		if n, err = t.parentPartitions(ctx, ac); err != nil {
			return err
		}
	}
	res, err := ac.CreateTopic(ctx, n, -1, nil, t.topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return t.topicErr(fmt.Errorf("creating it with %d partitions: %w", n, err))
	}
	t.created = true
	return nil
}

// parentPartitions returns the most partitions any of the parent source's
// topics has.
func (t *KafkaThrough) parentPartitions(ctx context.Context, ac *kadm.Client) (int32, error) {
	details, err := ac.ListTopics(ctx, t.parent.topics...)
	if err != nil {
		return 0, t.topicErr(fmt.Errorf("listing the source's topics for its partition count: %w", err))
	}
	var n int32
	for _, name := range t.parent.topics {
		d, ok := details[name]
		if !ok || d.Err != nil {
			return 0, &PartitionError{Topic: name, Partition: AllPartitions,
				Err: fmt.Errorf("kafka: the partition count of %s, for the repartition topic %s: %w", name, t.topic, errors.Join(log.ErrUnknownTopic, d.Err))}
		}
		n = max(n, int32(len(d.Partitions)))
	}
	return n, nil
}

func (t *KafkaThrough) topicErr(err error) error {
	return &PartitionError{Topic: t.topic, Partition: AllPartitions, Err: fmt.Errorf("kafka repartition topic: %w", err)}
}

// producer returns the producer, creating the topic and the client when
// needed.
func (t *KafkaThrough) producer(ctx context.Context) (*kgo.Client, error) {
	if err := t.ensureTopic(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.prod != nil {
		return t.prod, nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(t.parent.brokers...)}, t.parent.cfg.clientOpts...)
	opts = append(opts,
		kgo.DefaultProduceTopic(t.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence, kgo's default, needs it
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, t.parent.kafkaErr(fmt.Errorf("the repartition topic %s's producer: %w", t.topic, err))
	}
	t.prod = cl
	return cl, nil
}

// throughSink writes ThroughRecords to the repartition topic.
type throughSink struct{ t *KafkaThrough }

// Write produces values, keyed by their Keys, with their Timestamps, and
// returns once Kafka acknowledged them all, or the first failure, a
// [*PartitionError] naming the repartition topic and partition.
func (k throughSink) Write(ctx context.Context, values []stream.ThroughRecord) error {
	if len(values) == 0 {
		return nil
	}
	cl, err := k.t.producer(ctx)
	if err != nil {
		return err
	}
	recs := make([]kgo.Record, len(values))
	ptrs := make([]*kgo.Record, len(values))
	for i, v := range values {
		key := v.Key
		if key == nil {
			key = []byte{} // hashed like any key, not spread as Kafka spreads keyless records
		}
		recs[i] = kgo.Record{Topic: k.t.topic, Key: key, Value: v.Value, Timestamp: time.UnixMilli(v.Timestamp)}
		ptrs[i] = &recs[i]
	}
	for _, r := range cl.ProduceSync(ctx, ptrs...) {
		if r.Err == nil {
			continue
		}
		if ctx.Err() != nil && errors.Is(r.Err, ctx.Err()) {
			return ctx.Err()
		}
		return &PartitionError{Topic: k.t.topic, Partition: r.Record.Partition, Err: fmt.Errorf("kafka produce: %w", r.Err)}
	}
	return nil
}

// throughSource reads the repartition topic back: a KafkaSource in the
// parent's group whose records become ThroughRecords. Everything but Read,
// Resume and Close is the KafkaSource's.
type throughSource struct {
	t   *KafkaThrough
	src *KafkaSource
}

// Read creates the topic when it is missing, then returns the next records
// of the partitions assigned to this member, as KafkaSource.Read does.
func (s *throughSource) Read(ctx context.Context) ([]stream.Element[stream.ThroughRecord], error) {
	if err := s.t.ensureTopic(ctx); err != nil {
		return nil, err
	}
	elems, err := s.src.Read(ctx)
	if len(elems) == 0 {
		return nil, err
	}
	out := make([]stream.Element[stream.ThroughRecord], len(elems))
	for i := range elems {
		e := &elems[i]
		out[i] = stream.Element[stream.ThroughRecord]{
			Value:     stream.ThroughRecord{Key: e.Value.Key, Value: e.Value.Value, Timestamp: e.Value.Timestamp},
			Topic:     e.Topic,
			Partition: e.Partition,
			Offset:    e.Offset,
			Epoch:     e.Epoch,
			Timestamp: e.Timestamp,
		}
	}
	return out, err
}

// Resume creates the topic when it is missing, then prepares the source as
// KafkaSource.Resume does.
func (s *throughSource) Resume(ctx context.Context, store checkpoint.Store) error {
	if err := s.t.ensureTopic(ctx); err != nil {
		return err
	}
	return s.src.Resume(ctx, store)
}

// Close closes the source (leaving the group, committing what the pipeline
// finished) and then the producer. It returns nil.
func (s *throughSource) Close() error {
	err := s.src.Close()
	return errors.Join(err, s.t.Close())
}

func (s *throughSource) SetPositions(p stream.Positions)           { s.src.SetPositions(p) }
func (s *throughSource) SetRebalanceHooks(h stream.RebalanceHooks) { s.src.SetRebalanceHooks(h) }
func (s *throughSource) HighWatermark(topic string, partition int32) (int64, bool) {
	return s.src.HighWatermark(topic, partition)
}

func (s *throughSource) Save(ctx context.Context, topic string, partition int32, position checkpoint.Position) error {
	return s.src.Save(ctx, topic, partition, position)
}

func (s *throughSource) SaveBatch(ctx context.Context, positions []checkpoint.TopicPosition) error {
	return s.src.SaveBatch(ctx, positions)
}

func (s *throughSource) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	return s.src.Load(ctx, topic, partition)
}
