package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
)

// The relay tests run examples/relay as child processes against kfake:
// in the test process (kafkatest) or, where the broker itself must die, in
// a kafkatool serve child.

// relayStats is the relay's GET /stats.
type relayStats struct {
	Direction      string           `json:"direction"`
	Relayed        int64            `json:"relayed"`
	DeliveredAgain int64            `json:"deliveredAgain"`
	LastIn         map[string]int64 `json:"lastIn"`
	LastOut        map[string]int64 `json:"lastOut"`
	Positions      map[string]int64 `json:"positions"`
	Lag            *int64           `json:"lag"`
	Reconnects     int64            `json:"reconnects"`
}

// done reports whether the relay said its lag is 0.
func (s relayStats) done() bool { return s.Lag != nil && *s.Lag == 0 }

// relayStatsOf reads p's /stats; an error (p was killed) is returned, not fatal.
func relayStatsOf(p *proc) (relayStats, error) {
	var s relayStats
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := service.GetJSON(ctx, p.url+"/stats", &s)
	return s, err
}

// A kafka-to-log relay killed with kill -9 stays in its consumer group
// until its session times out, and its restart waits for that; the tests
// shorten the session (kfake's minimum is 6 s, Kafka's default).
const groupSession = "1500ms"

var shortSessions = kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100 * time.Millisecond))

// relayCmd is how to start (and restart) one relay.
type relayCmd struct {
	name string
	env  []string
	args []string
}

func (c relayCmd) start(t *testing.T) *proc {
	t.Helper()
	return startChild(t, c.name, c.env, statsAddr, bin.relay, append(slices.Clone(c.args), "--addr", "127.0.0.1:0")...)
}

// freePort asks the OS for a free port on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// keyedRecord is one record the tests send: key "user-<i%97>", value "v<i>".
type keyedRecord struct {
	key, value string
	partition  int32 // where it landed in the first topic
}

func keyedValue(i int) (key, value string) {
	return fmt.Sprintf("user-%d", i%97), fmt.Sprintf("v%d", i)
}

// valueIndex returns i of a value "v<i>", -1 if it is not one.
func valueIndex(v []byte) int {
	if len(v) < 2 || v[0] != 'v' {
		return -1
	}
	i, err := strconv.Atoi(string(v[1:]))
	if err != nil {
		return -1
	}
	return i
}

// produceKeyed produces n keyed records to topic with franz-go (acks=all,
// murmur2 on the key, as sink.Kafka and the log partition) and returns
// them, with their partitions, indexed by i.
func produceKeyed(t *testing.T, brokers []string, topic string, n int) []keyedRecord {
	t.Helper()
	sent, err := producePaced(brokers, topic, n, n, 0)
	require.NoError(t, err)
	return sent
}

// producePaced is produceKeyed in chunks of chunk records, one every
// pause, so that consumers are mid-stream for a while.
func producePaced(brokers []string, topic string, n, chunk int, pause time.Duration) ([]keyedRecord, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent := make([]keyedRecord, n)
	for from := 0; from < n; from += chunk {
		if from > 0 {
			time.Sleep(pause)
		}
		recs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(from+chunk, n); i++ {
			k, v := keyedValue(i)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			return nil, err
		}
		for _, r := range res {
			i := valueIndex(r.Record.Value)
			sent[i] = keyedRecord{key: string(r.Record.Key), value: string(r.Record.Value), partition: r.Record.Partition}
		}
	}
	return sent, nil
}

// checkKeyedRoundTrip checks what came back against what was sent: every
// record came back at least once, with its key, in the partition number it
// was sent to; nothing else came back; per key, the first returns of its
// values follow the order they were sent in. It returns the duplicates.
func checkKeyedRoundTrip(t *testing.T, sent []keyedRecord, back []*kgo.Record) int {
	t.Helper()
	seen := make([]int, len(sent))
	lastOfKey := map[string]int{} // key -> index of the latest first return
	for _, r := range back {
		i := valueIndex(r.Value)
		require.True(t, i >= 0 && i < len(sent), "invented: key %q value %q", r.Key, r.Value)
		require.Equal(t, sent[i].key, string(r.Key), "value %q came back with another key", r.Value)
		require.Equal(t, sent[i].partition, r.Partition, "key %q: sent to partition %d, came back in %d", r.Key, sent[i].partition, r.Partition)
		seen[i]++
		if seen[i] > 1 {
			continue
		}
		if last, ok := lastOfKey[sent[i].key]; ok {
			require.Greater(t, i, last, "key %q: %q came back (first) after v%d, sent after it", r.Key, r.Value, last)
		}
		lastOfKey[sent[i].key] = i
	}
	var missing []string
	dups := 0
	for i, n := range seen {
		if n == 0 {
			missing = append(missing, sent[i].value)
		}
		dups += max(n-1, 0)
	}
	require.Empty(t, missing, "%d of %d records never came back", len(missing), len(sent))
	return dups
}

