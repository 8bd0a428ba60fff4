package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/log"
)

// windowKey names a window: its source IP and start.
type windowKey struct{ ip, start string }

// sample returns the path of OpenSSH_2k.log.
func sample(t *testing.T) string {
	return filepath.Join(loghub.Dir(t), "OpenSSH_2k.log")
}

// independentCount counts the failed password attempts of the file at path
// per (IP, minute) without sshwatch's regular expression: plain string
// cuts, the minute being the first 12 characters of the line ("Dec 10
// 07:28"), and "message repeated N times" counting N.
func independentCount(t *testing.T, path string, year int) map[windowKey]int64 {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := make(map[windowKey]int64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		_, rest, ok := strings.Cut(line, "Failed password for ")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, " from ")
		require.GreaterOrEqual(t, i, 0, line)
		ip := strings.Fields(rest[i+len(" from "):])[0]
		n := int64(1)
		if _, rep, ok := strings.Cut(line, "message repeated "); ok {
			num, _, _ := strings.Cut(rep, " ")
			n, err = strconv.ParseInt(num, 10, 64)
			require.NoError(t, err, line)
		}
		minute, err := time.Parse("2006 Jan _2 15:04", strconv.Itoa(year)+" "+line[:12])
		require.NoError(t, err, line)
		out[windowKey{ip, minute.UTC().Format(time.RFC3339)}] += n
	}
	require.NoError(t, sc.Err())
	return out
}

// readResults parses JSON result lines; a window seen twice must have the
// same count both times.
func readResults(t *testing.T, data []byte) map[windowKey]int64 {
	out := make(map[windowKey]int64)
	for line := range strings.Lines(string(data)) {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		start, err := time.Parse(time.RFC3339, r.WindowStart)
		require.NoError(t, err)
		end, err := time.Parse(time.RFC3339, r.WindowEnd)
		require.NoError(t, err)
		require.Equal(t, time.Minute, end.Sub(start), line)
		k := windowKey{r.Key, r.WindowStart}
		if c, seen := out[k]; seen {
			require.Equal(t, c, r.Count, "window %v written twice with different counts", k)
		}
		out[k] = r.Count
	}
	return out
}

func atLeast(all map[windowKey]int64, threshold int64) map[windowKey]int64 {
	out := make(map[windowKey]int64)
	for k, c := range all {
		if c >= threshold {
			out[k] = c
		}
	}
	return out
}

func testConfig(input, dir string) config {
	return config{input: input, dir: dir, threshold: 5, year: 2026, json: true, partitions: 1, outOfOrder: 10 * time.Second}
}

// TestAlertsEqualAnIndependentCountOfTheSample ensures that sshwatch over
// OpenSSH_2k.log, with 1 and with 3 partitions, alerts on exactly the
// (IP, minute) windows that a plain count of the file puts at 5 or more
// failed attempts, with the same counts, writes every window with
// attempts to windows.jsonl, and finds no late or skipped line.
func TestAlertsEqualAnIndependentCountOfTheSample(t *testing.T) {
	want := independentCount(t, sample(t), 2026)
	require.Len(t, atLeast(want, 5), 29, "the sample's alert windows, as counted by hand")
	for _, partitions := range []int{1, 3} {
		t.Run(strconv.Itoa(partitions)+" partitions", func(t *testing.T) {
			cfg := testConfig(sample(t), t.TempDir())
			cfg.partitions = partitions
			var stdout, stderr bytes.Buffer
			sum, err := watch(context.Background(), cfg, &stdout, &stderr)
			require.NoError(t, err, stderr.String())
			assert.Equal(t, atLeast(want, 5), readResults(t, stdout.Bytes()), "alerts")
			windows, err := os.ReadFile(filepath.Join(cfg.dir, windowsFile))
			require.NoError(t, err)
			assert.Equal(t, want, readResults(t, windows), "every window")
			assert.Equal(t, int64(2000), sum.Lines.Load())
			assert.Equal(t, int64(528), sum.Attempts.Load(), "520 lines, two of them 'message repeated 5 times'")
			assert.Zero(t, sum.Late.Load())
			assert.Zero(t, sum.Skipped.Load())
			assert.Empty(t, stderr.String())
		})
	}
}

