package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
)

// DefaultKafkaMaxRecordBytes is the producer's limit on a record batch, so
// on a record, unless [KafkaMaxRecordBytes] says otherwise: franz-go's
// default for kgo.ProducerBatchMaxBytes, 1,000,012 bytes: a little under
// what a Kafka topic takes by default (its max.message.bytes defaults to
// the broker's message.max.bytes, 1,048,588 bytes).
const DefaultKafkaMaxRecordBytes = 1_000_012

// kafkaBatchOverhead is what franz-go counts for a record batch around its
// records (kgo's recordBatchOverhead: the v2 batch header, 61 bytes, and
// the 4-byte length of the produce request's record array) before it
// learned the broker's versions, and for produce requests v3 to v8. From
// v9 on (Kafka 2.4+: flexible requests) it counts 3 bytes less.
const kafkaBatchOverhead = 65

// maxBrokerWriteBytes is franz-go's default kgo.BrokerMaxWriteBytes (Kafka's
// socket.request.max.bytes, 100 MiB), which a producer limit may not pass.
const maxBrokerWriteBytes = 100 << 20

// KafkaMaxRecordBytes sets the producer's limit on a record batch, so on
// the largest record the sink can send, to n bytes (kgo.ProducerBatchMaxBytes,
// as a record batch of its own: see [KafkaRecordBytes]), overriding
// [DefaultKafkaMaxRecordBytes]. 0 keeps the default; n must be 512 to 1 GiB
// (franz-go's bounds), else [Kafka] returns an error naming it. Above 100
// MiB it raises kgo.BrokerMaxWriteBytes to match.
//
// The broker must take as much: the topic's max.message.bytes
// (kafka-configs --alter --add-config max.message.bytes=N), which defaults
// to the broker's message.max.bytes (1,048,588 B), and
// socket.request.max.bytes (100 MiB) for the request. A batch larger
// than the topic allows is refused by the broker (MESSAGE_TOO_LARGE), and
// fails with [ErrRecordTooLarge] too; keep n at or below the topic's
// limit. Consumers of the topic need a fetch size that fits (franz-go and
// the Java client fetch a larger batch alone; older clients may not).
//
// It applies to the client the sink makes: with [KafkaClient], set
// kgo.ProducerBatchMaxBytes on that client instead ([Kafka] returns an
// error for both). A kgo.ProducerBatchMaxBytes in [KafkaClientOpts]
// overrides it.
func KafkaMaxRecordBytes(n int) KafkaOption {
	return kafkaOptionFunc(func(c *kafkaConfig) { c.maxRecordBytes = n })
}

// maxRecordBytesOpts checks KafkaMaxRecordBytes and returns the client
// options it needs: none for the default.
func (c *kafkaConfig) maxRecordBytesOpts() ([]kgo.Opt, error) {
	n := c.maxRecordBytes
	switch {
	case n == 0:
		return nil, nil
	case c.client != nil:
		return nil, errors.New("sink: Kafka: KafkaMaxRecordBytes applies to the client the sink makes, not KafkaClient's: set kgo.ProducerBatchMaxBytes on that client")
	case n < 512 || n > 1<<30:
		return nil, fmt.Errorf("sink: Kafka: KafkaMaxRecordBytes %d: want 512 to %d bytes", n, 1<<30)
	}
	opts := []kgo.Opt{kgo.ProducerBatchMaxBytes(int32(n))}
	if n > maxBrokerWriteBytes {
		opts = append(opts, kgo.BrokerMaxWriteBytes(int32(n)))
	}
	return opts, nil
}

// KafkaRecordBytes returns the bytes rec takes as a Kafka record batch of
// its own, as franz-go counts them against the producer's limit
// ([KafkaMaxRecordBytes]): the 65 bytes of a batch around the record
// (header and array length) and the record in Kafka's v2 format (its
// length, attributes, timestamp and offset deltas, key, value and headers,
// each with its varint length). Its Topic, Partition and Offset are not
// sent and not counted. A record whose KafkaRecordBytes is at most the
// limit is sent; one above it fails with [ErrRecordTooLarge].
//
// franz-go counts 3 bytes less once it knows the broker takes flexible
// produce requests (v9, Kafka 2.4+), and counts the 65 before: a record
// within 3 bytes of the limit may be accepted or refused depending on
// when it comes. The sink counts the 65 always, so its answer does not
// depend on it, and refuses those few records even then.
func KafkaRecordBytes(rec log.Record) int {
	n := 0
	for _, h := range rec.Headers {
		n += fieldBytes(len(h.Key)) + fieldBytes(len(h.Value))
	}
	return batchBytes(len(rec.Key), len(rec.Value), len(rec.Headers), n)
}

