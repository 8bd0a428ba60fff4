package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/sink"
)

// TestProduceCountsKeyedLinesAndWarnsWhenTheKeyRegexMatchesNone ensures
// produce --key-regex ends by saying how many lines it keyed and how many
// went without a key (the OpenSSH sample: 266 of its 2,000 lines carry no
// IP address), and that an expression matching no line gets a warning that
// names it, while the records are still appended; without --key-regex it
// prints nothing.
func TestProduceCountsKeyedLinesAndWarnsWhenTheKeyRegexMatchesNone(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(loghub.Dir(t), "OpenSSH_2k.log"))
	require.NoError(t, err)
	dir := newLog(t, "ssh", 3)
	ip := `(\d+\.\d+\.\d+\.\d+)`

	r := strom(t, data, "--dir", dir, "produce", "ssh", "--key-regex", ip)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 2000 lines: 1734 keyed by --key-regex, 266 without a key (round-robin)\n", string(r.stderr))

	r = strom(t, data, "--dir", dir, "produce", "ssh", "--key-regex", `sshd\[(\d+)\]x`)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 2000 lines: 0 keyed by --key-regex, 2000 without a key (round-robin)\n"+
		`strom: warning: --key-regex "sshd\\[(\\d+)\\]x" matched no line of 2000: no record has a key, all went round-robin`+"\n", string(r.stderr))

	r = strom(t, []byte("a\nb\n"), "--dir", dir, "produce", "ssh", "--key-regex", "z", "--partition", "1")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "2 without a key (to partition 1)")
	assert.Contains(t, string(r.stderr), `warning: --key-regex "z" matched no line of 2`)

	r = strom(t, data, "--dir", dir, "produce", "ssh")
	require.Equal(t, 0, r.code)
	assert.Empty(t, r.stderr, "no --key-regex: nothing to count")
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "ssh", "--json")), `"nextOffset"`)
}

// sshTime is the time of an OpenSSH_2k.log line ("Dec 10 06:55:46 ..."),
// parsed here as the test's own reference, in 2015 (the sample's year),
// UTC.
func sshTime(t *testing.T, line string) int64 {
	t.Helper()
	ts, err := time.Parse(time.Stamp, line[:15])
	require.NoError(t, err, "line %q", line)
	return ts.AddDate(2015, 0, 0).UnixMilli()
}

// TestProduceTimestampRegexStampsRecordsWithTheTimeOfTheirLine ensures
// produce --timestamp-regex gives every record of the OpenSSH sample the
// time of its line (syslog layout, --timestamp-year 2015, UTC) instead of the
// time of ingestion, and that consume --from TIME then starts at the first
// line at or after TIME.
func TestProduceTimestampRegexStampsRecordsWithTheTimeOfTheirLine(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(loghub.Dir(t), "OpenSSH_2k.log"))
	require.NoError(t, err)
	dir := newLog(t, "ssh", 1)
	r := strom(t, data, "--dir", dir, "produce", "ssh",
		"--timestamp-regex", `^(\w{3} [ \d]\d \d\d:\d\d:\d\d) `, "--timestamp-format", "syslog", "--timestamp-year", "2015")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 2000 lines: 2000 with the time of their line\n", string(r.stderr))

	recs := parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ssh", "--format", "json"))
	require.Len(t, recs, 2000)
	for i, rec := range recs {
		require.Equal(t, sshTime(t, *rec.Value), rec.Timestamp, "record %d: %q", i, *rec.Value)
	}
	first, last := recs[0].Timestamp, recs[len(recs)-1].Timestamp
	require.Less(t, first, last, "the sample spans some time")

	// A time between the first and the last line, not on a line's second:
	// --from starts at the first record at or after it.
	from := time.UnixMilli(first + (last-first)/2 + 500).UTC()
	want := -1
	for i, rec := range recs {
		if rec.Timestamp >= from.UnixMilli() {
			want = i
			break
		}
	}
	require.Greater(t, want, 0)
	got := parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ssh", "--format", "json", "--from", from.Format(time.RFC3339Nano), "--max", "1"))
	require.Len(t, got, 1)
	assert.Equal(t, int64(want), got[0].Offset, "--from %s", from.Format(time.RFC3339Nano))
	assert.Equal(t, *recs[want].Value, *got[0].Value)
}

