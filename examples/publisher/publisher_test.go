package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestLineKeyIsFirstGroupOrNil ensures a line the expression does not match, or matches
// without its first group, gets a nil key (round-robin), and a matched empty group an empty,
// non-nil key.
func TestLineKeyIsFirstGroupOrNil(t *testing.T) {
	re := regexp.MustCompile(`from ([0-9.]*)|(pid)`)
	assert.Equal(t, []byte("10.0.0.1"), lineKey(re, "Accepted from 10.0.0.1 port 22"))
	assert.Nil(t, lineKey(re, "no address here"))
	assert.Nil(t, lineKey(re, "only a pid"), "first group did not take part")
	k := lineKey(re, "from x")
	assert.NotNil(t, k)
	assert.Empty(t, k)
	assert.Nil(t, lineKey(nil, "from 1.2.3.4"))
}

// TestParseFlagsPrefersFlagsOverEnvironment ensures the precedence flag > env > default.
func TestParseFlagsPrefersFlagsOverEnvironment(t *testing.T) {
	t.Setenv("STROM_DIR", "/env/dir")
	t.Setenv("STROM_TOPIC", "envtopic")
	t.Setenv("STROM_RATE", "50")
	cfg, err := parseFlags([]string{"--topic", "flagtopic", "--mode", "mmap"})
	require.NoError(t, err)
	assert.Equal(t, "/env/dir", cfg.dir)
	assert.Equal(t, "flagtopic", cfg.topic)
	assert.Equal(t, 50.0, cfg.rate)
	assert.Equal(t, 3, cfg.partitions)
	assert.Equal(t, "127.0.0.1:7070", cfg.addr)
	assert.Equal(t, log.ModeMmap, cfg.mode)
}

// TestParseFlagsRejectsBadCombinations ensures each bad command line names its flag.
func TestParseFlagsRejectsBadCombinations(t *testing.T) {
	t.Setenv("STROM_DIR", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--dir"},
		{[]string{"--dir", "d", "--key", "(x)"}, "--key needs --input"},
		{[]string{"--dir", "d", "--input", "f", "--key", "x"}, "capture group"},
		{[]string{"--dir", "d", "--input", "f", "--key", "("}, "--key"},
		{[]string{"--dir", "d", "--partitions", "0"}, "--partitions"},
		{[]string{"--dir", "d", "--mode", "disk"}, "--mode"},
		{[]string{"--dir", "d", "extra"}, "unexpected argument"},
	} {
		_, err := parseFlags(c.args)
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.want, "%v", c.args)
	}
	t.Setenv("STROM_COUNT", "many")
	_, err := parseFlags([]string{"--dir", "d"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "STROM_COUNT")
}

// TestPacerHoldsTheRate ensures records are spaced 1/rate apart on average and that stop
// and a cancelled context end the wait.
func TestPacerHoldsTheRate(t *testing.T) {
	p := newPacer(1000)
	start := time.Now()
	for range 51 {
		require.NoError(t, p.wait(context.Background(), nil))
	}
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	stop := make(chan struct{})
	close(stop)
	assert.ErrorIs(t, newPacer(1).wait(context.Background(), stop), errStopped)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, newPacer(1).wait(ctx, nil), context.Canceled)
}

// TestPublisherCountsPerPartition ensures the stats count what was appended where, and that
// lastOffset is -1 for a partition that got nothing.
func TestPublisherCountsPerPartition(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	pub := newPublisher(topic)
	require.NoError(t, pub.sendSynthetic(context.Background(), 0, 30))

	st := pub.stats()
	assert.True(t, st.Stopped)
	assert.EqualValues(t, 30, st.Sent)
	var sum int64
	for p, n := range st.PerPartition {
		sum += n
		assert.Equal(t, n, st.NextOffset[p], "fresh topic: high watermark = records written")
		assert.Equal(t, n-1, st.LastOffset[p])
	}
	assert.EqualValues(t, 30, sum)

	recs, err := mustPartition(t, topic, 0).Read(0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	assert.Regexp(t, `^user-\d+$`, string(recs[0].Key))
	assert.Regexp(t, `^\{"user":"user-\d+","event":"\w+","seq":\d+,"ts":\d+\}$`, string(recs[0].Value))
	assert.Equal(t, topic.PartitionFor(recs[0].Key), int32(0), "keyed by user id")
}

func mustPartition(t *testing.T, topic *log.Topic, p int32) *log.Partition {
	t.Helper()
	part, err := topic.Partition(p)
	require.NoError(t, err)
	return part
}

// TestParseFlagsRejectsMissingInputFile ensures a missing --input file is a
// startup error, before any topic is created.
func TestParseFlagsRejectsMissingInputFile(t *testing.T) {
	_, err := parseFlags([]string{"--dir", t.TempDir(), "--input", "/nonexistent/file.log"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--input: open /nonexistent/file.log")
}

// TestSendLinesCountsKeyedLinesAndWarnsWhenTheKeyMatchesNone ensures the stop line says how
// many lines --key keyed and how many went without a key, and that an expression matching no
// line gets a warning naming it, the records still written.
func TestSendLinesCountsKeyedLinesAndWarnsWhenTheKeyMatchesNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.log")
	require.NoError(t, os.WriteFile(path, []byte("from 10.0.0.1\r\nno address\r\nfrom 10.0.0.2\r\n"), 0o644))
	run := func(key string) string {
		t.Helper()
		lg, err := log.Open(t.TempDir())
		require.NoError(t, err)
		defer lg.Close()
		topic, err := lg.CreateTopic("events", 3)
		require.NoError(t, err)
		pub := newPublisher(topic)
		var stderr bytes.Buffer
		pub.stderr = &stderr
		require.NoError(t, pub.sendLines(context.Background(), path, regexp.MustCompile(key), false, 0, 0))
		assert.EqualValues(t, 3, pub.stats().Sent)
		return stderr.String()
	}
	assert.Contains(t, run(`from ([0-9.]+)$`), ", 2 keyed by --key, 1 without a key (round-robin)\n")
	out := run(`port (\d+)`)
	assert.Contains(t, out, ", 0 keyed by --key, 3 without a key (round-robin)\n")
	assert.Contains(t, out, `publisher: warning: --key "port (\\d+)" matched no line of 3: no record has a key, all went round-robin`)
}
