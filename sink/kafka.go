package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultKafkaDeliveryTimeout is how long a record may take to be
// acknowledged by Kafka, retries included, unless [KafkaDeliveryTimeout]
// says otherwise: Kafka's delivery.timeout.ms is 120 s, shorter here so an
// unreachable cluster or a missing topic stops a pipeline in reasonable time.
const DefaultKafkaDeliveryTimeout = 30 * time.Second

// ErrSinkClosed is returned by the writes of a [KafkaSink] after Close.
var ErrSinkClosed = errors.New("sink: closed")

// KafkaOption configures a [KafkaSink]; pass options to [Kafka].
type KafkaOption interface {
	applyKafka(*kafkaConfig)
}

// kafkaConfig holds a KafkaSink's settings; defaultKafkaConfig lists every
// default.
type kafkaConfig struct {
	client          *kgo.Client // KafkaClient: the caller's client; nil: the sink makes its own
	opts            []kgo.Opt   // KafkaClientOpts: after the sink's own options
	deliveryTimeout time.Duration
	txnID           string        // KafkaTransactionalID; "" for a plain producer (kafka_txn.go)
	txnTimeout      time.Duration // KafkaTransactionTimeout
	maxRecordBytes  int           // KafkaMaxRecordBytes; 0 for the client's (kafka_size.go)
}

func defaultKafkaConfig() kafkaConfig {
	return kafkaConfig{deliveryTimeout: DefaultKafkaDeliveryTimeout, txnTimeout: DefaultKafkaTransactionTimeout}
}

type kafkaOptionFunc func(*kafkaConfig)

func (f kafkaOptionFunc) applyKafka(c *kafkaConfig) { f(c) }

// KafkaClient makes the sink produce with cl instead of a client of its
// own: brokers, acks, partitioner, timeouts and the rest are then cl's, the
// brokers given to [Kafka] and [KafkaClientOpts] are ignored, and Close
// leaves cl open. cl must
// not use kgo.ManualPartitioner (the sink does not set partitions), and
// [KafkaSink.Flush] flushes everything cl buffers, not only the sink's
// records.
func KafkaClient(cl *kgo.Client) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) { c.client = cl })
}

// KafkaClientOpts adds franz-go options to the client the sink makes,
// after its own (so they override them): kgo.ProducerLinger,
// kgo.ProducerBatchCompression, kgo.SASL, kgo.DialTLSConfig, ... Options that
// undo the sink's guarantees (kgo.DisableIdempotentWrite, acks other than
// kgo.AllISRAcks) are the caller's choice.
func KafkaClientOpts(opts ...kgo.Opt) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) { c.opts = append(c.opts, opts...) })
}

// KafkaDeliveryTimeout bounds how long the records of one write may take
// to be acknowledged, from the moment the write starts, retries and the
// wait for buffer space included (Kafka's delivery.timeout.ms); a record
// not acknowledged in time fails with kgo.ErrRecordTimeout, and so does
// its write. The default is [DefaultKafkaDeliveryTimeout]; 0 means no
// bound. It bounds how long an unreachable broker takes to surface as an
// error, and applies with [KafkaClient] too. With the idempotent producer
// a record already sent fails only once its request is answered (or its
// connection times out), so that no duplicate can slip in.
//
// It is the context of the records, not franz-go's
// kgo.RecordDeliveryTimeout, which counts from each record's Timestamp: a
// relay of records written last week would time out at once. Do not pass
// that option through [KafkaClientOpts] for the same reason.
func KafkaDeliveryTimeout(d time.Duration) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) { c.deliveryTimeout = d })
}