// kgoRecordBytes is KafkaRecordBytes of a record as the sink hands it to
// franz-go.
func kgoRecordBytes(r *kgo.Record) int {
	n := 0
	for _, h := range r.Headers {
		n += fieldBytes(len(h.Key)) + fieldBytes(len(h.Value))
	}
	return batchBytes(len(r.Key), len(r.Value), len(r.Headers), n)
}

// batchBytes is the size of a batch of one record with a key and a value of
// those lengths and headers whose fields take headerBytes (kgo's
// recordNumbersAt with zero deltas, wireLength, plus the batch overhead).
func batchBytes(key, value, headers, headerBytes int) int {
	body := 1 + // attributes
		1 + // timestamp delta 0, a varlong
		1 + // offset delta 0, a varint
		fieldBytes(key) + fieldBytes(value) +
		varintBytes(headers) + headerBytes
	return kafkaBatchOverhead + varintBytes(body) + body
}

// fieldBytes is a byte field of n bytes with its varint length.
func fieldBytes(n int) int { return varintBytes(n) + n }

// varintBytes is the length of n as a zigzag varint (Kafka's record
// fields), n >= 0.
func varintBytes(n int) int {
	u := uint64(n) << 1 // zigzag of a non-negative value
	b := 1
	for u >= 0x80 {
		u >>= 7
		b++
	}
	return b
}

// MaxRecordBytes returns the producer's limit on a record batch for the
// sink's topic, as its client has it (kgo.ProducerBatchMaxBytesFn):
// [DefaultKafkaMaxRecordBytes], [KafkaMaxRecordBytes], or what the client
// of [KafkaClient] was given.
func (s *KafkaSink) MaxRecordBytes() int { return s.maxBytes }

// maxRecordBytesOf reads the producer's limit for topic back from cl.
func maxRecordBytesOf(cl *kgo.Client, topic string) int {
	if fn, ok := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
		return int(fn(topic))
	}
	return DefaultKafkaMaxRecordBytes
}

// CheckSize returns nil if the sink can send rec, and otherwise the
// error its write would fail with: a [*ProduceError] naming the sink's
// topic and rec's source topic, partition and offset, wrapping a
// [*RecordTooLargeError] (errors.Is [ErrRecordTooLarge]) with the size
// ([KafkaRecordBytes]) and the limit ([KafkaSink.MaxRecordBytes]). It has
// the signature of a stream.Tap function, to put before the sink with the
// failure policy too large a record should get:
//
//	s.Tap(out.CheckSize, stream.Name("too-large"), stream.Skip()).To(out)
//	s.Tap(out.CheckSize, stream.Name("too-large"), stream.DeadLetter(sink.DeadLetter(dlq))).To(out)
//
// There the policy applies to each record too large, alone: Skip drops it
// (its position is saved past it, counted as skipped), DeadLetter writes
// it, the rest goes on; without a policy the pipeline stops at it, before
// the sink sent any record after it (and mostly before it sent the records
// of its batch before it: a stage busy 10 to 20 ms on a batch hands on
// what it finished). Without the stage the sink's write
// fails instead: the To stage's policy applies to its whole batch, and to
// every other failure of the sink too (an unreachable broker). A broker
// refusing a batch the producer's limit allows (a topic whose
// max.message.bytes is lower) is seen only by the write. ctx is unused.
func (s *KafkaSink) CheckSize(_ context.Context, rec log.Record) error {
	n := KafkaRecordBytes(rec)
	if n <= s.maxBytes {
		return nil
	}
	return &ProduceError{Topic: s.topic, Partition: -1, SourceTopic: rec.Topic, SourcePartition: rec.Partition,
		SourceOffset: rec.Offset, Err: &RecordTooLargeError{Bytes: n, MaxBytes: s.maxBytes}}
}

// errOverLimit marks a record WriteAsync refused before sending it
// (produceError makes it a RecordTooLargeError).
var errOverLimit = errors.New("over the producer's limit")

// tooLarge returns err as a RecordTooLargeError when it says r was too
// large (the sink's own refusal, franz-go's or the broker's
// kerr.MessageTooLarge), and err otherwise.
func (s *KafkaSink) tooLarge(r *kgo.Record, err error) error {
	switch {
	case errors.Is(err, errOverLimit):
		return &RecordTooLargeError{Bytes: kgoRecordBytes(r), MaxBytes: s.maxBytes}
	case errors.Is(err, kerr.MessageTooLarge):
		return &RecordTooLargeError{Bytes: kgoRecordBytes(r), MaxBytes: s.maxBytes, Err: err}
	}
	return err
}
