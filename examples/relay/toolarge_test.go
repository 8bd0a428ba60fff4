package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
)

// relayWait bounds every wait of these tests; a passing run takes far less.
const relayWait = time.Minute

// bigValue is the value the issue relayed: 1,000,000 bytes, over the
// producer's default limit once framed.
const bigValue = 1_000_000

// tooLargeSetup makes a log in a temporary folder whose topic "mid" holds
// "before", a 1,000,000-byte value and "after" (offsets 0, 1, 2), a Kafka
// cluster with topic "back", and the relay log-to-kafka between them with
// args after the required flags.
func tooLargeSetup(t *testing.T, kc *kafkatest.Cluster, args ...string) (*relay, *log.Log, string) {
	t.Helper()
	for _, v := range []string{"STROM_KAFKA_BALANCER", "STROM_MAX_RECORD_BYTES", "STROM_ON_TOO_LARGE", "STROM_DEAD_LETTER",
		"STROM_EXACTLY_ONCE", "STROM_TRANSACTIONAL_ID"} {
		t.Setenv(v, "")
	}
	dir, state := t.TempDir(), t.TempDir()
	lg, err := log.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	mid, err := lg.CreateTopic("mid", 1)
	require.NoError(t, err)
	require.NoError(t, mid.AppendBatch(context.Background(), []log.Record{
		{Key: []byte("a"), Value: []byte("before")},
		{Key: []byte("b"), Value: bytes.Repeat([]byte("x"), bigValue)},
		{Key: []byte("c"), Value: []byte("after")},
	}))
	cfg, err := parseFlags(append([]string{"--direction", toKafka, "--brokers", kc.Brokers()[0], "--dir", dir,
		"--from", "mid", "--to", "back", "--state", state, "--timeout", "10s"}, args...))
	require.NoError(t, err)
	return &relay{cfg: cfg, lastIn: map[int32]int64{}, lastOut: map[int32]int64{}, positions: map[int32]int64{}}, lg, state
}

// startRelay runs the relay's log-to-kafka pipeline until ctx ends and
// returns the channel of its result.
func startRelay(t *testing.T, ctx context.Context, r *relay, lg *log.Log) <-chan error {
	t.Helper()
	pipeline, err := r.logToKafka(ctx, lg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- pipeline(ctx) }()
	return done
}

// waitFor polls cond every 20ms until it holds, failing t after relayWait
// or at once when the relay ended.
func waitFor(t *testing.T, what string, done <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.After(relayWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("the relay ended (%v) before %s", err, what)
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// position is the relay's saved position of mid/0 in its FileStore.
func position(t *testing.T, state string) int64 {
	t.Helper()
	st, err := checkpoint.NewFileStore(state)
	require.NoError(t, err)
	pos, found, err := st.Load(context.Background(), "mid", 0)
	require.NoError(t, err)
	if !found {
		return -1
	}
	return pos.Offset
}

func backValues(t *testing.T, kc *kafkatest.Cluster) []string {
	var out []string
	for _, r := range kc.Records(t, "back") {
		out = append(out, string(r.Value))
	}
	return out
}

// TestRelayStopsOnARecordTooLargeForKafkaNamingIt ensures log-to-kafka
// with the default settings stops, instead of retrying forever, at a
// 1,000,000-byte value (over franz-go's default ProducerBatchMaxBytes of
// 1,000,012 bytes once framed), with an error matching
// sink.ErrRecordTooLarge that names the Kafka topic, the log topic,
// partition and offset, the size and the limit; the record before it is
// in Kafka and the position never passes the record.
func TestRelayStopsOnARecordTooLargeForKafkaNamingIt(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
	r, lg, state := tooLargeSetup(t, kc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRelay(t, ctx, r, lg)
	var err error
	select {
	case err = <-done:
	case <-time.After(relayWait):
		t.Fatal("the relay is still running: it retries the record too large")
	}
	require.ErrorIs(t, err, sink.ErrRecordTooLarge)
	var big *sink.RecordTooLargeError
	require.ErrorAs(t, err, &big)
	for _, s := range []string{"kafka topic back", "mid/0 offset 1", strconv.Itoa(big.Bytes) + " bytes", "limit of 1000012 bytes"} {
		assert.Contains(t, err.Error(), s)
	}
	assert.Greater(t, big.Bytes, sink.DefaultKafkaMaxRecordBytes)
	assert.False(t, r.retrySink(err), "not retried")
	assert.LessOrEqual(t, position(t, state), int64(1), "the position passed the record too large")
	assert.NotContains(t, backValues(t, kc), "after")
}

// TestRelaySkipsARecordTooLargeAndSavesThePositionPastIt ensures
// --on-too-large=skip drops the record too large and goes on: the records
// after it reach Kafka and the position is saved past it; the relay logs
// one line on stderr for the record, naming its topic, partition, offset,
// size and the limit, and /stats counts it as skipped.
func TestRelaySkipsARecordTooLargeAndSavesThePositionPastIt(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
	r, lg, state := tooLargeSetup(t, kc, "--on-too-large", "skip")
	stderr := &lockedBuffer{}
	r.stderr = stderr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRelay(t, ctx, r, lg)
	waitFor(t, "the position past the last record", done, func() bool { return position(t, state) == 3 })

	rec := httptest.NewRecorder()
	r.handleStats(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
	var stats struct{ Skipped int64 }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &stats))
	assert.Equal(t, int64(1), stats.Skipped, "/stats skipped")

	cancel()
	require.NoError(t, ignoreCanceled(<-done))
	assert.Equal(t, []string{"before", "after"}, backValues(t, kc))

	var skipped []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "skipped") {
			skipped = append(skipped, l)
		}
	}
	require.Len(t, skipped, 1, "one line per record skipped:\n%s", stderr.String())
	size := sink.KafkaRecordBytes(log.Record{Key: []byte("b"), Value: bytes.Repeat([]byte("x"), bigValue), Headers: []log.Header{
		{Key: headerPartition, Value: []byte("0")}, {Key: headerOffset, Value: []byte("1")}}})
	assert.Equal(t, fmt.Sprintf("relay log-to-kafka: skipped a record too large for Kafka topic back (--on-too-large=skip): "+
		"log topic mid partition 0 offset 1, %d bytes over the limit of 1000012 bytes (--max-record-bytes)", size), skipped[0])
}