// cancelAfter is a writer that cancels a context after its n-th Write.
type cancelAfter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (w *cancelAfter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n == 0 {
		w.cancel()
	}
	return w.buf.Write(p)
}

// TestStoppedRunGoesOnWithTheSameAlerts ensures that a run stopped mid-way
// (its context cancelled after its third alert, while it reads one line at
// a time) and started again on the same --dir prints, over both runs, the
// alerts of an uninterrupted run, each window with one count, and that a
// third run over the finished directory prints nothing.
func TestStoppedRunGoesOnWithTheSameAlerts(t *testing.T) {
	want := atLeast(independentCount(t, sample(t), 2026), 5)
	cfg := testConfig(sample(t), t.TempDir())
	cfg.pace = time.Microsecond // one line per batch
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &cancelAfter{n: 3, cancel: cancel}
	_, err := watch(ctx, cfg, first, io.Discard)
	require.ErrorIs(t, err, context.Canceled)
	got := readResults(t, first.buf.Bytes())
	require.NotEmpty(t, got)
	require.Less(t, len(got), len(want), "the first run stopped mid-way")

	cfg.pace = 0
	var second, stderr bytes.Buffer
	_, err = watch(context.Background(), cfg, &second, &stderr)
	require.NoError(t, err, stderr.String())
	both := readResults(t, append(first.buf.Bytes(), second.Bytes()...))
	assert.Equal(t, want, both)

	var third bytes.Buffer
	_, err = watch(context.Background(), cfg, &third, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, third.String(), "a finished directory has nothing new")
}

// TestPublishResumesEachPartitionAtItsHighWatermark ensures that publish,
// over a 3-partition topic whose partitions a killed run left at 5, 2 and
// 0 records, appends exactly the missing lines: every partition p ends
// holding lines p, p+3, p+6, ... in order, none twice. A partition holding
// more records than the input has lines for it is refused.
func TestPublishResumesEachPartitionAtItsHighWatermark(t *testing.T) {
	lines := make([]string, 20)
	for i := range lines {
		lines[i] = "line " + strconv.Itoa(i)
	}
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic(topicName, 3)
	require.NoError(t, err)
	ctx := context.Background()
	for p, c := range []int{5, 2, 0} {
		part, err := topic.Partition(int32(p))
		require.NoError(t, err)
		for k := range c {
			_, err := part.Append(ctx, log.Record{Value: []byte(lines[p+3*k])})
			require.NoError(t, err)
		}
	}
	res, err := publish(ctx, topic, lines, 0)
	require.NoError(t, err)
	assert.Equal(t, published{Already: 7, New: 13}, res)
	for p := range 3 {
		part, err := topic.Partition(int32(p))
		require.NoError(t, err)
		recs, err := part.Read(0, 1<<20)
		require.NoError(t, err)
		var got, want []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		for i := p; i < len(lines); i += 3 {
			want = append(want, lines[i])
		}
		assert.Equal(t, want, got, "partition %d", p)
	}

	res, err = publish(ctx, topic, lines, 0)
	require.NoError(t, err)
	assert.Equal(t, published{Already: 20, New: 0}, res, "a second publish has nothing to add")
	_, err = publish(ctx, topic, lines[:10], 0)
	require.ErrorContains(t, err, "the log is not this input's")
}

