package log

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Record timestamps the log can trust: the bound on how far ahead of the
// writer's clock an appended timestamp may be (WithMaxTimestampAhead), and a
// topic's timestamp type (WithTimestampType), as Kafka's
// message.timestamp.after.max.ms (KIP-937) and message.timestamp.type.
// Retention's use of timestamps ahead of its clock is in retention.go
// (package doc, "Retention").

// DefaultMaxTimestampAhead is how far ahead of the writer's clock a record's
// timestamp may be when WithMaxTimestampAhead is not given: one hour, Kafka's
// message.timestamp.after.max.ms default since KIP-937.
const DefaultMaxTimestampAhead = time.Hour

// ErrTimestampAhead is returned by an append of a record whose timestamp is
// more than the bound (WithMaxTimestampAhead) ahead of the writer's clock.
// *TimestampAheadError gives the timestamp, the clock and the bound.
var ErrTimestampAhead = errors.New("log: record timestamp too far ahead of the clock")

// TimestampAheadError reports a record refused because its timestamp is
// more than the bound ahead of the writer's clock. It matches
// ErrTimestampAhead.
type TimestampAheadError struct {
	Topic     string
	Partition int32
	Timestamp int64         // the record's timestamp, in milliseconds since the Unix epoch
	Clock     int64         // the writer's clock at the append, in milliseconds since the Unix epoch
	Bound     time.Duration // the bound (WithMaxTimestampAhead)
}

// Error names the coordinates, as the type doc lists them. How far ahead
// is a time.Duration ("2h0m0s"), or a count of days for a span too long for
// one (over about 292 years: a year misread as 2999).
func (e *TimestampAheadError) Error() string {
	var ahead any = time.Duration(e.Timestamp-e.Clock) * time.Millisecond
	if d := e.Timestamp - e.Clock; d > math.MaxInt64/int64(time.Millisecond) || d < math.MinInt64/int64(time.Millisecond) {
		ahead = fmt.Sprintf("%d days", d/(24*time.Hour).Milliseconds())
	}
	return fmt.Sprintf("log: topic %s partition %d: record timestamp %d (%s) is %v ahead of the writer's clock %d (%s), more than the bound of %v",
		e.Topic, e.Partition,
		e.Timestamp, time.UnixMilli(e.Timestamp).UTC().Format(time.RFC3339Nano),
		ahead,
		e.Clock, time.UnixMilli(e.Clock).UTC().Format(time.RFC3339Nano), e.Bound)
}

// Unwrap returns ErrTimestampAhead.
func (e *TimestampAheadError) Unwrap() error { return ErrTimestampAhead }

// WithMaxTimestampAhead sets how far ahead of the writer's clock a record's
// timestamp may be, overriding DefaultMaxTimestampAhead (one hour): an
// append holding a record stamped further ahead fails with a
// *TimestampAheadError (ErrTimestampAhead) and stores none of its records.
// The bound is kept in whole milliseconds (rounded down). 0 or a negative d
// turns the check off (any timestamp is stored, as before the check
// existed). It applies to topics of create time (the default timestamp
// type); a topic of log append time stores the writer's clock instead of
// the record's timestamp, so nothing is refused. Past timestamps are never
// refused.
func WithMaxTimestampAhead(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxTimestampAhead = d })
}

// TimestampType says where the timestamps a topic stores come from, as
// Kafka's message.timestamp.type.
type TimestampType int8

const (
	// CreateTime, the default, stores the timestamp each record carries
	// (the producer's), the current time in milliseconds for a zero
	// Timestamp. A timestamp more than WithMaxTimestampAhead ahead of the
	// writer's clock is refused.
	CreateTime TimestampType = 0
	// LogAppendTime stores the writer's clock at the append, in
	// milliseconds, whatever timestamp the record carries. Reads return the
	// stored time.
	LogAppendTime TimestampType = 1
)

