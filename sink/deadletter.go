package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// Header keys a [DeadLetterSink] adds to every dead letter, after the
// original record's own headers. Values are text: the error's message, the
// stage's name, and decimal numbers for partition, offset and attempt.
const (
	HeaderError     = "strom.error"     // Failure.Err.Error()
	HeaderStage     = "strom.stage"     // Failure.Stage: "map", "sink", or the stage's Name
	HeaderTopic     = "strom.topic"     // Failure.Topic: the source topic; "" without lineage
	HeaderPartition = "strom.partition" // Failure.Partition, decimal
	HeaderOffset    = "strom.offset"    // Failure.Offset, decimal: the failed record's source offset
	HeaderAttempt   = "strom.attempt"   // Failure.Attempt, decimal: 1 without Retry, the last attempt with it
	// HeaderEncoding is added only when the value was neither a log.Record,
	// []byte nor string: "json" when it was encoded with encoding/json,
	// "fmt" when JSON could not encode it and fmt.Sprintf("%+v") did.
	HeaderEncoding = "strom.encoding"
)

// DeadLetterSink writes the records a stage gave up on to a topic of a
// [log.Log], as a stream.Sink[stream.Failure]: pass it to stream.DeadLetter.
// Build it with [DeadLetter].
//
// Each [stream.Failure] becomes one record:
//
//   - a Failure whose Value is a log.Record (a stage over a log source)
//     keeps that record's Key, Value and Timestamp, and its own headers
//     come first; so the dead letter can be appended back to the source
//     topic, or read by the same code, once the cause is fixed;
//   - a []byte or a string Value is the record's value, with no key;
//   - any other Value is encoded with encoding/json (header
//     [HeaderEncoding] "json"), or, when JSON cannot encode it (a channel,
//     a func, a cycle), with fmt.Sprintf("%+v") ([HeaderEncoding] "fmt");
//     a nil Value is a record with a nil value;
//
// and the headers [HeaderError], [HeaderStage], [HeaderTopic],
// [HeaderPartition], [HeaderOffset] and [HeaderAttempt] follow, naming what
// failed, where, and on which attempt.
//
// The partition is picked as [LogSink] picks it: by key with Kafka's murmur2
// partitioner, so a dead letter of a keyed record lands in the same
// partition number as the original when the dead-letter topic has as many
// partitions; round-robin without a key. [Synced] applies as for [Log].
//
// A DeadLetterSink is safe for concurrent use as far as the topic's Append
// is (a Parallel stage calls it from several goroutines).
type DeadLetterSink struct {
	t   *log.Topic
	cfg logConfig
}

// The interface a DeadLetterSink implements.
var _ stream.Sink[stream.Failure] = (*DeadLetterSink)(nil)

// DeadLetter returns a dead-letter sink appending to t, for
// stream.DeadLetter:
//
//	dlq, err := lg.CreateTopic("orders.dlq", 1)
//	...
//	s := stream.MapTo(src, parse, stream.DeadLetter(sink.DeadLetter(dlq)))
//
// The topic and its log stay the caller's: the sink never closes them. t
// must come from a log opened for writing.
func DeadLetter(t *log.Topic, opts ...LogOption) *DeadLetterSink {
	cfg := defaultLogConfig()
	for _, o := range opts {
		if o != nil {
			o.applyLog(&cfg)
		}
	}
	return &DeadLetterSink{t: t, cfg: cfg}
}

// Write appends one record per failure, in order (see [DeadLetterSink]),
// and with [Synced] syncs the partitions written before it returns.
//
// On failure it stops at the first failure it could not append and returns
// a [*TopicError] naming the dead-letter topic, whose cause names the stage
// and the source record of that dead letter and wraps the log's error; the
// dead letters before it stay appended. The pipeline then stops with a
// *stream.DeadLetterError wrapping both this error and the stage's, which
// the stage's OnError hooks see too (see stream.DeadLetter), and the
// failed record's position is not saved. A nil topic is [ErrNilTopic].
func (s *DeadLetterSink) Write(ctx context.Context, failures []stream.Failure) error {
	if s.t == nil {
		return ErrNilTopic
	}
	recs := make([]log.Record, len(failures))
	for i := range failures {
		recs[i] = DeadLetterRecord(failures[i])
	}
	f := &failures[0]
	return appendRecords(ctx, s.t, s.cfg, recs, fmt.Sprintf("writing %d dead letters (the first: stage %s, %s/%d offset %d)",
		len(failures), f.Stage, f.Topic, f.Partition, f.Offset))
}

// DeadLetterRecord returns the record a [DeadLetterSink] appends for f: the
// original key, value and timestamp (or the value encoded as described
// there) and the headers naming the failure. It is exported for sinks that
// write dead letters elsewhere (Kafka, a file) in the same shape.
func DeadLetterRecord(f stream.Failure) log.Record {
	var r log.Record
	var own []log.Header
	enc := ""
	switch v := f.Value.(type) {
	case log.Record:
		r.Key, r.Value, r.Timestamp, own = v.Key, v.Value, v.Timestamp, v.Headers
	case *log.Record:
		if v != nil {
			r.Key, r.Value, r.Timestamp, own = v.Key, v.Value, v.Timestamp, v.Headers
		}
	case []byte:
		r.Value = v
	case string:
		r.Value = []byte(v)
	case nil:
	default:
		if b, err := json.Marshal(v); err == nil {
			r.Value, enc = b, "json"
		} else {
			r.Value, enc = fmt.Appendf(nil, "%+v", v), "fmt"
		}
	}
	errText := ""
	if f.Err != nil {
		errText = f.Err.Error()
	}
	n := len(own) + 6
	if enc != "" {
		n++
	}
	h := make([]log.Header, 0, n)
	h = append(h, own...)
	h = append(h,
		log.Header{Key: HeaderError, Value: []byte(errText)},
		log.Header{Key: HeaderStage, Value: []byte(f.Stage)},
		log.Header{Key: HeaderTopic, Value: []byte(f.Topic)},
		log.Header{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(f.Partition), 10)},
		log.Header{Key: HeaderOffset, Value: strconv.AppendInt(nil, f.Offset, 10)},
		log.Header{Key: HeaderAttempt, Value: strconv.AppendInt(nil, int64(f.Attempt), 10)},
	)
	if enc != "" {
		h = append(h, log.Header{Key: HeaderEncoding, Value: []byte(enc)})
	}
	r.Headers = h
	return r
}