// TestDirOfAnotherInputOrSettingIsRefused ensures that a --dir made for one
// input is refused for another, and for another --partitions or --year
// given explicitly, while one not given takes the directory's; and that a
// non-empty directory sshwatch did not make is refused.
func TestDirOfAnotherInputOrSettingIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig("auth.log", dir)
	cfg.partitions = 2
	meta, err := prepareDir(cfg, []byte("a\nb\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, meta.Lines)

	cfg.partitions, cfg.year = 1, 2030 // defaults, not given: the directory's apply
	meta, err = prepareDir(cfg, []byte("a\nb\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, meta.Partitions)
	assert.Equal(t, 2026, meta.Year)

	_, err = prepareDir(cfg, []byte("a\nc\n"))
	require.ErrorContains(t, err, "was made for another input")
	cfg.partitionsSet = true
	_, err = prepareDir(cfg, []byte("a\nb\n"))
	require.ErrorContains(t, err, "--partitions 1: --dir "+dir+" was made with 2")
	cfg.partitionsSet, cfg.yearSet = false, true
	_, err = prepareDir(cfg, []byte("a\nb\n"))
	require.ErrorContains(t, err, "--year 2030")

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o644))
	cfg.dir = other
	_, err = prepareDir(cfg, []byte("a\n"))
	require.ErrorContains(t, err, "is not empty and has no sshwatch.json")
}

// TestParseAttemptReadsSshdFailures ensures the forms of a failed password
// line parse (a user with a space in it, an invalid user, a repeated
// message) and that other lines are not attempts.
func TestParseAttemptReadsSshdFailures(t *testing.T) {
	for _, c := range []struct {
		line  string
		ip    string
		user  string
		count int64
		at    string
	}{
		{"Dec 10 07:28:14 LabSZ sshd[24245]: Failed password for root from 112.95.230.3 port 41542 ssh2", "112.95.230.3", "root", 1, "2026-12-10T07:28:14Z"},
		{"Dec 10 08:24:35 LabSZ sshd[24361]: Failed password for invalid user  0101 from 5.188.10.180 port 36279 ssh2", "5.188.10.180", " 0101", 1, "2026-12-10T08:24:35Z"},
		{"Dec 10 07:13:56 LabSZ sshd[24227]: message repeated 5 times: [ Failed password for root from 5.36.59.76 port 42393 ssh2]", "5.36.59.76", "root", 5, "2026-12-10T07:13:56Z"},
		{"Jan  2 03:04:05 host sshd[1]: Failed password for admin from 2001:db8::1 port 22 ssh2", "2001:db8::1", "admin", 1, "2026-01-02T03:04:05Z"},
	} {
		a, ok, err := parseAttempt(c.line, 2026)
		require.NoError(t, err, c.line)
		require.True(t, ok, c.line)
		assert.Equal(t, c.ip, a.IP, c.line)
		assert.Equal(t, c.user, a.User, c.line)
		assert.Equal(t, c.count, a.Count, c.line)
		assert.Equal(t, c.at, a.Time.Format(time.RFC3339), c.line)
	}
	for _, line := range []string{
		"Dec 10 08:24:40 LabSZ sshd[24363]: Failed none for invalid user 0 from 5.188.10.180 port 49811 ssh2",
		"Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186",
		"",
	} {
		_, ok, err := parseAttempt(line, 2026)
		require.NoError(t, err)
		assert.False(t, ok, line)
	}
	_, _, err := parseAttempt("Dex 10 07:28:14 h sshd[1]: Failed password for root from 1.2.3.4 port 1 ssh2", 2026)
	require.ErrorContains(t, err, `timestamp "Dex 10 07:28:14"`)
}

// TestParseFlagsRejectsBadUsage ensures usage errors (exit status 2 through
// service.Main), among them the flags of one mode given in the other
// (--input with --brokers, --partitions with Kafka, --group or
// --repartition without), and that --help is flag.ErrHelp (exit 0).
func TestParseFlagsRejectsBadUsage(t *testing.T) {
	_, err := parseFlags([]string{"--help"})
	require.ErrorIs(t, err, flag.ErrHelp)
	f := filepath.Join(t.TempDir(), "auth.log")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	for args, msg := range map[string]string{
		"":                                       "--input is required",
		"--input F --threshold 0":                "--threshold 0",
		"--input F --partitions 0":               "--partitions 0",
		"--input F --out-of-order -1s":           "--out-of-order -1s",
		"--input F --pace -1ms":                  "--pace -1ms",
		"--input F extra":                        `unexpected argument "extra"`,
		"--input F --year 0":                     "--year 0",
		"--input F --threshold five":             "invalid value",
		"--input F --no-such-flag true":          "flag provided but not defined",
		"--input /no/such/file":                  "--input: open /no/such/file: no such file or directory",
		"--input F --brokers b:9092":             "--input and --brokers: give one",
		"--brokers b:9092 --partitions 2":        "--partitions applies to the log of --input",
		"--input F --repartition":                "--repartition applies with --brokers only",
		"--input F --group g":                    "--group applies with --brokers only",
		"--brokers b:9092 --session-timeout -1s": "must not be negative",
	} {
		_, err := parseFlags(strings.Fields(strings.ReplaceAll(args, "F", f)))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), msg, args)
	}
	kcfg, err := parseFlags([]string{"--brokers", "b1:9092,b2:9092", "--repartition", "--session-timeout", "2s"})
	require.NoError(t, err, "Kafka mode needs no --input")
	assert.Equal(t, "ssh", kcfg.topic)
	assert.Equal(t, "sshwatch", kcfg.group)
	assert.True(t, kcfg.repartition)
	assert.Equal(t, 2*time.Second, kcfg.sessionTimeout)
	assert.Zero(t, kcfg.rebalanceTimeout, "the client's default")

	cfg, err := parseFlags([]string{"--input", f, "--year", "2020"})
	require.NoError(t, err)
	assert.True(t, cfg.yearSet)
	assert.False(t, cfg.partitionsSet)
	assert.Equal(t, 1, cfg.partitions)
	assert.Equal(t, int64(5), cfg.threshold)
}

