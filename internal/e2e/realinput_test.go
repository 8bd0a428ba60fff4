package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
)

// partitions is the partition count of the topic each file is published into.
const partitions = 3

// loghubFiles are the five samples and the key each is published with (the first capture
// group), as ../shared/data/loghub/README.md suggests.
var loghubFiles = []struct {
	file, key string
}{
	// The source IP wherever the line has one: 266 lines carry none and go round-robin,
	// and one address stands on 867 lines.
	{"OpenSSH_2k.log", `(\d+\.\d+\.\d+\.\d+)`},
	// The level; "notice" and "error" both hash to partition 0, so partitions 1 and 2
	// stay empty: consumers of empty partitions must still end where they should.
	{"Apache_2k.log", `^\[[^]]*\] \[(\w+)\]`},
	// The block id.
	{"HDFS_2k.log", `(blk_-?[0-9]+)`},
	// The process name ("sshd", "su", "kernel", ...).
	{"Linux_2k.log", `^\w+ +\d+ [\d:]+ \S+ ([^\[:(]+)`},
	// The class that logged the line (QuorumCnxManager$SendWorker, ...).
	{"Zookeeper_2k.log", `:([\w$]+)@\d+\]`},
}

// consumerDelay is each consumer's handling time per record, slow enough that a consumer is
// still mid-way through its partition when the test kills it.
const consumerDelay = "3ms"

// killPause is how long the test lets the victim run after its first checkpoint before the
// SIGKILL: about a third of a batch of 16 KiB (the consumer's default --batch-bytes, some 100
// records of these files) at consumerDelay per record.
const killPause = 100 * time.Millisecond

// TestRealInputSurvivesSIGKILL ensures that real log files published by the publisher process
// and consumed by three consumer processes, one of them killed with SIGKILL mid-way and
// restarted, are handled completely (every line at least once, byte for byte, nothing
// invented) and that every partition's final position equals what was written to it.
func TestRealInputSurvivesSIGKILL(t *testing.T) {
	dir := loghub.Dir(t)
	for _, f := range loghubFiles {
		t.Run(strings.TrimSuffix(f.file, "_2k.log"), func(t *testing.T) {
			t.Parallel()
			testRealInput(t, filepath.Join(dir, f.file), regexp.MustCompile(f.key))
		})
	}
}

// handledRecord is one line of a consumer's --out file.
type handledRecord = service.OutLine

func testRealInput(t *testing.T, path string, key *regexp.Regexp) {
	work := t.TempDir()
	logDir := filepath.Join(work, "log")
	require.NoError(t, os.Mkdir(logDir, 0o755))

	// The consumers start first: the topic does not exist yet, which they must ride out.
	consumers := make([]*proc, partitions)
	outs := make([]string, partitions)
	startConsumer := func(p int) *proc {
		return startProc(t, fmt.Sprintf("consumer-%d", p), bin.consumer,
			"--dir", logDir, "--topic", "lines", "--partition", strconv.Itoa(p),
			"--state", filepath.Join(work, fmt.Sprintf("state-%d", p)),
			"--out", outs[p], "--delay", consumerDelay)
	}
	for p := range partitions {
		outs[p] = filepath.Join(work, fmt.Sprintf("out-%d.jsonl", p))
		consumers[p] = startConsumer(p)
	}
	pub := startProc(t, "publisher", bin.publisher,
		"--dir", logDir, "--topic", "lines", "--partitions", strconv.Itoa(partitions),
		"--input", path, "--key", key.String(), "--rate", "50000")

	var ps service.PublisherStats
	waitFor(t, 20*time.Second, func() bool {
		pub.stats(t, &ps)
		return ps.Stopped
	}, func() string { return fmt.Sprintf("publisher not done: %+v", ps) })
	require.EqualValues(t, 2000, ps.Sent, "the publisher wrote every line of %s", path)
	require.Equal(t, ps.NextOffset, ps.PerPartition, "a fresh topic's high watermarks are what this publisher wrote")

	// Kill the consumer of the fullest partition once it has saved a first position.
	victim := 0
	for p := range partitions {
		if ps.PerPartition[p] > ps.PerPartition[victim] {
			victim = p
		}
	}
	written := ps.PerPartition[victim]
	var cs service.ConsumerStats
	waitFor(t, 20*time.Second, func() bool {
		consumers[victim].stats(t, &cs)
		return cs.Position != nil && *cs.Position > 0
	}, func() string { return fmt.Sprintf("consumer-%d saved no position: %+v", victim, cs) })
	// Kill it between two checkpoints, with records handled but not yet saved, so the
	// restart has something to replay.
	time.Sleep(killPause)
	consumers[victim].stats(t, &cs)
	low := *cs.Position
	consumers[victim].kill()
	before := ps.NextOffset[victim] // the publisher is done: the high watermark at the kill
	require.Less(t, low, written, "consumer-%d must be killed before the end of its partition", victim)
	t.Logf("%s: killed consumer-%d at position %d of %d", filepath.Base(path), victim, low, written)

	consumers[victim] = startConsumer(victim)
	consumers[victim].stats(t, &cs)
	require.NotNil(t, cs.ResumedFrom, "the restarted consumer found its checkpoint")
	assert.GreaterOrEqual(t, *cs.ResumedFrom, low, "a position saved before SIGKILL survives it")
	assert.LessOrEqual(t, *cs.ResumedFrom, before, "no resume past the high watermark at the kill")

	// Wait until every consumer's position is what was written to its partition.
	stats := make([]service.ConsumerStats, partitions)
	waitForProgress(t, 30*time.Second, func() (bool, int64) {
		done, sum := true, int64(0)
		for p := range partitions {
			consumers[p].stats(t, &stats[p])
			sum += position(stats[p]) + stats[p].Handled // either moves while a consumer works
			if position(stats[p]) != ps.PerPartition[p] {
				done = false
			}
		}
		return done, sum
	}, func() string {
		return fmt.Sprintf("positions %v, written %v", positions(stats), ps.PerPartition)
	})

	// The check command agrees, from the outside.
	urls := make([]string, partitions)
	for p := range partitions {
		urls[p] = consumers[p].url
	}
	runCheck(t, "split", "--publisher", pub.url, "--consumers", strings.Join(urls, ","), "--wait", "20s")
	runCheck(t, "resumed", strconv.FormatInt(before, 10), "--consumer", consumers[victim].url,
		"--at-least", strconv.FormatInt(low, 10))

	// The log's own high watermarks say the same.
	lg, err := log.Open(logDir, log.ReadOnly())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.Topic("lines")
	require.NoError(t, err)
	for p := range partitions {
		part, err := topic.Partition(int32(p))
		require.NoError(t, err)
		assert.Equal(t, ps.PerPartition[p], part.HighWatermark(), "partition %d high watermark", p)
		assert.Equal(t, ps.PerPartition[p], position(stats[p]), "partition %d final position", p)
	}

	for p, c := range consumers {
		assert.NoError(t, c.stop(t), "consumer-%d exits 0 on SIGTERM", p)
	}
	assert.NoError(t, pub.stop(t), "publisher exits 0 on SIGTERM")

	checkHandled(t, path, key, outs, ps.PerPartition)
}