// waitExit waits for p to exit on its own and returns its wait status.
func waitExit(t *testing.T, p *proc, timeout time.Duration) syscall.WaitStatus {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v:\n%s", p.name, timeout, p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.Sys().(syscall.WaitStatus)
	}
	require.NoError(t, p.err)
	return 0
}

// TestRelayRoundTripSurvivesKill9 is the round trip under kills:
// 10,000 keyed records in Kafka topic "in" go through relay A
// (kafka-to-log, into log topic "mid") and relay B (log-to-kafka, into
// Kafka topic "back"), every topic with 3 partitions, while each relay is
// SIGKILLed three times at random points mid-stream and restarted on the
// same state (A: its consumer group; B: its FileStore). Then "back" holds
// every record, with its key, in the partition number it started in, per
// key in the order sent, nothing invented; duplicates are allowed and
// counted.
func TestRelayRoundTripSurvivesKill9(t *testing.T) {
	const n = 10_000
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(3), kafkatest.Topics("in", "back"), shortSessions)
	brokers := strings.Join(kc.Brokers(), ",")
	// The relays pass thousands of records a second: produce the 10,000
	// over about 6 s so that the kills land mid-stream.
	type produced struct {
		sent []keyedRecord
		err  error
	}
	producing := make(chan produced, 1)
	var stillProducing atomic.Bool
	stillProducing.Store(true)
	go func() {
		sent, err := producePaced(kc.Brokers(), "in", n, 200, 120*time.Millisecond)
		stillProducing.Store(false)
		producing <- produced{sent, err}
	}()

	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	cmds := [2]relayCmd{
		{name: "relay A (kafka-to-log)", args: []string{"--direction", "kafka-to-log", "--brokers", brokers,
			"--dir", logDir, "--from", "in", "--to", "mid", "--group", "relay-a", "--session-timeout", groupSession}},
		{name: "relay B (log-to-kafka)", args: []string{"--direction", "log-to-kafka", "--brokers", brokers,
			"--dir", logDir, "--from", "mid", "--to", "back", "--state", filepath.Join(dir, "state")}},
	}
	var relays [2]*proc
	relays[0] = cmds[0].start(t) // A creates "mid" before it serves
	relays[1] = cmds[1].start(t)

	var deliveredAgain [2]int64 // summed over the restarted processes
	midStream := 0
	for k := range 6 {
		i := k % 2
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		var st relayStats
		waitFor(t, 15*time.Second, func() bool {
			var err error
			st, err = relayStatsOf(relays[i])
			return err == nil && (st.Relayed > 0 || st.done())
		}, func() string { return cmds[i].name + " relayed nothing" })
		if k >= 2 {
			deliveredAgain[i] += st.DeliveredAgain
		}
		if st.Relayed > 0 && (!st.done() || stillProducing.Load()) {
			midStream++
		}
		relays[i].kill()
		t.Logf("kill %d: %s after %d relayed (%d delivered again), lag %v", k+1, cmds[i].name, st.Relayed, st.DeliveredAgain, lagString(st.Lag))
		relays[i] = cmds[i].start(t)
	}

	pr := <-producing
	require.NoError(t, pr.err, "producing to in")
	sent := pr.sent

	// Done when A's lag is 0 (all of "in" appended to "mid", then committed)
	// and after that B's is 0 (all of "mid" acknowledged by "back").
	var final [2]relayStats
	waitFor(t, 60*time.Second, func() bool {
		for i := range relays {
			st, err := relayStatsOf(relays[i])
			if err != nil || !st.done() {
				return false
			}
			final[i] = st
		}
		return true
	}, func() string {
		return fmt.Sprintf("relays not done: A lag %v, B lag %v", lagString(final[0].Lag), lagString(final[1].Lag))
	})
	for i := range final {
		deliveredAgain[i] += final[i].DeliveredAgain
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	back, err := kafkatest.ReadTopic(ctx, kc.Brokers(), "back")
	require.NoError(t, err)
	dups := checkKeyedRoundTrip(t, sent, back)
	t.Logf("%d records sent, %d came back (%d duplicates), %d of 6 kills mid-stream; delivered again after restarts: A %d, B %d",
		n, len(back), dups, midStream, deliveredAgain[0], deliveredAgain[1])
	if deliveredAgain[0]+deliveredAgain[1] == 0 {
		t.Logf("no kill landed between an append (or produce) and its commit (or saved position): nothing was delivered again")
	}
}