// KafkaSink produces records to a Kafka topic as a
// stream.AsyncSink[log.Record]: under stream.Stream.To its writes are
// pipelined, and a record counts as finished, so its source position may
// be saved, only once Kafka acknowledged it. Build it with [Kafka].
//
// The client the sink makes produces with acks=all and the idempotent
// producer (franz-go's defaults, set explicitly), and picks partitions with
// kgo.StickyKeyPartitioner(nil): murmur2 of the key, as Kafka's Java client
// and strom's log partitioner (log.KafkaPartition), so a key lands in the
// same partition number in the log and in Kafka when both topics have as
// many partitions. Records without a key are sticky: they go to one
// partition until its batch is sent, then another (not the log's
// round-robin). An empty, non-nil key is a key.
//
// Each record carries its Key, Value, Headers and Timestamp (milliseconds;
// zero means now). Its Topic, Partition and Offset say where it was read,
// not where it goes: they are not sent, but they name it in errors.
//
// A KafkaSink is safe for concurrent use.
type KafkaSink struct {
	cl      *kgo.Client
	own     bool // cl was made by Kafka: Close closes it
	topic   string
	brokers []string      // for errors: the seed brokers, when the sink made the client
	timeout time.Duration // KafkaDeliveryTimeout
	closed  atomic.Bool
	txn     *kafkaTxn // KafkaTransactionalID: the sink runs transactions (kafka_txn.go); nil otherwise
	// maxBytes is the producer's limit on a record batch for the topic,
	// read back from the client (kafka_size.go): a record larger as a
	// batch of its own is refused before it is sent.
	maxBytes int

	mu      sync.Mutex
	pending int           // writes whose ack has not returned
	idle    chan struct{} // closed when pending drops to 0; nil when nobody waits
}

// The interfaces a KafkaSink implements.
var (
	_ stream.AsyncSink[log.Record] = (*KafkaSink)(nil)
	_ stream.Sink[log.Record]      = (*KafkaSink)(nil)
)

// Kafka returns a sink producing to topic on the cluster reached through
// brokers (host:port seeds), or through the client of [KafkaClient]. It
// connects lazily: an unreachable broker or a missing topic surfaces as the
// error of the first write, within the [KafkaDeliveryTimeout]. The topic
// must exist (the client does not ask the broker to create it). Close the
// sink when done.
func Kafka(brokers []string, topic string, opts ...KafkaOption) (*KafkaSink, error) {
	cfg := defaultKafkaConfig()
	for _, o := range opts {
		if o != nil {
			o.applyKafka(&cfg)
		}
	}
	if topic == "" {
		return nil, errors.New("sink: Kafka: empty topic")
	}
	if err := cfg.checkTransactional(); err != nil {
		return nil, err
	}
	sizeOpts, err := cfg.maxRecordBytesOpts()
	if err != nil {
		return nil, err
	}
	s := &KafkaSink{topic: topic, timeout: cfg.deliveryTimeout}
	if cfg.client != nil {
		s.cl = cfg.client
		s.maxBytes = maxRecordBytesOf(s.cl, topic)
		return s, nil
	}
	if len(brokers) == 0 {
		return nil, errors.New("sink: Kafka: no brokers")
	}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// A missing topic fails its records after this many metadata
		// retries (franz-go's default 4, about 1 s): the topic will not
		// appear by itself, auto-creation being off.
		kgo.UnknownTopicRetries(4),
	}, cfg.transactionalOpts()...)
	kopts = append(kopts, sizeOpts...)
	kopts = append(kopts, cfg.opts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("sink: Kafka: %w", err)
	}
	s.cl, s.own, s.brokers = cl, true, append([]string(nil), brokers...)
	s.maxBytes = maxRecordBytesOf(cl, topic)
	s.txn = cfg.newTxn()
	return s, nil
}

// Topic returns the Kafka topic the sink produces to.
func (s *KafkaSink) Topic() string { return s.topic }

// Client returns the franz-go client the sink produces with.
func (s *KafkaSink) Client() *kgo.Client { return s.cl }