// TestProduceTimestampOnErrorFailsSkipsOrIngests ensures a line whose time
// is not found or does not parse stops produce by default with an error
// naming its line number and text, the lines before it appended; that
// --timestamp-on-error skip leaves such lines out and ingest keeps them at
// the time of ingestion, each counted on stderr; and that bad
// --timestamp-* flags are usage errors naming the flag.
func TestProduceTimestampOnErrorFailsSkipsOrIngests(t *testing.T) {
	t.Parallel()
	in := []byte("2020-01-01T00:00:00Z a\r\n2020-01-01T00:00:01Z b\r\ngarbage c\r\nnospace\r\n2020-01-01T00:00:02Z e\r\n")
	stamp := func(s string) int64 { ts, _ := time.Parse(time.RFC3339, s); return ts.UnixMilli() }
	args := func(dir string, more ...string) []string {
		return append([]string{"--dir", dir, "produce", "ev", "--timestamp-regex", `^(\S+) `}, more...)
	}

	dir := newLog(t, "ev", 1)
	r := strom(t, in, args(dir)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), `strom: stdin line 3: time text "garbage" does not parse as --timestamp-format rfc3339: parsing time "garbage"`)
	assert.Contains(t, string(r.stderr), "(the lines before it were appended;")
	recs := parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 2, "the two lines before the bad one")
	assert.Equal(t, stamp("2020-01-01T00:00:01Z"), recs[1].Timestamp)

	r = strom(t, []byte("nospace\n"), args(dir)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), `strom: stdin line 1: --timestamp-regex "^(\\S+) " does not match the line "nospace" (nothing was appended;`)

	dir = newLog(t, "ev", 1)
	r = strom(t, in, args(dir, "--timestamp-on-error", "skip")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 5 lines: 3 with the time of their line, 2 skipped (--timestamp-on-error skip)\n"+
		`strom: warning: 2 line(s) had no time that --timestamp-regex and --timestamp-format could read, or a time too far ahead; left out (first: stdin line 3: time text "garbage" does not parse`,
		string(r.stderr[:bytes.LastIndex(r.stderr, []byte(" as --timestamp-format"))]))
	recs = parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 3)
	for i, want := range []string{"2020-01-01T00:00:00Z a", "2020-01-01T00:00:01Z b", "2020-01-01T00:00:02Z e"} {
		assert.Equal(t, want, *recs[i].Value)
		assert.Equal(t, stamp(strings.Fields(want)[0]), recs[i].Timestamp)
	}

	dir = newLog(t, "ev", 1)
	before := time.Now().UnixMilli()
	r = strom(t, in, args(dir, "--timestamp-on-error", "ingest")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "strom: produce: 5 lines: 3 with the time of their line, 2 at the time of ingestion (--timestamp-on-error ingest)\n")
	assert.Contains(t, string(r.stderr), `strom: warning: 2 line(s) had no time that --timestamp-regex and --timestamp-format could read, or a time too far ahead; kept at the time of ingestion (first: stdin line 3: time text "garbage" does not parse`)
	assert.True(t, bytes.HasSuffix(r.stderr, []byte(")\n")), "the first line's error closes the warning: %s", r.stderr)
	recs = parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 5)
	assert.Equal(t, stamp("2020-01-01T00:00:02Z"), recs[4].Timestamp)
	for _, i := range []int{2, 3} {
		assert.GreaterOrEqual(t, recs[i].Timestamp, before, "record %d %q keeps the time of ingestion", i, *recs[i].Value)
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{args(dir, "--timestamp-on-error", "drop"), `--timestamp-on-error "drop": want fail, skip or ingest`},
		{args(dir, "--timestamp-format", "yyyy-MM-dd"), `--timestamp-format "yyyy-MM-dd": not a Go time layout`},
		{args(dir, "--timestamp-format", "15:04:05"), "has no day of the month"},
		{args(dir, "--timestamp-location", "Mars/Olympus"), `--timestamp-location "Mars/Olympus"`},
		{args(dir, "--timestamp-year", "-1"), "--timestamp-year -1"},
		{args(dir, "--timestamp-year", "2015"), `--timestamp-year 2015: --timestamp-format rfc3339 has a year of its own`},
		{args(dir, "--timestamp-year", "2015", "--timestamp-format", "unixms"), `--timestamp-year 2015: --timestamp-format unixms has a year of its own`},
		{args(dir, "--format", "json"), "--timestamp-regex applies to raw input only"},
		{[]string{"--dir", dir, "produce", "ev", "--timestamp-regex", `^\S+`}, "needs a capture group"},
		{[]string{"--dir", dir, "produce", "ev", "--timestamp-format", "unix"}, "--timestamp-format needs --timestamp-regex"},
	} {
		r := strom(t, in, c.args...)
		assert.Equal(t, 2, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, string(r.stderr), c.msg, "%q", c.args)
	}
}