func lagString(l *int64) string {
	if l == nil {
		return "unknown"
	}
	return strconv.FormatInt(*l, 10)
}

// logRecord is a record of a log topic, with the source partition and
// offset the relay's headers name.
type logRecord struct {
	partition     int32
	offset        int64
	key, value    string
	srcPartition  int32
	srcOffset     int64
	hasSrcHeaders bool
}

// readLogTopic reads every record of topic in the log at dir (read-only).
func readLogTopic(t *testing.T, dir, topic string) []logRecord {
	t.Helper()
	lg, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.Topic(topic)
	require.NoError(t, err)
	var out []logRecord
	for p := range int32(tp.Partitions()) {
		part, err := tp.Partition(p)
		require.NoError(t, err)
		rd := part.Replay(part.StartOffset())
		for {
			recs, err := rd.Next(context.Background(), 0)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			for _, r := range recs {
				lr := logRecord{partition: p, offset: r.Offset, key: string(r.Key), value: string(r.Value)}
				lr.srcPartition, lr.srcOffset, lr.hasSrcHeaders = relayHeaders(r.Headers)
				out = append(out, lr)
			}
		}
	}
	return out
}

// relayHeaders returns the source partition and offset the relay's
// headers name.
func relayHeaders(hs []log.Header) (int32, int64, bool) {
	var p, o int64 = -1, -1
	for _, h := range hs {
		switch h.Key {
		case "strom.relay.partition":
			p, _ = strconv.ParseInt(string(h.Value), 10, 32)
		case "strom.relay.offset":
			o, _ = strconv.ParseInt(string(h.Value), 10, 64)
		}
	}
	return int32(p), o, p >= 0 && o >= 0
}

// TestRelayAppendBeforeCommitAppendsAgain SIGKILLs a kafka-to-log relay in
// the window between appending records to the log and committing their
// offsets to Kafka (the relay's test hook STROM_RELAY_CRASH_AFTER_APPEND),
// then restarts it: the records appended but not committed are appended
// again, /stats counts them as delivered again, and no record is missing
// from the log.
func TestRelayAppendBeforeCommitAppendsAgain(t *testing.T) {
	const n, crashAt = 2000, 700
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(3), kafkatest.Topics("in"), shortSessions)
	brokers := strings.Join(kc.Brokers(), ",")
	sent := produceKeyed(t, kc.Brokers(), "in", n)
	logDir := filepath.Join(t.TempDir(), "log")
	cmd := relayCmd{name: "relay (kafka-to-log)", args: []string{"--direction", "kafka-to-log", "--brokers", brokers,
		"--dir", logDir, "--from", "in", "--to", "mid", "--group", "relay", "--session-timeout", groupSession}}

	crashing := cmd
	crashing.env = []string{"STROM_RELAY_CRASH_AFTER_APPEND=" + strconv.Itoa(crashAt)}
	p := crashing.start(t)
	ws := waitExit(t, p, 30*time.Second)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "relay should have SIGKILLed itself, exited with %v:\n%s", p.err, p.output())
	require.Contains(t, p.output(), "killing myself before the commit")

	// The window was hit: some record in the log is at or past its
	// partition's committed offset.
	adm := kadm.NewClient(kc.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	commits, err := adm.FetchOffsetsForTopics(ctx, "relay", "in")
	require.NoError(t, err)
	committed := map[int32]int64{}
	commits.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			committed[o.Partition] = o.At
		}
	})
	before := readLogTopic(t, logDir, "mid")
	require.GreaterOrEqual(t, len(before), crashAt)
	uncommitted := 0
	for _, r := range before {
		require.True(t, r.hasSrcHeaders, "log record %d/%d without relay headers", r.partition, r.offset)
		if r.srcOffset >= committed[r.srcPartition] {
			uncommitted++
		}
	}
	require.Positive(t, uncommitted, "no appended record was left uncommitted (commits %v)", committed)
	t.Logf("killed after appending %d records; %d of them not committed (commits %v)", len(before), uncommitted, committed)

	p = cmd.start(t)
	var st relayStats
	waitFor(t, 30*time.Second, func() bool {
		var err error
		st, err = relayStatsOf(p)
		return err == nil && st.done()
	}, func() string { return fmt.Sprintf("restarted relay not done: %+v", st) })
	require.NoError(t, p.stop(t))

	after := readLogTopic(t, logDir, "mid")
	back := make([]*kgo.Record, len(after))
	for i, r := range after {
		back[i] = &kgo.Record{Key: []byte(r.key), Value: []byte(r.value), Partition: r.partition, Offset: r.offset}
	}
	dups := checkKeyedRoundTrip(t, sent, back)
	require.GreaterOrEqual(t, dups, uncommitted, "every appended but uncommitted record is appended again")
	require.Positive(t, st.DeliveredAgain, "/stats counts the records delivered again")
	t.Logf("after the restart: %d records in the log, %d duplicates, /stats deliveredAgain %d", len(after), dups, st.DeliveredAgain)
}