// WriteAsync produces recs and returns once each is handed to the client
// (it blocks while the client holds kgo.MaxBufferedRecords records, the
// back-pressure). It does not copy what it sends, as franz-go's Produce
// does not: recs (the slice) may be reused on return, but the bytes of
// their keys, values and headers must not change until ack is called.
// stream.To guarantees that for records of strom's sources (see
// stream.AsyncSink); not copying saved a third of the relay's allocated
// bytes at 1 KiB.
// ack is called once: ack(-1, nil) when Kafka acknowledged every record,
// or ack(i, err) as soon as recs[i] failed, err a [*ProduceError] (a
// record that fails fails the records buffered after it in its partition,
// so per-partition order has no gap). Records still in flight when ctx
// ends are not sent if they can still be withdrawn, and fail with ctx's
// error. It returns an error, without calling ack, only if the sink is
// closed or ctx has ended.
func (s *KafkaSink) WriteAsync(ctx context.Context, recs []log.Record, ack func(failed int, err error)) error {
	// Counted as pending before the closed check: a Close that begins
	// meanwhile then waits for this write instead of closing the client
	// under it.
	s.begin()
	if s.closed.Load() {
		s.done()
		return ErrSinkClosed
	}
	if err := ctx.Err(); err != nil {
		s.done()
		return err
	}
	if len(recs) == 0 {
		s.done()
		ack(-1, nil)
		return nil
	}
	w := s.newWrite(recs, ack)
	if s.timeout > 0 {
		// The delivery timeout is the records' context: franz-go's own
		// RecordDeliveryTimeout counts from each record's Timestamp, which
		// here is the source's (a relay of last week's log would time out
		// at once).
		ctx, w.cancel = context.WithTimeout(ctx, s.timeout)
	}
	// One func value for the whole write: the method value w.promise,
	// evaluated in the loop, would allocate a closure per record.
	promise := w.promise
	for i := range w.krecs {
		if err := ctx.Err(); err != nil {
			for j := i; j < len(w.krecs); j++ { // not handed to the client: fail them here
				promise(&w.krecs[j], err)
			}
			break
		}
		if kgoRecordBytes(&w.krecs[i]) > s.maxBytes {
			// franz-go would refuse it too, as soon as it is partitioned
			// (or a byte or three later, see KafkaRecordBytes): refused
			// here, it fails the same way whatever franz-go knows.
			promise(&w.krecs[i], errOverLimit)
			continue
		}
		s.cl.Produce(ctx, &w.krecs[i], promise)
	}
	return nil
}

// Write produces recs and waits until Kafka acknowledged them all or one
// failed (a [*ProduceError]), or ctx ends.
func (s *KafkaSink) Write(ctx context.Context, recs []log.Record) error {
	done := make(chan error, 1)
	if err := s.WriteAsync(ctx, recs, func(_ int, err error) { done <- err }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush sends what the client holds back (lingering) now and waits until
// every write taken so far was acknowledged or failed, and its ack
// returned, or ctx ends.
func (s *KafkaSink) Flush(ctx context.Context) error {
	if err := s.cl.Flush(ctx); err != nil {
		return fmt.Errorf("sink: flushing Kafka topic %s: %w", s.topic, err)
	}
	s.mu.Lock()
	if s.pending == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sink: flushing Kafka topic %s: %w", s.topic, ctx.Err())
	}
}

// Close flushes (waiting at most about twice the delivery timeout), aborts
// the open transaction of a sink with [KafkaTransactionalID] (a Run that
// ended committed its last one), and closes the client if the sink made
// it. Writes after Close fail with [ErrSinkClosed].
func (s *KafkaSink) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var err error
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if s.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, 2*s.timeout+time.Second)
	}
	err = s.Flush(ctx)
	err = errors.Join(err, s.closeTransactions(ctx))
	cancel()
	if s.own {
		s.cl.Close()
	}
	return err
}

func (s *KafkaSink) begin() {
	s.mu.Lock()
	s.pending++
	s.mu.Unlock()
}