// lockedBuffer is a bytes.Buffer safe for the relay's goroutines and the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRelayDeadLettersARecordTooLargeToTheLogTopic ensures
// --on-too-large=dead-letter appends the record too large, whole, to the
// log topic --dead-letter with headers naming the error and its offset,
// and goes on past it.
func TestRelayDeadLettersARecordTooLargeToTheLogTopic(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
	r, lg, state := tooLargeSetup(t, kc, "--on-too-large", "dead-letter", "--dead-letter", "mid.too-large")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRelay(t, ctx, r, lg)
	waitFor(t, "the position past the last record", done, func() bool { return position(t, state) == 3 })
	cancel()
	require.NoError(t, ignoreCanceled(<-done))
	assert.Equal(t, []string{"before", "after"}, backValues(t, kc))

	dlq, err := lg.Topic("mid.too-large")
	require.NoError(t, err)
	p, err := dlq.Partition(0)
	require.NoError(t, err)
	recs, err := p.Replay(0).Next(context.Background(), 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Len(t, recs[0].Value, bigValue)
	hs := map[string]string{}
	for _, h := range recs[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	assert.Equal(t, "1", hs[sink.HeaderOffset])
	assert.Equal(t, "mid", hs[sink.HeaderTopic])
	assert.Contains(t, hs[sink.HeaderError], "record too large for Kafka")
	assert.Equal(t, "1", hs[headerOffset], "the relay's own headers are kept")
}

// TestRelayDeliversALargeRecordWithMaxRecordBytesRaised ensures
// --max-record-bytes raises the producer's limit: with it at the broker's
// message.max.bytes (1,048,588, kfake's default) the 1,000,000-byte value
// reaches Kafka whole, between the others.
func TestRelayDeliversALargeRecordWithMaxRecordBytesRaised(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
	r, lg, state := tooLargeSetup(t, kc, "--max-record-bytes", "1048588")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startRelay(t, ctx, r, lg)
	waitFor(t, "the position past the last record", done, func() bool { return position(t, state) == 3 })
	cancel()
	require.NoError(t, ignoreCanceled(<-done))
	got := kc.Records(t, "back")
	require.Len(t, got, 3)
	assert.Equal(t, "before", string(got[0].Value))
	assert.Len(t, got[1].Value, bigValue)
	assert.Equal(t, "after", string(got[2].Value))
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// TestTooLargeAndBalancerFlags ensures --max-record-bytes, --on-too-large
// and --dead-letter are log-to-kafka's and --balancer kafka-to-log's, that
// each bad value or combination is refused with an error saying why, and
// that the environment variables set them too.
func TestTooLargeAndBalancerFlags(t *testing.T) {
	for _, v := range []string{"STROM_KAFKA_BALANCER", "STROM_MAX_RECORD_BYTES", "STROM_ON_TOO_LARGE", "STROM_DEAD_LETTER",
		"STROM_EXACTLY_ONCE", "STROM_TRANSACTIONAL_ID"} {
		t.Setenv(v, "")
	}
	base := []string{"--brokers", "b:9092", "--dir", "d", "--from", "mid", "--to", "back"}
	toKafkaArgs := append([]string{"--direction", toKafka, "--state", "s"}, base...)
	toLogArgs := append([]string{"--direction", toLog}, base...)

	cfg, err := parseFlags(toKafkaArgs)
	require.NoError(t, err)
	assert.Equal(t, sink.DefaultKafkaMaxRecordBytes, cfg.maxRecord)
	assert.Equal(t, tooLargeFail, cfg.onTooLarge)
	cfg, err = parseFlags(toLogArgs)
	require.NoError(t, err)
	assert.Equal(t, []string{"cooperative-sticky", "range"}, cfg.balancers)

	cfg, err = parseFlags(append(toLogArgs, "--balancer", "range, roundrobin"))
	require.NoError(t, err)
	assert.Equal(t, []string{"range", "roundrobin"}, cfg.balancers)
	t.Setenv("STROM_KAFKA_BALANCER", "cooperative-sticky")
	cfg, err = parseFlags(toLogArgs)
	require.NoError(t, err)
	assert.Equal(t, []string{"cooperative-sticky"}, cfg.balancers)
	t.Setenv("STROM_KAFKA_BALANCER", "")
	t.Setenv("STROM_MAX_RECORD_BYTES", "2000000")
	t.Setenv("STROM_ON_TOO_LARGE", "skip")
	cfg, err = parseFlags(toKafkaArgs)
	require.NoError(t, err)
	assert.Equal(t, 2_000_000, cfg.maxRecord)
	assert.Equal(t, tooLargeSkip, cfg.onTooLarge)
	t.Setenv("STROM_MAX_RECORD_BYTES", "")
	t.Setenv("STROM_ON_TOO_LARGE", "")
	cfg, err = parseFlags(append(toKafkaArgs, "--on-too-large", "dead-letter", "--dead-letter", "mid.dlq"))
	require.NoError(t, err)
	assert.Equal(t, "mid.dlq", cfg.deadLetter)

	for _, c := range []struct {
		args []string
		want string
	}{
		{append(toLogArgs, "--balancer", "round-robin"), `balancer "round-robin"`},
		{append(toLogArgs, "--balancer", "range,range"), `"range" given twice`},
		{append(toKafkaArgs, "--balancer", "range"), `--balancer "range" is for kafka-to-log`},
		{append(toLogArgs, "--max-record-bytes", "2000000"), "are for log-to-kafka"},
		{append(toLogArgs, "--on-too-large", "skip"), "are for log-to-kafka"},
		{append(toKafkaArgs, "--max-record-bytes", "100"), "--max-record-bytes 100: want 512"},
		{append(toKafkaArgs, "--on-too-large", "drop"), `--on-too-large "drop": want fail, skip or dead-letter`},
		{append(toKafkaArgs, "--on-too-large", "dead-letter"), `--on-too-large "dead-letter" needs --dead-letter`},
		{append(toKafkaArgs, "--dead-letter", "mid.dlq"), `--dead-letter "mid.dlq" is for --on-too-large=dead-letter`},
		{append(toKafkaArgs, "--on-too-large", "dead-letter", "--dead-letter", "mid"), "the topic the relay reads"},
		{append(toKafkaArgs, "--on-too-large", "dead-letter", "--dead-letter", "a/b"), "--dead-letter"},
		{append(toKafkaArgs, "--on-too-large", "dead-letter", "--dead-letter", "mid.dlq", "--exactly-once"), "cannot join the Kafka transaction"},
	} {
		_, err := parseFlags(c.args)
		require.ErrorContains(t, err, c.want, fmt.Sprint(c.args))
	}
}

// TestRelayExactlyOnceStopsOnOrSkipsARecordTooLarge ensures the same under
// --exactly-once: by default the relay stops with sink.ErrRecordTooLarge
// instead of retrying the transaction forever; with --on-too-large=skip
// the records around it are committed, each once, for a read_committed
// reader.
func TestRelayExactlyOnceStopsOnOrSkipsARecordTooLarge(t *testing.T) {
	t.Run("fail", func(t *testing.T) {
		kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
		r, lg, _ := tooLargeSetup(t, kc, "--exactly-once")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := startRelay(t, ctx, r, lg)
		select {
		case err := <-done:
			require.ErrorIs(t, err, sink.ErrRecordTooLarge)
			assert.Contains(t, err.Error(), "mid/0 offset 1")
		case <-time.After(relayWait):
			t.Fatal("the relay is still running: it retries the record too large")
		}
		// "before" may be visible: read alone in a batch (the 1,000,000-byte
		// record does not fit in the same read), it can be committed by a
		// transaction of its own, one every 100 ms, before the record too
		// large fails the next one (seen under go test -race beside another
		// package's tests). Nothing of the failed transaction is visible.
		got := committedValues(t, kc)
		assert.True(t, len(got) == 0 || (len(got) == 1 && got[0] == "before"),
			"read_committed sees %q: only a transaction before the failed one may be visible", got)
	})
	t.Run("skip", func(t *testing.T) {
		kc := kafkatest.NewCluster(t, kafkatest.Topics("back"))
		r, lg, _ := tooLargeSetup(t, kc, "--exactly-once", "--on-too-large", "skip")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := startRelay(t, ctx, r, lg)
		waitFor(t, "the record after it committed", done, func() bool { return len(committedValues(t, kc)) >= 2 })
		cancel()
		require.NoError(t, ignoreCanceled(<-done))
		assert.Equal(t, []string{"before", "after"}, committedValues(t, kc))
	})
}

// committedValues are the values of back a read_committed reader sees.
func committedValues(t *testing.T, kc *kafkatest.Cluster) []string {
	var out []string
	for _, r := range kc.Committed(t, "back") {
		out = append(out, string(r.Value))
	}
	return out
}