// publishKeyedLog appends n keyed records to a new 3-partition log topic.
func publishKeyedLog(t *testing.T, dir, topic string, n int) {
	t.Helper()
	lg, err := log.Open(dir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic(topic, 3)
	require.NoError(t, err)
	require.NoError(t, appendKeyed(tp, 0, n))
}

// appendKeyed appends the keyed records from..to-1 to tp and syncs it.
func appendKeyed(tp *log.Topic, from, to int) error {
	for i := from; i < to; i++ {
		k, v := keyedValue(i)
		if _, _, err := tp.Append(context.Background(), log.Record{Key: []byte(k), Value: []byte(v)}); err != nil {
			return err
		}
	}
	return tp.Sync()
}

// loadPositions returns the FileStore's saved positions of topic's 3
// partitions (absent: not saved).
func loadPositions(t *testing.T, state, topic string) map[int32]int64 {
	t.Helper()
	store, err := checkpoint.NewFileStore(state)
	require.NoError(t, err)
	out := map[int32]int64{}
	for p := range int32(3) {
		pos, found, err := store.Load(context.Background(), topic, p)
		require.NoError(t, err)
		if found {
			out[p] = pos.Offset
		}
	}
	return out
}

// kfakeReady matches kafkatool serve's startup line.
var kfakeReady = regexp.MustCompile(`in-process Kafka \(kfake\) on (\S+)`)

// TestRelayLogToKafkaBrokerGoneAndBack runs a log-to-kafka relay against a
// kfake in a kafkatool serve child, SIGKILLs the broker mid-stream and
// starts a new, empty one on the same port: the relay reconnects, and the
// new broker's topic receives every log record at or past the positions
// saved when the old broker died, in order per partition, nothing
// invented. (What the old broker acknowledged and the relay saved died with
// that broker: its loss, not the relay's.)
func TestRelayLogToKafkaBrokerGoneAndBack(t *testing.T) {
	const n, chunk = 6000, 200
	dir := t.TempDir()
	logDir, state := filepath.Join(dir, "log"), filepath.Join(dir, "state")
	// The records go into the log over about 3 s, so that the broker dies
	// mid-stream, after some positions were saved and before the end.
	lg, err := log.Open(logDir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("mid", 3)
	require.NoError(t, err)
	appended := make(chan error, 1)
	go func() {
		for from := 0; from < n; from += chunk {
			if err := appendKeyed(tp, from, from+chunk); err != nil {
				appended <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		appended <- nil
	}()
	port := strconv.Itoa(freePort(t))
	serve := func() *proc {
		return startChild(t, "kafkatool serve", nil, kfakeReady, bin.kafkatool,
			"serve", "--port", port, "--partitions", "3", "--topics", "back")
	}
	broker := serve()
	brokers := []string{"127.0.0.1:" + port}
	relay := relayCmd{name: "relay (log-to-kafka)", args: []string{"--direction", "log-to-kafka", "--brokers", brokers[0],
		"--dir", logDir, "--from", "mid", "--to", "back", "--state", state}}.start(t)

	var st relayStats
	waitFor(t, 15*time.Second, func() bool {
		var err error
		st, err = relayStatsOf(relay)
		return err == nil && len(st.Positions) > 0
	}, func() string { return "relay saved no position" })
	broker.kill()
	t.Logf("broker killed with the relay at %d relayed, lag %s", st.Relayed, lagString(st.Lag))

	// Positions can still move for acknowledgements received before the
	// broker died; wait until they stay put for 1 s (5 checkpoint intervals).
	saved := loadPositions(t, state, "mid")
	for stable := time.Now(); time.Since(stable) < time.Second; time.Sleep(50 * time.Millisecond) {
		if now := loadPositions(t, state, "mid"); !maps.Equal(now, saved) {
			saved, stable = now, time.Now()
		}
	}
	broker = serve()
	t.Logf("new broker up; positions saved against the old one: %v", saved)

	waitFor(t, 60*time.Second, func() bool {
		var err error
		st, err = relayStatsOf(relay)
		return err == nil && st.done()
	}, func() string {
		return fmt.Sprintf("relay not done against the new broker: %+v\n%s", st, relay.output())
	})
	require.NoError(t, <-appended)
	waitFor(t, 30*time.Second, func() bool {
		var err error
		st, err = relayStatsOf(relay)
		return err == nil && st.done()
	}, func() string {
		return fmt.Sprintf("relay not done against the new broker: %+v\n%s", st, relay.output())
	})

	logRecs := readLogTopic(t, logDir, "mid")
	byPos := map[[2]int64]logRecord{}
	for _, r := range logRecs {
		byPos[[2]int64{int64(r.partition), r.offset}] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	back, err := kafkatest.ReadTopic(ctx, brokers, "back")
	require.NoError(t, err)
	seen := map[[2]int64]int{}
	lastOff := map[int32]int64{}
	for _, r := range back {
		hs := make([]log.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = log.Header{Key: h.Key, Value: h.Value}
		}
		sp, so, ok := relayHeaders(hs)
		require.True(t, ok, "back %d/%d has no relay headers", r.Partition, r.Offset)
		src, ok := byPos[[2]int64{int64(sp), so}]
		require.True(t, ok, "invented: back %d/%d names log %d/%d", r.Partition, r.Offset, sp, so)
		require.Equal(t, src.key, string(r.Key))
		require.Equal(t, src.value, string(r.Value))
		require.Equal(t, sp, r.Partition, "key %q changed partition number", r.Key)
		k := [2]int64{int64(sp), so}
		seen[k]++
		if seen[k] == 1 {
			if last, had := lastOff[sp]; had {
				require.Greater(t, so, last, "partition %d: log offset %d came back (first) after %d", sp, so, last)
			}
			lastOff[sp] = so
		}
	}
	missing, dups := 0, 0
	for _, r := range logRecs {
		c := seen[[2]int64{int64(r.partition), r.offset}]
		dups += max(c-1, 0)
		if c == 0 && r.offset >= saved[r.partition] {
			missing++
			if missing <= 5 {
				t.Errorf("log %d/%d (%s), at or past the position %d saved when the broker died, never reached the new broker",
					r.partition, r.offset, r.value, saved[r.partition])
			}
		}
	}
	require.Zero(t, missing)
	t.Logf("new broker got %d records (%d duplicates); relay reconnects %d", len(back), dups, st.Reconnects)
}

// TestRelayUnreachableBrokerOrMissingTopicSavesNothing starts a
// log-to-kafka relay (--timeout 2s) against a broker address nothing
// listens on, and against a broker without the topic: within a bounded
// time each reports an error naming the address, or the topic, on stderr
// (the relay keeps retrying, printing each failed attempt), and saves no
// position.
func TestRelayUnreachableBrokerOrMissingTopicSavesNothing(t *testing.T) {
	t.Run("unreachable broker", func(t *testing.T) {
		checkRelayReportsAndSavesNothing(t, "127.0.0.1:1", "127.0.0.1:1")
	})
	t.Run("missing topic", func(t *testing.T) {
		kc := kafkatest.NewCluster(t, kafkatest.Partitions(3), kafkatest.Topics("other"))
		checkRelayReportsAndSavesNothing(t, strings.Join(kc.Brokers(), ","), "kafka topic back")
	})
}

func checkRelayReportsAndSavesNothing(t *testing.T, brokers, named string) {
	dir := t.TempDir()
	logDir, state := filepath.Join(dir, "log"), filepath.Join(dir, "state")
	publishKeyedLog(t, logDir, "mid", 10)
	start := time.Now()
	relay := relayCmd{name: "relay (log-to-kafka)", args: []string{"--direction", "log-to-kafka", "--brokers", brokers,
		"--dir", logDir, "--from", "mid", "--to", "back", "--state", state, "--timeout", "2s"}}.start(t)
	// The error line: a failed attempt (or the relay's exit, "relay: ...").
	errLine := regexp.MustCompile(`(?m)^relay(: | log-to-kafka: (sink )?attempt \d+: ).*` + regexp.QuoteMeta(named) + `.*$`)
	waitFor(t, 15*time.Second, func() bool { return errLine.MatchString(relay.output()) },
		func() string { return "no error naming " + named + ":\n" + relay.output() })
	t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), errLine.FindString(relay.output()))
	if st, err := relayStatsOf(relay); err == nil {
		require.Empty(t, st.Positions, "/stats positions")
	}
	relay.kill()
	require.Empty(t, loadPositions(t, state, "mid"), "FileStore positions")
}