func (s *KafkaSink) done() {
	s.mu.Lock()
	s.pending--
	if s.pending == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// kafkaWrite is one WriteAsync: the records it produces (their bytes
// copied into one buffer) and the lineage of each for errors.
type kafkaWrite struct {
	s      *KafkaSink
	ack    func(int, error)
	krecs  []kgo.Record
	src    []lineage
	cancel context.CancelFunc // ends the delivery timeout's context; nil without one
	left   atomic.Int64       // records not yet answered
	failed atomic.Bool        // ack was called with an error
}

// lineage is where a record was read.
type lineage struct {
	topic     string
	partition int32
	offset    int64
}

func (s *KafkaSink) newWrite(recs []log.Record, ack func(int, error)) *kafkaWrite {
	nh := 0
	for i := range recs {
		nh += len(recs[i].Headers)
	}
	w := &kafkaWrite{s: s, ack: ack, krecs: make([]kgo.Record, len(recs)), src: make([]lineage, len(recs))}
	w.left.Store(int64(len(recs)))
	headers := make([]kgo.RecordHeader, 0, nh)
	for i := range recs {
		r, kr := &recs[i], &w.krecs[i]
		kr.Topic = s.topic
		kr.Partition = -1 // unknown until the partitioner picks one
		// Key, value and header values are sent from the caller's memory,
		// not copied (WriteAsync's contract, as franz-go's Produce's): a nil
		// key or value stays nil, a null in Kafka.
		kr.Key, kr.Value = r.Key, r.Value
		if r.Timestamp != 0 {
			kr.Timestamp = time.UnixMilli(r.Timestamp)
		}
		if len(r.Headers) > 0 {
			n := len(headers)
			for _, h := range r.Headers {
				headers = append(headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			kr.Headers = headers[n:len(headers):len(headers)]
		}
		w.src[i] = lineage{topic: r.Topic, partition: r.Partition, offset: r.Offset}
	}
	return w
}

// promise is the franz-go promise of each record of the write. Promises
// run one at a time on the client's goroutine: a failure is acknowledged on
// a goroutine of its own, because the stage's failure policy may write to a
// dead-letter sink that produces with this very client.
func (w *kafkaWrite) promise(r *kgo.Record, err error) {
	if err != nil && w.failed.CompareAndSwap(false, true) {
		i := w.index(r)
		perr := w.s.produceError(r, w.src[i], err)
		go func() {
			w.ack(i, perr)
			w.s.done()
		}()
	}
	if w.left.Add(-1) != 0 {
		return
	}
	if w.cancel != nil {
		w.cancel()
	}
	if !w.failed.Load() {
		w.ack(-1, nil)
		w.s.done()
	}
}

// index returns the position of r in the write (failures only: a scan).
func (w *kafkaWrite) index(r *kgo.Record) int {
	for i := range w.krecs {
		if &w.krecs[i] == r {
			return i
		}
	}
	return 0
}

func (s *KafkaSink) produceError(r *kgo.Record, src lineage, err error) *ProduceError {
	if errors.Is(err, context.DeadlineExceeded) && s.timeout > 0 {
		err = fmt.Errorf("%w: not acknowledged within the delivery timeout of %v: %w", kgo.ErrRecordTimeout, s.timeout, err)
	}
	if s.txn != nil && fencedError(err) {
		err = fmt.Errorf("%w: %w", ErrFenced, err)
	}
	err = s.tooLarge(r, err)
	pe := &ProduceError{Topic: s.topic, Partition: r.Partition,
		SourceTopic: src.topic, SourcePartition: src.partition, SourceOffset: src.offset, Err: err}
	if _, big := err.(*RecordTooLargeError); r.Partition < 0 && s.brokers != nil && !big {
		pe.Brokers = s.brokers
	}
	return pe
}

// ProduceError is the error of a record Kafka did not acknowledge. It names
// the Kafka topic and partition and where the record was read, and wraps
// the cause for errors.Is and errors.As: a broker's *kerr.Error
// (kerr.UnknownTopicOrPartition, ...), kgo.ErrRecordTimeout, a dial error,
// the context's error, or, for a record too large to be sent ever, a
// [*RecordTooLargeError] matching [ErrRecordTooLarge] (and
// kerr.MessageTooLarge when franz-go or the broker refused it).
type ProduceError struct {
	Topic     string // the Kafka topic produced to
	Partition int32  // the Kafka partition, -1 when none was picked yet (the topic's metadata never loaded)
	// Brokers are the seed brokers, set when no partition was picked, since
	// the cause may be that none of them answers.
	Brokers         []string
	SourceTopic     string // where the record was read: topic, partition and offset
	SourcePartition int32
	SourceOffset    int64
	Err             error // the cause
}

// Error returns "sink: kafka topic T partition P: record from S/Q offset O:
// cause", with the brokers in place of the partition when none was picked.
func (e *ProduceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sink: kafka topic %s", e.Topic)
	if e.Partition >= 0 {
		fmt.Fprintf(&b, " partition %d", e.Partition)
	} else if len(e.Brokers) > 0 {
		fmt.Fprintf(&b, " (brokers %s)", strings.Join(e.Brokers, ","))
	}
	if e.SourceTopic != "" {
		fmt.Fprintf(&b, ": record from %s/%d offset %d", e.SourceTopic, e.SourcePartition, e.SourceOffset)
	} else {
		// A record made by a stage (MapTo) carries no source fields; the
		// pipeline's *RecordError around this one names its lineage.
		b.WriteString(": a record with no source topic")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the cause.
func (e *ProduceError) Unwrap() error { return e.Err }
