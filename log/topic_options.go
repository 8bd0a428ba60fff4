package log

import (
	"time"
)

// TopicOption configures a topic in CreateTopic: RetentionBytes,
// Retention, WithTimestampType, WithCleanupPolicy and TombstoneRetention.
type TopicOption interface{ applyTopic(*topicOptions) }

type topicOptionFunc func(*topicOptions)

func (f topicOptionFunc) applyTopic(o *topicOptions) { f(o) }

// topicOptions are the options given to one CreateTopic call; nil means "not
// given", so a CreateTopic of an existing topic keeps what is stored.
type topicOptions struct {
	retentionBytes *int64
	retentionMs    *int64
	timestampType  *TimestampType // timestamp.go
	cleanupPolicy  *CleanupPolicy // cleanup_policy.go
	tombstoneMs    *int64         // cleanup_policy.go
}

// RetentionBytes bounds the size of each partition of the topic, in bytes,
// as Kafka's retention.bytes does: a retention check deletes the oldest
// segment for as long as what remains still holds at least n bytes, so a
// partition keeps between n bytes and n plus one segment (the active segment
// is never deleted, whatever its size). 0 keeps only the active segment. A
// negative n (-1 by convention) means unlimited, the default.
//
// Given to CreateTopic of an existing topic, it replaces the stored value.
func RetentionBytes(n int64) TopicOption {
	return topicOptionFunc(func(o *topicOptions) {
		n := max(n, -1)
		o.retentionBytes = &n
	})
}

// Retention bounds the age of the topic's records, as Kafka's retention.ms
// does: a retention check deletes the oldest segment while the newest
// timestamp of the records it holds is more than d before the time of the
// check. A newest timestamp ahead of the time of the check is not trusted:
// such a segment is aged by its file's modification time instead (Kafka's
// fallback), so a record stamped in the future cannot keep its segment, or
// those after it, and a clock stepped backwards deletes nothing early
// (package doc, "Retention"). d is kept in whole milliseconds (rounded
// down). A negative d (-1 by convention) means unlimited, the default.
//
// Given to CreateTopic of an existing topic, it replaces the stored value.
func Retention(d time.Duration) TopicOption {
	return topicOptionFunc(func(o *topicOptions) {
		ms := int64(-1)
		if d >= 0 {
			ms = d.Milliseconds()
		}
		o.retentionMs = &ms
	})
}

// applyTo stores the given options in m and reports whether m changed.
// Unlimited is stored as an absent field.
func (o *topicOptions) applyTo(m *topicMeta) bool {
	changed := false
	set := func(dst **int64, v *int64) {
		if v == nil {
			return
		}
		var nv *int64
		if *v >= 0 {
			nv = v
		}
		if (*dst == nil) != (nv == nil) || (*dst != nil && **dst != *nv) {
			*dst, changed = nv, true
		}
	}
	set(&m.RetentionBytes, o.retentionBytes)
	set(&m.RetentionMs, o.retentionMs)
	if o.timestampType != nil {
		tt := ""
		if *o.timestampType != CreateTime {
			tt = o.timestampType.String()
		}
		if m.TimestampType != tt {
			m.TimestampType, changed = tt, true
		}
	}
	if o.tombstoneMs != nil && (m.DeleteRetentionMs == nil || *m.DeleteRetentionMs != *o.tombstoneMs) {
		ms := *o.tombstoneMs
		m.DeleteRetentionMs, changed = &ms, true
	}
	if o.cleanupPolicy != nil {
		cp := ""
		if *o.cleanupPolicy != CleanupDelete {
			cp = o.cleanupPolicy.String()
		}
		if m.CleanupPolicy != cp {
			m.CleanupPolicy, changed = cp, true
		}
	}
	return changed
}