// checkHandled reads the consumers' --out files and checks them against the input file.
func checkHandled(t *testing.T, path string, key *regexp.Regexp, outs []string, written []int64) {
	t.Helper()
	want := fileLines(t, path)
	require.Len(t, want, 2000, "%s holds 2,000 lines", path)

	type at struct {
		partition int32
		offset    int64
	}
	seen := make(map[at]handledRecord)
	total := 0
	for p, out := range outs {
		for i, r := range readOut(t, out) {
			total++
			require.EqualValues(t, p, r.Partition, "%s line %d: consumer-%d handled a record of another partition", out, i+1, p)
			require.True(t, r.Offset >= 0 && r.Offset < written[p],
				"%s line %d: offset %d was never written to partition %d (%d records)", out, i+1, r.Offset, p, written[p])
			k := at{r.Partition, r.Offset}
			if prev, ok := seen[k]; ok {
				require.Equal(t, prev, r, "a replayed record reads the same as the first time")
				continue
			}
			seen[k] = r
		}
	}
	for p := range written {
		for off := range written[p] {
			if _, ok := seen[at{int32(p), off}]; !ok {
				t.Fatalf("partition %d offset %d was written but never handled", p, off)
			}
		}
	}

	var got []string
	noKey := 0
	for _, r := range seen {
		got = append(got, r.Value)
		m := key.FindStringSubmatchIndex(r.Value)
		switch {
		case m == nil || m[2] < 0:
			noKey++
			assert.Nil(t, r.Key, "a line %q without a key match has a nil key", r.Value)
		case assert.NotNil(t, r.Key, "line %q has a key", r.Value):
			assert.Equal(t, r.Value[m[2]:m[3]], *r.Key, "the key is the first group of %s", key)
			assert.Equal(t, log.KafkaPartition([]byte(*r.Key), int32(len(written))), r.Partition,
				"key %q lands where Kafka's partitioner puts it", *r.Key)
		}
	}
	slices.Sort(got)
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	require.Equal(t, len(sorted), len(got), "as many distinct records handled as lines in the file")
	for i := range sorted {
		if got[i] != sorted[i] {
			t.Fatalf("handled records differ from the file's lines: first difference in sorted order:\n got %q\nwant %q", got[i], sorted[i])
		}
	}
	wantNoKey := 0
	for _, l := range want {
		if m := key.FindStringSubmatchIndex(l); m == nil || m[2] < 0 {
			wantNoKey++
		}
	}
	assert.Equal(t, wantNoKey, noKey, "records without a key")
	t.Logf("%s: %d lines, %d handled records (%d replayed), %d without a key, written per partition %v",
		filepath.Base(path), len(want), total, total-len(seen), noKey, written)
}

// fileLines splits a file into lines by the rule source.Lines documents: a line ends at
// "\n", which is stripped with one "\r" right before it; a last line without "\n" counts,
// the empty text after a final "\n" does not.
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	text = strings.TrimSuffix(text, "\n")
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// readOut parses a consumer's --out file, one JSON object per line.
func readOut(t *testing.T, path string) []handledRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var recs []handledRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var r handledRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&r), "%s line %d: %q", path, n, sc.Text())
		recs = append(recs, r)
	}
	require.NoError(t, sc.Err())
	require.True(t, len(data) == 0 || data[len(data)-1] == '\n', "%s ends with a whole line", path)
	return recs
}

// position is a consumer's saved position, 0 while it has saved none.
func position(s service.ConsumerStats) int64 {
	if s.Position == nil {
		return 0
	}
	return *s.Position
}

func positions(ss []service.ConsumerStats) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = position(s)
	}
	return out
}

// runCheck runs the check binary and fails the test unless it exits 0.
func runCheck(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(bin.check, args...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "check %s:\n%s", strings.Join(args, " "), out)
}