// String returns "CreateTime" or "LogAppendTime" (Kafka's names), which
// ParseTimestampType accepts.
func (tt TimestampType) String() string {
	switch tt {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return fmt.Sprintf("TimestampType(%d)", int(tt))
}

// ParseTimestampType parses "CreateTime" or "LogAppendTime" (String's
// names), or the lower-case "create" and "append".
func ParseTimestampType(s string) (TimestampType, error) {
	switch s {
	case "CreateTime", "create":
		return CreateTime, nil
	case "LogAppendTime", "append":
		return LogAppendTime, nil
	}
	return 0, fmt.Errorf("log: unknown timestamp type %q (want CreateTime or LogAppendTime)", s)
}

func (tt TimestampType) valid() bool { return tt == CreateTime || tt == LogAppendTime }

// WithTimestampType sets the topic's timestamp type (CreateTime, the
// default, or LogAppendTime). It is stored in the topic's topic.json
// ("timestampType":"LogAppendTime"; absent means CreateTime, the form of
// versions before the option) and survives
// reopening. Given to CreateTopic of an existing topic, it replaces the
// stored value; appends in flight use the type they started with. An
// unknown type fails CreateTopic.
func WithTimestampType(tt TimestampType) TopicOption {
	return topicOptionFunc(func(o *topicOptions) { o.timestampType = &tt })
}

// TimestampType returns the topic's timestamp type (WithTimestampType). On a
// log opened read-only it is the type stored when the topic was opened.
func (t *Topic) TimestampType() TimestampType {
	if len(t.partitions) == 0 {
		return CreateTime
	}
	return TimestampType(t.partitions[0].tsType.Load())
}

// storeMeta makes the options stored in m those of the open topic: its
// retention policy, its timestamp type and its cleanup policy; and its ID.
func (t *Topic) storeMeta(m topicMeta) {
	t.retention.store(m)
	id := m.ID
	t.id.Store(&id)
	tt := int32(CreateTime)
	if m.TimestampType == LogAppendTime.String() {
		tt = int32(LogAppendTime)
	}
	cp, _ := parseStoredPolicy(m.CleanupPolicy) // checked by loadTopicMeta, or written by applyTo
	for _, p := range t.partitions {
		p.tsType.Store(tt)
		p.policy.Store(int32(cp))
	}
}

// checkRecords checks recs, to be appended to partition id of topic of
// timestamp type tsType, against the log's rules before any of them is
// accepted, in one pass: every frame fits a segment
// (RecordTooLargeError) and no timestamp of create time is beyond the bound
// (TimestampAheadError), and, on a compacted topic (keyRequired), every
// record has a key (KeyRequiredError). It returns the clock reading, in milliseconds, that
// replaces zero timestamps, and every timestamp when logAppend (a topic of
// log append time), 0 when nothing is replaced; and the bytes the frames of
// recs take. It reads the clock at most once: not at all for a topic of
// create time with the bound off and no zero timestamp.
func checkRecords(cfg *config, topic string, id int32, tsType TimestampType, keyRequired bool, recs []Record) (now int64, logAppend bool, frameBytes int, err error) {
	logAppend = tsType == LogAppendTime
	bound := cfg.maxTimestampAhead.Milliseconds()
	for i := range recs {
		r := &recs[i]
		if keyRequired && r.Key == nil {
			return 0, false, 0, &KeyRequiredError{Topic: topic, Partition: id, Index: i}
		}
		n := frameSize(r)
		if int64(n) > cfg.segmentBytes {
			return 0, false, 0, &RecordTooLargeError{Topic: topic, Partition: id, FrameBytes: int64(n), SegmentBytes: cfg.segmentBytes}
		}
		frameBytes += n
		// checkAhead reads the clock; once it has, only a timestamp beyond
		// the bound needs it again (for the error).
		if ts := r.Timestamp; !logAppend && (now == 0 || bound > 0 && ts > now && ts-now > bound) {
			if now, err = checkAhead(cfg, topic, id, r.Timestamp, now); err != nil {
				return 0, false, 0, err
			}
		}
	}
	if logAppend && len(recs) > 0 {
		now = cfg.now().UnixMilli()
	}
	return now, logAppend, frameBytes, nil
}

// checkAhead checks one record timestamp ts of create time against the
// bound, reading the clock into now when now is 0 and the reading is needed
// (the bound is on, or ts is zero). It returns now.
func checkAhead(cfg *config, topic string, partition int32, ts, now int64) (int64, error) {
	bound := cfg.maxTimestampAhead.Milliseconds()
	if ts != 0 && bound <= 0 {
		return now, nil
	}
	if now == 0 {
		now = cfg.now().UnixMilli()
	}
	if ts != 0 && ts > now && ts-now > bound { // ts > now first: ts-now cannot overflow
		return now, &TimestampAheadError{Topic: topic, Partition: partition, Timestamp: ts, Clock: now,
			Bound: time.Duration(bound) * time.Millisecond}
	}
	return now, nil
}
