package sink_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// headers returns h as a map of key to value text (the last value wins) and
// the keys in order.
func headers(h []log.Header) (map[string]string, []string) {
	m := make(map[string]string, len(h))
	keys := make([]string, 0, len(h))
	for _, x := range h {
		m[x.Key] = string(x.Value)
		keys = append(keys, x.Key)
	}
	return m, keys
}

// TestDeadLetterKeepsTheOriginalRecordAndNamesTheFailure ensures a failure
// over a log.Record is written with the record's key, value, timestamp and
// own headers first, then the strom.* headers, into the partition Kafka's
// partitioner picks for the key.
func TestDeadLetterKeepsTheOriginalRecordAndNamesTheFailure(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			dlq, err := lg.CreateTopic("orders.dlq", 3)
			require.NoError(t, err)
			orig := log.Record{
				Key: []byte("alice"), Value: []byte("not json"), Timestamp: 1700000000123,
				Headers: []log.Header{{Key: "trace", Value: []byte("t-1")}},
				Topic:   "orders", Partition: 2, Offset: 41,
			}
			f := stream.Failure{Stage: "parse", Topic: "orders", Partition: 2, Offset: 41, Attempt: 3,
				Err: errors.New("invalid character 'o'"), Value: orig}
			require.NoError(t, sink.DeadLetter(dlq).Write(context.Background(), []stream.Failure{f}))

			want := log.KafkaPartition([]byte("alice"), 3)
			got := readPartition(t, dlq, want)
			require.Len(t, got, 1)
			r := got[0]
			require.Equal(t, "alice", string(r.Key))
			require.Equal(t, "not json", string(r.Value))
			require.Equal(t, int64(1700000000123), r.Timestamp)
			h, keys := headers(r.Headers)
			require.Equal(t, []string{"trace", sink.HeaderError, sink.HeaderStage, sink.HeaderTopic,
				sink.HeaderPartition, sink.HeaderOffset, sink.HeaderAttempt}, keys)
			require.Equal(t, "t-1", h["trace"])
			require.Equal(t, "invalid character 'o'", h[sink.HeaderError])
			require.Equal(t, "parse", h[sink.HeaderStage])
			require.Equal(t, "orders", h[sink.HeaderTopic])
			require.Equal(t, "2", h[sink.HeaderPartition])
			require.Equal(t, "41", h[sink.HeaderOffset])
			require.Equal(t, "3", h[sink.HeaderAttempt])
			require.Len(t, orig.Headers, 1, "the original record's headers are not appended to")
		})
	}
}

// TestDeadLetterRecordEncodesOtherValues pins the value rule: bytes and
// strings as they are, other values as JSON, values JSON refuses with
// fmt's %+v, nil as a nil value; only the encoded ones carry
// strom.encoding.
func TestDeadLetterRecordEncodesOtherValues(t *testing.T) {
	type order struct {
		ID    int    `json:"id"`
		Owner string `json:"owner"`
	}
	ch := make(chan int)
	for _, tc := range []struct {
		name  string
		value any
		want  string
		enc   string
	}{
		{"bytes", []byte("raw\x00bytes"), "raw\x00bytes", ""},
		{"string", "garbage line", "garbage line", ""},
		{"struct", order{ID: 7, Owner: "bob"}, `{"id":7,"owner":"bob"}`, "json"},
		{"int", 42, "42", "json"},
		{"func", struct{ F func() }{}, "{F:<nil>}", "fmt"},
		{"chan", ch, "", "fmt"},
		{"nil", nil, "", ""},
		{"record pointer", &log.Record{Key: []byte("k"), Value: []byte("v")}, "v", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sink.DeadLetterRecord(stream.Failure{Stage: "map", Offset: 5, Attempt: 1,
				Err: errors.New("boom"), Value: tc.value})
			if tc.name == "chan" {
				require.Contains(t, string(r.Value), "0x", "a channel prints as its address")
			} else {
				require.Equal(t, tc.want, string(r.Value))
			}
			if tc.name == "nil" {
				require.Nil(t, r.Value)
			}
			h, keys := headers(r.Headers)
			require.Equal(t, "boom", h[sink.HeaderError])
			require.Equal(t, "5", h[sink.HeaderOffset])
			require.Equal(t, "", h[sink.HeaderTopic])
			require.Equal(t, "0", h[sink.HeaderPartition])
			if tc.enc == "" {
				require.NotContains(t, keys, sink.HeaderEncoding)
			} else {
				require.Equal(t, tc.enc, h[sink.HeaderEncoding])
				require.Equal(t, sink.HeaderEncoding, keys[len(keys)-1])
			}
			if tc.name != "record pointer" {
				require.Nil(t, r.Key, "only a record's key is kept")
			}
		})
	}
}

// TestDeadLetterRecordWithoutAnError ensures a Failure with a nil Err (a
// hand-made one) still gets every header, the error's empty.
func TestDeadLetterRecordWithoutAnError(t *testing.T) {
	r := sink.DeadLetterRecord(stream.Failure{Value: "x"})
	h, keys := headers(r.Headers)
	require.Len(t, keys, 6)
	require.Equal(t, "", h[sink.HeaderError])
}

// TestDeadLetterWriteErrorNamesTheDeadLetterTopic ensures a failed append
// comes back as a *TopicError naming the dead-letter topic, the stage and
// the source record, wrapping the log's error.
func TestDeadLetterWriteErrorNamesTheDeadLetterTopic(t *testing.T) {
	w := testutil.OpenLog(t, log.ModeFile)
	_, err := w.CreateTopic("in.dlq", 1)
	require.NoError(t, err)
	r, err := log.Open(w.Dir(), log.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	tp, err := r.Topic("in.dlq")
	require.NoError(t, err)

	err = sink.DeadLetter(tp).Write(context.Background(), []stream.Failure{
		{Stage: "parse", Topic: "in", Partition: 0, Offset: 1001, Attempt: 1, Err: errors.New("bad"), Value: "garbage line"},
	})
	require.ErrorIs(t, err, log.ErrReadOnly)
	var te *sink.TopicError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "in.dlq", te.Topic)
	require.Contains(t, err.Error(), "sink: topic in.dlq: writing 1 dead letters (the first: stage parse, in/0 offset 1001): ")

	require.ErrorIs(t, sink.DeadLetter(nil).Write(context.Background(), nil), sink.ErrNilTopic)
}

// TestDeadLetterSyncedWritesAreReadableAfterReopen ensures Synced applies to
// dead letters as to the log sink.
func TestDeadLetterSyncedWritesAreReadableAfterReopen(t *testing.T) {
	dir := t.TempDir()
	lg, err := log.Open(dir)
	require.NoError(t, err)
	tp, err := lg.CreateTopic("dlq", 2)
	require.NoError(t, err)
	fs := []stream.Failure{
		{Stage: "map", Offset: 1, Attempt: 1, Err: errors.New("a"), Value: log.Record{Key: []byte("k1"), Value: []byte("v1")}},
		{Stage: "map", Offset: 2, Attempt: 1, Err: errors.New("b"), Value: log.Record{Key: []byte("k2"), Value: []byte("v2")}},
	}
	require.NoError(t, sink.DeadLetter(tp, sink.Synced()).Write(context.Background(), fs))
	require.NoError(t, lg.Close())

	lg, err = log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lg.Close()) })
	tp, err = lg.Topic("dlq")
	require.NoError(t, err)
	n := 0
	for id := range int32(2) {
		for _, r := range readPartition(t, tp, id) {
			require.Equal(t, log.KafkaPartition(r.Key, 2), id)
			n++
		}
	}
	require.Equal(t, 2, n)
}