// TestProduceRefusesATopicWrittenExactlyOnce ensures produce refuses a topic
// that holds a sink.LogSink's transaction file (sink.TransactionFile): the
// sink's next start would truncate away whatever produce appended past the
// committed ends, so exit 0 would be a silent loss. It exits 1 with an error
// naming the topic, the file and why, and appends nothing; the same topic
// without the file takes the line.
func TestProduceRefusesATopicWrittenExactlyOnce(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "out", 2)
	txn := filepath.Join(dir, "out", sink.TransactionFile)
	require.NoError(t, os.WriteFile(txn, []byte("not read: its presence is enough"), 0o644))

	r := strom(t, []byte("extra1\n"), "--dir", dir, "produce", "out")
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "topic out is written exactly once by a pipeline (its transaction file "+txn+" exists)")
	assert.Contains(t, string(r.stderr), "truncated away at the sink's next start")
	assert.Empty(t, ok(t, nil, "--dir", dir, "consume", "out"), "nothing appended")

	require.NoError(t, os.Remove(txn))
	ok(t, []byte("extra1\n"), "--dir", dir, "produce", "out")
	assert.Equal(t, "extra1\n", string(ok(t, nil, "--dir", dir, "consume", "out")), "without the file it appends")
}

// TestProduceTimeTooFarAheadIsALineErrorNotTheBatchs ensures a line whose
// time is more than the topic's bound (log.DefaultMaxTimestampAhead) ahead
// of the clock is handled as a line whose time does not parse, instead of
// failing the append of its whole batch: by default produce stops with an
// error naming the line, its text and how far ahead, and a hint, the lines
// before it appended; skip leaves it out and ingest keeps it at the time of
// ingestion. A time inside the bound is kept.
func TestProduceTimeTooFarAheadIsALineErrorNotTheBatchs(t *testing.T) {
	t.Parallel()
	soon := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	in := []byte("2020-01-01T00:00:00Z a\n" + soon + " b\n2999-01-01T00:00:00Z c\n2020-01-01T00:00:02Z d\n")
	args := func(dir string, more ...string) []string {
		return append([]string{"--dir", dir, "produce", "ev", "--timestamp-regex", `^(\S+) `}, more...)
	}

	dir := newLog(t, "ev", 1)
	r := strom(t, in, args(dir)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), `strom: stdin line 3: time text "2999-01-01T00:00:00Z" in the line "2999-01-01T00:00:00Z c" is 2999-01-01T00:00:00Z, `)
	assert.Regexp(t, `, \d+ days ahead of the clock \(\S+\), more than the 1h0m0s a topic of create time takes`, string(r.stderr))
	assert.Contains(t, string(r.stderr), "check --timestamp-location and --timestamp-year (the lines before it were appended;")
	assert.NotContains(t, string(r.stderr), "appending stdin lines")
	recs := parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 2, "the lines before the one too far ahead")
	assert.Equal(t, soon+" b", *recs[1].Value)

	dir = newLog(t, "ev", 1)
	r = strom(t, in, args(dir, "--timestamp-on-error", "skip")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "strom: produce: 4 lines: 3 with the time of their line, 1 skipped (--timestamp-on-error skip)\n")
	recs = parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 3)
	assert.Equal(t, "2020-01-01T00:00:02Z d", *recs[2].Value)

	dir = newLog(t, "ev", 1)
	before := time.Now().UnixMilli()
	r = strom(t, in, args(dir, "--timestamp-on-error", "ingest")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "1 at the time of ingestion (--timestamp-on-error ingest)")
	recs = parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json"))
	require.Len(t, recs, 4)
	assert.GreaterOrEqual(t, recs[2].Timestamp, before)
	assert.Less(t, recs[2].Timestamp, time.Now().Add(time.Minute).UnixMilli(), "the time of ingestion, not the year 2999")
}

// TestProduceTimestampRegexWarnsOnATopicOfLogAppendTime ensures produce
// --timestamp-regex into a topic of LogAppendTime, which stores the time of
// each append instead of the times read from the lines, warns on stderr
// naming the topic and its setting, and still appends every line (a time far
// ahead too: such a topic refuses none); a topic of create time gets no
// warning.
func TestProduceTimestampRegexWarnsOnATopicOfLogAppendTime(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	ok(t, nil, "--dir", dir, "topics", "create", "stamped", "--timestamp-type", "LogAppendTime")
	in := []byte("2020-01-01T00:00:00Z a\n2999-01-01T00:00:00Z b\n")
	before := time.Now().UnixMilli()
	r := strom(t, in, "--dir", dir, "produce", "stamped", "--timestamp-regex", `^(\S+) `)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "strom: warning: topic stamped has timestamp type LogAppendTime (topics create --timestamp-type): it stores the time of each append, not the times --timestamp-regex reads from the lines\n")
	recs := parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "stamped", "--format", "json"))
	require.Len(t, recs, 2)
	for _, rec := range recs {
		assert.GreaterOrEqual(t, rec.Timestamp, before, "%q: the time of the append", *rec.Value)
	}

	ok(t, nil, "--dir", dir, "topics", "create", "created")
	r = strom(t, in[:23], "--dir", dir, "produce", "created", "--timestamp-regex", `^(\S+) `)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.NotContains(t, string(r.stderr), "warning")
}