// TestLateLineIsWarnedNotCounted ensures that a failed attempt more than
// --out-of-order behind the newest line, whose window has closed, is not
// counted and not dropped unseen: it is printed to stderr and counted as
// late, while a line within --out-of-order still counts. It also checks
// the human alert format.
func TestLateLineIsWarnedNotCounted(t *testing.T) {
	late := "Dec 10 07:00:30 h sshd[3]: Failed password for root from 10.0.0.1 port 3 ssh2"
	input := filepath.Join(t.TempDir(), "auth.log")
	require.NoError(t, os.WriteFile(input, []byte(strings.Join([]string{
		"Dec 10 07:00:01 h sshd[1]: Failed password for root from 10.0.0.1 port 1 ssh2",
		"Dec 10 07:05:00 h sshd[2]: Failed password for invalid user bob from 10.0.0.2 port 2 ssh2",
		late, // the watermark is 07:04:50: window 07:00 closed
		"Dec 10 07:04:55 h sshd[4]: Failed password for root from 10.0.0.2 port 4 ssh2", // 5s out of order: on time
		"Dec 10 07:05:01 h sshd[5]: Accepted password for alice from 10.0.0.3 port 5 ssh2",
	}, "\n")), 0o644))
	cfg := config{input: input, dir: t.TempDir(), threshold: 1, year: 2026, partitions: 1, outOfOrder: 10 * time.Second}
	var stdout, stderr bytes.Buffer
	sum, err := watch(context.Background(), cfg, &stdout, &stderr)
	require.NoError(t, err)
	assert.Equal(t, int64(1), sum.Late.Load())
	assert.Equal(t, "sshwatch: late line (its window closed 10s before the newest line; not counted): "+late+"\n", stderr.String())
	// Sorted: the windows still open at the end of the input come out per
	// key, in the order the key's windows were opened.
	got := strings.SplitAfter(stdout.String(), "\n")
	slices.Sort(got)
	assert.Equal(t, []string{"",
		"2026-12-10 07:00-07:01 UTC  10.0.0.1          1 failed password attempts\n",
		"2026-12-10 07:04-07:05 UTC  10.0.0.2          1 failed password attempts\n",
		"2026-12-10 07:05-07:06 UTC  10.0.0.2          1 failed password attempts\n"}, got)
}

// TestPacerAveragesAndForgivesDebt ensures a pacer of 100µs lets 50 lines
// through in about 5ms although the timer ticks about every 1ms, and that
// after a stall it does not rush through more than maxDebt's worth.
func TestPacerAveragesAndForgivesDebt(t *testing.T) {
	p := newPacer(100 * time.Microsecond)
	start := time.Now()
	for range 50 {
		require.NoError(t, p.wait(context.Background()))
	}
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
	// A stall of 20ms: the schedule moves on by itself.
	p.start = p.start.Add(-20 * time.Millisecond)
	require.NoError(t, p.wait(context.Background()))
	behind := -time.Until(p.start.Add(time.Duration(p.n) * p.pace))
	assert.LessOrEqual(t, behind, maxDebt+time.Millisecond, "debt forgiven down to maxDebt")
}
