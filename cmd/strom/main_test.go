package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// update rewrites the golden files under testdata instead of comparing:
// go test ./cmd/strom -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// stromBin is the strom binary TestMain builds once.
var stromBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

// stromBinEnv passes the binary a test process built to the test processes
// it starts (testutil.RunInTmpfs), so they do not build it again.
const stromBinEnv = "STROM_TEST_CLI_BIN"

func runMain(m *testing.M) int {
	if bin := os.Getenv(stromBinEnv); bin != "" {
		stromBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "strom-cli-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "strom test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	stromBin = filepath.Join(dir, "strom")
	build := exec.Command("go", "build", "-o", stromBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "strom test: go build failed: %v\n%s", err, out)
		return 1
	}
	os.Setenv(stromBinEnv, stromBin)
	return m.Run()
}

// result is what one run of strom did.
type result struct {
	code           int
	stdout, stderr []byte
}

// strom runs the binary with stdin and args and returns what it did.
func strom(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(stromBin, args...)
	cmd.Env = testutil.CleanEnv()
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.Bytes(), stderr: errb.Bytes()}
}

// ok runs strom and requires exit 0, returning stdout.
func ok(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	r := strom(t, stdin, args...)
	require.Equal(t, 0, r.code, "strom %q: stderr: %s", args, r.stderr)
	return r.stdout
}

// newLog creates a log directory holding topic with n partitions.
func newLog(t *testing.T, topic string, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	ok(t, nil, "--dir", dir, "topics", "create", topic, "--partitions", fmt.Sprint(n))
	return dir
}

// jsonLine is a line of consume --format json, as the tests read it.
type jsonLine struct {
	Topic         string  `json:"topic"`
	Partition     int32   `json:"partition"`
	Offset        int64   `json:"offset"`
	Timestamp     int64   `json:"timestamp"`
	Key           *string `json:"key"`
	KeyEncoding   string  `json:"keyEncoding"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"valueEncoding"`
}

func parseJSONLines(t *testing.T, out []byte) []jsonLine {
	t.Helper()
	var lines []jsonLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var l jsonLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "line %q", sc.Text())
		lines = append(lines, l)
	}
	require.NoError(t, sc.Err())
	return lines
}

// withFinalNewline is data as raw consume prints it back: every record
// ends in '\n', the last line of input too.
func withFinalNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(bytes.Clone(b), '\n')
	}
	return b
}

// TestLoghubSamplesRoundTripByteForByte ensures every Loghub sample produced
// from stdin with --keep-cr is consumed back exactly (CRLF line endings
// included), through raw output and through JSON output produced again, and
// produced without it comes back with LF line endings.
func TestLoghubSamplesRoundTripByteForByte(t *testing.T) {
	t.Parallel()
	src := loghub.Dir(t)
	for _, name := range loghub.Files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join(src, name))
			require.NoError(t, err)
			dir := newLog(t, "logs", 1)
			ok(t, nil, "--dir", dir, "topics", "create", "copy")
			ok(t, nil, "--dir", dir, "topics", "create", "lf")
			ok(t, data, "--dir", dir, "produce", "lf")
			lf := bytes.ReplaceAll(withFinalNewline(data), []byte("\r\n"), []byte("\n"))
			assert.True(t, bytes.Equal(lf, ok(t, nil, "--dir", dir, "consume", "lf")), "raw output is not the input with LF endings")

			ok(t, data, "--dir", dir, "produce", "logs", "--keep-cr")
			assert.True(t, bytes.Equal(withFinalNewline(data), ok(t, nil, "--dir", dir, "consume", "logs")), "raw output differs from the input")

			js := ok(t, nil, "--dir", dir, "consume", "logs", "--format", "json")
			assert.Len(t, parseJSONLines(t, js), bytes.Count(withFinalNewline(data), []byte{'\n'}))
			ok(t, js, "--dir", dir, "produce", "copy", "--format", "json")
			assert.True(t, bytes.Equal(withFinalNewline(data), ok(t, nil, "--dir", dir, "consume", "copy")), "JSON round trip differs from the input")
		})
	}
}

// awkwardLines are values the old tool lost or refused: flag-like lines,
// NUL, invalid UTF-8 (a lone Latin-1 byte, a BOM-like pair, an encoded
// surrogate), CRLF, 1 MiB and empty.
var awkwardLines = [][]byte{
	[]byte("-"), []byte("--"), []byte("-key=x"), []byte("--dir=/etc"),
	[]byte("a\x00b"), []byte("caf\xe9"), []byte("\xff\xfe"), []byte("\xed\xa0\x80"),
	[]byte("crlf\r"), bytes.Repeat([]byte("x"), 1<<20), {}, []byte("caf\u00e9 <&>"),
}

// TestAwkwardLinesRoundTripRawAndJSON ensures each awkward line comes back
// byte for byte (with --keep-cr, for the CRLF line) through raw output and
// through JSON output, where a value
// that is not UTF-8 is base64 with valueEncoding and every other one is
// the string itself.
func TestAwkwardLinesRoundTripRawAndJSON(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "odd", 1)
	ok(t, nil, "--dir", dir, "topics", "create", "copy")
	input := append(bytes.Join(awkwardLines, []byte{'\n'}), '\n')
	out := ok(t, input, "--dir", dir, "produce", "odd", "--print-offsets", "--keep-cr")
	assert.Equal(t, len(awkwardLines), bytes.Count(out, []byte("odd/0@")))
	assert.True(t, bytes.Equal(input, ok(t, nil, "--dir", dir, "consume", "odd")), "raw output differs")

	js := ok(t, nil, "--dir", dir, "consume", "odd", "--format", "json")
	lines := parseJSONLines(t, js)
	require.Len(t, lines, len(awkwardLines))
	for i, l := range lines {
		want := awkwardLines[i]
		assert.Equal(t, int64(i), l.Offset)
		assert.Nil(t, l.Key, "no key")
		require.NotNil(t, l.Value)
		if l.ValueEncoding == "base64" {
			assert.False(t, strings.Contains(string(want), "x") && len(want) == 1<<20, "valid UTF-8 sent as base64")
			assert.Equal(t, want, mustBase64(t, *l.Value), "line %d", i)
		} else {
			assert.Equal(t, "", l.ValueEncoding)
			assert.Equal(t, string(want), *l.Value, "line %d", i)
		}
	}
	assert.Equal(t, "base64", lines[5].ValueEncoding, `"caf\xe9" is not UTF-8`)
	assert.Equal(t, "base64", lines[7].ValueEncoding, "an encoded surrogate is not UTF-8")
	assert.Contains(t, string(js), `"value":"a\u0000b"`)
	assert.Contains(t, string(js), `"value":"café <&>"`, "no HTML escaping")

	ok(t, js, "--dir", dir, "produce", "copy", "--format", "json")
	assert.True(t, bytes.Equal(input, ok(t, nil, "--dir", dir, "consume", "copy")), "JSON round trip differs")
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	require.NoError(t, json.Unmarshal([]byte(`"`+s+`"`), &b))
	return b
}

// TestProduceKeysPartitionsAndJSONFields ensures --key-regex keys records
// (same key, same partition), --partition pins them, and JSON input carries
// key, headers and timestamp through.
func TestProduceKeysPartitionsAndJSONFields(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 4)
	in := []byte("alice 1\nbob 1\nalice 2\nnokey\nbob 2\n")
	out := string(ok(t, in, "--dir", dir, "produce", "ev", "--key-regex", `^(\w+) \d`, "--print-offsets"))
	offs := strings.Fields(out)
	require.Len(t, offs, 5)
	partOf := func(s string) string { return strings.SplitN(strings.TrimPrefix(s, "ev/"), "@", 2)[0] }
	assert.Equal(t, partOf(offs[0]), partOf(offs[2]), "alice's records share a partition")
	assert.Equal(t, partOf(offs[1]), partOf(offs[4]), "bob's records share a partition")

	ok(t, []byte("x\ny\n"), "--dir", dir, "produce", "ev", "--partition", "3")
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "consume", "ev", "--partition", "3")), "x\ny\n")

	js := `{"key":"k","value":"v","timestamp":1700000000000,"headers":[{"key":"h","value":"aGk=","valueEncoding":"base64"},{"key":"n","value":null}]}` + "\n"
	ok(t, []byte(js), "--dir", dir, "produce", "ev", "--format", "json", "--partition", "2")
	got := ok(t, nil, "--dir", dir, "consume", "ev", "--partition", "2", "--format", "json", "--from", "latest")
	assert.Empty(t, got, "latest without --follow prints nothing")
	got = ok(t, nil, "--dir", dir, "consume", "ev", "--partition", "2", "--format", "json", "--from", "2023-11-14T22:13:20Z")
	assert.Contains(t, string(got), `"timestamp":1700000000000,"key":"k","value":"v","headers":[{"key":"h","value":"hi"},{"key":"n","value":null}]}`)

	r := strom(t, []byte("{\"value\":\"caf\xe9\"}\n"), "--dir", dir, "produce", "ev", "--format", "json")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "stdin line 1: not valid UTF-8")
}

// TestConsumeFromAndMax ensures --from OFFSET starts there, --max stops, and
// an offset past the end is an error naming the partition's range.
func TestConsumeFromAndMax(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "n", 1)
	ok(t, []byte("0\n1\n2\n3\n4\n"), "--dir", dir, "produce", "n")
	assert.Equal(t, "2\n3\n", string(ok(t, nil, "--dir", dir, "consume", "n", "--from", "2", "--max", "2")))
	assert.Equal(t, "0\n", string(ok(t, nil, "--dir", dir, "consume", "n", "--max", "1")))
	r := strom(t, nil, "--dir", dir, "consume", "n", "--from", "9")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "partition 0")
	assert.Contains(t, string(r.stderr), "offset 9")
}

// TestUsageErrorsExitTwo ensures a bad command line exits 2 with a message
// saying what is wrong, and never runs the command.
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"topics", "frob"}, `unknown command "frob" for "strom topics"`},
		{[]string{"--dir", dir, "consume"}, "takes 1 argument (TOPIC), got 0"},
		{[]string{"--dir", dir, "consume", "ev", "--partition", "-1"}, "--partition -1 is negative"},
		{[]string{"--dir", dir, "consume", "ev", "--from", "-5"}, "never negative"},
		{[]string{"--dir", dir, "consume", "ev", "--from", "yesterday"}, "RFC 3339"},
		{[]string{"--dir", dir, "consume", "ev", "--from", "3"}, "give --partition"},
		{[]string{"--dir", dir, "consume", "ev", "--partition", "7"}, "partitions 0 to 1"},
		{[]string{"--dir", dir, "consume", "ev", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--dir", dir, "positions", "set", "--state", dir, "ev", "-1", "0"}, "-1 is not a valid argument"},
		{[]string{"--dir", dir, "positions", "set", "--state", dir, "--", "ev", "-1", "0"}, `partition "-1" is not a number >= 0`},
		{[]string{"--dir", dir, "produce", "ev", "--format", "xml"}, "want raw or json"},
		{[]string{"--dir", dir, "produce", "ev", "--segment-bytes", "0"}, "--segment-bytes 0: want 64 to"},
		{[]string{"--dir", dir, "topics", "create", "ev", "--retention", "-5s"}, "--retention -5s is negative"},
		{[]string{"--dir", dir, "topics", "create", "ev", "--retention-bytes", "-7"}, "--retention-bytes -7 is negative"},
		{[]string{"--dir", dir, "positions", "set", "--state", dir, "ev", "7", "5"}, "partition 7: topic ev has partitions 0 to 1"},
		{[]string{"consume", "ev"}, "give --dir DIR or set STROM_DIR"},
		{[]string{"--dir", dir, "topics", "create", "../x"}, "invalid topic name"},
	} {
		r := strom(t, nil, c.args...)
		assert.Equal(t, 2, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, string(r.stderr), c.msg, "%q", c.args)
	}
}

// TestMissingDirectoryIsReportedAndNeverCreated ensures reads and a produce
// to a missing directory or unknown topic fail, say why, and create nothing.
func TestMissingDirectoryIsReportedAndNeverCreated(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	for _, args := range [][]string{
		{"consume", "ev"}, {"produce", "ev"}, {"topics", "list"}, {"topics", "describe"},
		{"verify"}, {"retention"}, {"positions", "--state", missing}, {"serve", "--addr", "127.0.0.1:0"},
	} {
		r := strom(t, []byte("x\n"), append([]string{"--dir", missing}, args...)...)
		assert.Equal(t, 1, r.code, "%q", args)
		assert.Contains(t, string(r.stderr), "log directory "+missing+" does not exist", "%q", args)
		assert.NoDirExists(t, missing, "%q created it", args)
	}
	dir := newLog(t, "ev", 1)
	r := strom(t, []byte("x\n"), "--dir", dir, "produce", "other")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "unknown topic: other")
	assert.NoDirExists(t, filepath.Join(dir, "other"))
}

// TestConsumeFollowSeesAnotherProcessAppendWithin100ms ensures a follower
// prints a record appended by another process within 100 ms of that
// process's exit.
func TestConsumeFollowSeesAnotherProcessAppendWithin100ms(t *testing.T) {
	dir := newLog(t, "live", 1)
	cmd := exec.Command(stromBin, "--dir", dir, "consume", "live", "--follow")
	cmd.Env = testutil.CleanEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	wait := func(want string, within time.Duration) {
		t.Helper()
		timer := time.NewTimer(within)
		defer timer.Stop()
		select {
		case got := <-lines:
			assert.Equal(t, want, got)
		case <-timer.C:
			t.Fatalf("the follower did not print %q within %v", want, within)
		}
	}
	ok(t, []byte("first\n"), "--dir", dir, "produce", "live")
	wait("first", 5*time.Second) // the follower is up and following
	ok(t, []byte("second\n"), "--dir", dir, "produce", "live")
	wait("second", 100*time.Millisecond)
}

// TestPositionsListAndSet ensures positions shows each saved position with
// its lag, and positions set saves one the list then shows.
func TestPositionsListAndSet(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, []byte("a\nb\nc\n"), "--dir", dir, "produce", "ev", "--partition", "1")
	state := filepath.Join(t.TempDir(), "state")
	r := strom(t, nil, "--dir", dir, "positions", "--state", state)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "checkpoint folder "+state+" does not exist")
	require.NoError(t, os.Mkdir(state, 0o755))
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "1", "1")
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "latest")
	out := string(ok(t, nil, "--dir", dir, "positions", "--state", state))
	assert.Regexp(t, `(?m)^ev\s+1\s+1\s+\d+\s+0\s+3\s+2\s*$`, out)
	assert.Regexp(t, `(?m)^ev\s+0\s+0\s+-1\s+0\s+0\s+0\s*$`, out)
	r = strom(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "1", "4")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "outside the log's 0 (log start offset) to 3 (next offset)")
}

// TestTopicsCreateTimestampType ensures --timestamp-type LogAppendTime
// makes the topic store the time of the append instead of a record's
// timestamp from the future, which a CreateTime topic refuses with the
// bound in the message, and that an unknown type is a usage error.
func TestTopicsCreateTimestampType(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	future := `{"key":"k","value":"v","timestamp":4102444800000}` + "\n" // 2100-01-01
	out := string(ok(t, nil, "--dir", dir, "topics", "create", "stamped", "--timestamp-type", "LogAppendTime"))
	assert.Contains(t, out, "topic stamped: 1 partition(s), retention unlimited, timestamp type LogAppendTime\n")
	ok(t, []byte(future), "--dir", dir, "produce", "stamped", "--format", "json")
	js := string(ok(t, nil, "--dir", dir, "consume", "stamped", "--format", "json"))
	assert.Contains(t, js, `"value":"v"`)
	assert.NotContains(t, js, "4102444800000", "the append time replaced the record's timestamp")

	// A topic of create time refuses the line too far ahead, not the batch:
	// the line before it is appended.
	ok(t, nil, "--dir", dir, "topics", "create", "created")
	r := strom(t, []byte(`{"value":"first"}`+"\n"+future), "--dir", dir, "produce", "created", "--format", "json")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `^strom: stdin line 2: timestamp 4102444800000 \(2100-01-01T00:00:00Z\) is \d+ days ahead of the clock \(\S+\), more than the 1h0m0s a topic of create time takes \(the lines before it were appended\)\n$`, string(r.stderr))
	assert.Equal(t, "first\n", string(ok(t, nil, "--dir", dir, "consume", "created")))

	r = strom(t, nil, "--dir", dir, "topics", "create", "bad", "--timestamp-type", "later")
	assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), `unknown timestamp type "later"`)
}

// TestTopicsCreateCleanupPolicy ensures --cleanup-policy compact makes a
// compacted topic that describe reports (text and JSON) and that refuses a
// line without a key naming it, and that an unknown policy is a usage error.
func TestTopicsCreateCleanupPolicy(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	out := string(ok(t, nil, "--dir", dir, "topics", "create", "users", "--cleanup-policy", "compact,delete"))
	assert.Contains(t, out, "topic users: 1 partition(s), retention unlimited, cleanup policy compact,delete\n")
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "users")), "retention unlimited, cleanup policy compact,delete\n")
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "users", "--json")), `"cleanupPolicy": "compact,delete"`)

	ok(t, []byte(`{"key":"u1","value":"ann"}`+"\n"), "--dir", dir, "produce", "users", "--format", "json")
	r := strom(t, []byte(`{"value":"nobody"}`+"\n"), "--dir", dir, "produce", "users", "--format", "json")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "has no key, and the topic is compacted")
	assert.Equal(t, "ann\n", string(ok(t, nil, "--dir", dir, "consume", "users")))

	// A pass on demand, and what describe says of the cleaner, on a topic
	// written with small segments.
	lg, err := log.Open(dir, log.WithSegmentBytes(4<<10), log.WithCleanerInterval(0))
	require.NoError(t, err)
	tp, err := lg.CreateTopic("small", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	for i := range 1000 {
		_, _, err := tp.Append(context.Background(), log.Record{Key: fmt.Appendf(nil, "u%d", i%10), Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, lg.Close())
	out = string(ok(t, nil, "--dir", dir, "topics", "describe", "small"))
	assert.Regexp(t, `partition 0 cleaner: cleaned to offset 0, dirty ratio 1\.00 \(\d+ of \d+ sealed bytes\), 0 compacted segment\(s\), no pass yet\n`, out)
	out = string(ok(t, nil, "--dir", dir, "compact"))
	assert.Regexp(t, `small partition 0: rewrote \d+ segment\(s\), removed \d+ records \(0 tombstones\), \d+ -> \d+ bytes; cleaned to offset \d+\n`, out)
	assert.Contains(t, out, "users: nothing to compact (only sealed segments are compacted, never the active one)\n")
	out = string(ok(t, nil, "--dir", dir, "topics", "describe", "small", "--json"))
	assert.Contains(t, out, `"compacted": true`)
	assert.Regexp(t, `"dirtyRatio": 0[,\n]`, out)
	var last []byte
	for _, line := range strings.Split(strings.TrimSpace(string(ok(t, nil, "--dir", dir, "consume", "small", "--format", "json"))), "\n") {
		if strings.Contains(line, `"key":"u3"`) {
			last = []byte(line)
		}
	}
	assert.Contains(t, string(last), `"value":"v993"`, "the latest value of each key is kept")
	r = strom(t, nil, "--dir", dir, "compact", "missing")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "strom: compact topic missing: ")

	r = strom(t, nil, "--dir", dir, "topics", "create", "bad", "--cleanup-policy", "shrink")
	assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), `unknown cleanup policy "shrink"`)
}

// TestRetentionDeletesOldSegments ensures retention applies a topic's byte
// bound once and says what it deleted.
func TestRetentionDeletesOldSegments(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	ok(t, nil, "--dir", dir, "topics", "create", "ev", "--retention-bytes", "0")
	ok(t, bytes.Repeat([]byte("0123456789abcdef\n"), 100), "--dir", dir, "produce", "ev", "--segment-bytes", "512")
	out := string(ok(t, nil, "--dir", dir, "retention"))
	assert.Regexp(t, `^ev partition 0: deleted \d+ segment\(s\), \d+ records, \d+ bytes \(00000000000000000000.log, `, out)
	assert.Regexp(t, `log start offset now [1-9]\d*\n$`, out)
	assert.Equal(t, "ev: nothing to delete (retention bytes 0)\n", string(ok(t, nil, "--dir", dir, "retention", "ev")))
}

// describeJSON mirrors topics describe --json.
type describeJSON []struct {
	Topic          string `json:"topic"`
	PartitionCount int    `json:"partitionCount"`
	Partitions     []struct {
		Partition      int32 `json:"partition"`
		LogStartOffset int64 `json:"logStartOffset"`
		NextOffset     int64 `json:"nextOffset"`
		Segments       []struct {
			File       string `json:"file"`
			Path       string `json:"path"`
			BaseOffset int64  `json:"baseOffset"`
			NextOffset int64  `json:"nextOffset"`
			Records    int64  `json:"records"`
			Bytes      int64  `json:"bytes"`
			FileBytes  int64  `json:"fileBytes"`
			WritePath  string `json:"writePath"`
			Sealed     bool   `json:"sealed"`
		} `json:"segments"`
	} `json:"partitions"`
}

// TestDescribeJSONAgreesWithWhatWasWritten ensures describe --json counts
// the records produced to each partition, in contiguous segments whose
// sizes are the files' sizes.
func TestDescribeJSONAgreesWithWhatWasWritten(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, bytes.Repeat([]byte("a line of thirty-two bytes.....\n"), 300), "--dir", dir, "produce", "ev", "--partition", "0", "--segment-bytes", "4096", "--mode", "file")
	ok(t, []byte("one\ntwo\n"), "--dir", dir, "produce", "ev", "--partition", "1")
	var d describeJSON
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "topics", "describe", "--json"), &d))
	require.Len(t, d, 1)
	require.Equal(t, 2, d[0].PartitionCount)
	want := []int64{300, 2}
	for i, p := range d[0].Partitions {
		assert.Equal(t, int32(i), p.Partition)
		assert.Equal(t, int64(0), p.LogStartOffset)
		assert.Equal(t, want[i], p.NextOffset)
		next, records := int64(0), int64(0)
		for j, s := range p.Segments {
			assert.Equal(t, next, s.BaseOffset, "segments are contiguous")
			assert.Equal(t, fmt.Sprintf("%020d.log", s.BaseOffset), s.File)
			fi, err := os.Stat(s.Path)
			require.NoError(t, err)
			assert.Equal(t, fi.Size(), s.FileBytes)
			assert.Equal(t, j < len(p.Segments)-1, s.Sealed)
			if s.Sealed {
				assert.Equal(t, "sealed", s.WritePath)
				assert.Equal(t, s.FileBytes, s.Bytes)
			}
			next, records = s.NextOffset, records+s.Records
		}
		assert.Equal(t, want[i], records)
		assert.Equal(t, want[i], next)
	}
	assert.Greater(t, len(d[0].Partitions[0].Segments), 2, "4 KiB segments rolled")
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/strom -run Golden -update to create it")
	assert.Equal(t, string(want), string(got), "%s differs (go test ./cmd/strom -run Golden -update rewrites it)", path)
}

// TestGoldenHelp ensures every command's --help, with its example, is as
// reviewed in testdata/help-*.golden.
func TestGoldenHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{}, {"topics"}, {"topics", "create"}, {"topics", "list"}, {"topics", "describe"},
		{"produce"}, {"consume"}, {"positions"}, {"positions", "set"},
		{"dump"}, {"verify"}, {"retention"}, {"serve"},
	} {
		out := ok(t, nil, append(args, "--help")...)
		assert.Contains(t, string(out), "Examples:", "%q", args)
		golden(t, "help-"+strings.Join(append([]string{"strom"}, args...), "-")+".golden", out)
	}
}

var (
	modTimeRe   = regexp.MustCompile(`"modTime": "[^"]*"`)
	diskBytesRe = regexp.MustCompile(`"diskBytes": \d+`)
	topicIDRe   = regexp.MustCompile(`"(id|topicId)": "[A-Za-z0-9_-]{22}"`)
)

// TestGoldenJSON ensures the --json outputs are as reviewed in
// testdata/*.json.golden, with the temporary directory, file times and
// file-system dependent sizes replaced.
func TestGoldenJSON(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, nil, "--dir", dir, "topics", "create", "audit", "--retention-bytes", "1048576", "--retention", "168h")
	in := `{"key":"alice","value":"hello","timestamp":1764547200000}
{"key":null,"value":"Y2Fm6Q==","valueEncoding":"base64","timestamp":1764547200001,"headers":[{"key":"trace","value":"t-1"}]}
{"key":"","value":"","timestamp":1764547200002}
{"key":"bob","value":null,"timestamp":1764547200003}
`
	ok(t, []byte(in), "--dir", dir, "produce", "ev", "--format", "json", "--partition", "1", "--mode", "file")
	state := t.TempDir()
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "1", "2")
	norm := func(b []byte) []byte {
		b = bytes.ReplaceAll(b, []byte(dir), []byte("$DIR"))
		b = bytes.ReplaceAll(b, []byte(state), []byte("$STATE"))
		b = modTimeRe.ReplaceAll(b, []byte(`"modTime": "MODTIME"`))
		b = topicIDRe.ReplaceAll(b, []byte(`"$1": "TOPICID"`))
		return diskBytesRe.ReplaceAll(b, []byte(`"diskBytes": DISKBYTES`))
	}
	golden(t, "topics-list.json.golden", norm(ok(t, nil, "--dir", dir, "topics", "list", "--json")))
	golden(t, "topics-describe.json.golden", norm(ok(t, nil, "--dir", dir, "topics", "describe", "ev", "--json")))
	golden(t, "consume.json.golden", norm(ok(t, nil, "--dir", dir, "consume", "ev", "--format", "json")))
	golden(t, "positions.json.golden", norm(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json")))
	golden(t, "dump.json.golden", norm(ok(t, nil, "dump", "--json", filepath.Join(dir, "ev", "1", "00000000000000000000.log"))))
	golden(t, "verify.json.golden", norm(ok(t, nil, "--dir", dir, "verify", "--json")))
}

// frameAt is one frame of dump --json, as the tests read it.
type frameAt struct {
	Position int64  `json:"position"`
	Offset   int64  `json:"offset"`
	Length   uint32 `json:"length"`
	CRCOK    bool   `json:"crcOK"`
	Error    string `json:"error"`
}

// dumpJSON dumps a segment file with --json and returns its frames.
func dumpJSON(t *testing.T, path string) []frameAt {
	t.Helper()
	var frames []frameAt
	for line := range bytes.Lines(ok(t, nil, "dump", "--json", path)) {
		var f frameAt
		require.NoError(t, json.Unmarshal(line, &f))
		frames = append(frames, f)
	}
	return frames
}

// segmentsOf returns the segment files of a partition, oldest first.
func segmentsOf(t *testing.T, dir, topic string, partition int) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, topic, fmt.Sprint(partition), "*.log"))
	require.NoError(t, err)
	return segs
}

// TestDumpShowsEveryOffsetOnce ensures dumping every segment of a partition
// shows each offset exactly once, in text and JSON.
func TestDumpShowsEveryOffsetOnce(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	ok(t, bytes.Repeat([]byte("thirty-two bytes of a log line.\n"), 250), "--dir", dir, "produce", "ev", "--segment-bytes", "4096")
	segs := segmentsOf(t, dir, "ev", 0)
	require.Greater(t, len(segs), 2)
	seen := map[int64]int{}
	textLines := 0
	for _, seg := range segs {
		for _, f := range dumpJSON(t, seg) {
			assert.True(t, f.CRCOK)
			assert.Empty(t, f.Error)
			seen[f.Offset]++
		}
		out := string(ok(t, nil, "dump", seg))
		textLines += strings.Count(out, "\noffset: ")
		assert.Regexp(t, `\n\d+ frames, end of data at byte \d+\n$`, out)
	}
	assert.Len(t, seen, 250)
	for off := range int64(250) {
		assert.Equal(t, 1, seen[off], "offset %d", off)
	}
	assert.Equal(t, 250, textLines)
}

// TestVerifyPassesCleanAndFindsFlippedByte ensures verify exits 0 on a clean
// log and 3 on a byte flipped in a sealed segment, naming partition,
// segment, byte position and offset; that a read meeting the damage exits
// 3 too; and that --repair cuts there and says how many records it dropped.
func TestVerifyPassesCleanAndFindsFlippedByte(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	ok(t, bytes.Repeat([]byte("thirty-two bytes of a log line.\n"), 250), "--dir", dir, "produce", "ev", "--segment-bytes", "4096")
	out := string(ok(t, nil, "--dir", dir, "verify"))
	assert.Contains(t, out, "250 records")
	assert.Contains(t, out, "no corruption found")

	seg := segmentsOf(t, dir, "ev", 0)[0]
	victim := dumpJSON(t, seg)[3]
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	var b [1]byte
	_, err = f.ReadAt(b[:], victim.Position+8+20)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b[:], victim.Position+8+20)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	where := fmt.Sprintf("partition 0 segment %s byte %d offset %d", seg, victim.Position, victim.Offset)
	r := strom(t, nil, "--dir", dir, "verify")
	assert.Equal(t, 3, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stdout), "CORRUPT: topic ev "+where)
	assert.Contains(t, string(r.stderr), fmt.Sprintf("partition 0: corrupt frame in segment %s at byte %d (offset %d)", seg, victim.Position, victim.Offset))

	r = strom(t, nil, "dump", seg)
	assert.Equal(t, 3, r.code)
	assert.Contains(t, string(r.stdout), fmt.Sprintf("BAD FRAME position: %d offset: %d", victim.Position, victim.Offset))

	r = strom(t, nil, "--dir", dir, "consume", "ev")
	assert.Equal(t, 3, r.code, "a read that meets corruption exits 3: %s", r.stderr)
	assert.Contains(t, string(r.stderr), fmt.Sprintf("at byte %d (offset %d)", victim.Position, victim.Offset))

	out = string(ok(t, nil, "--dir", dir, "verify", "--repair"))
	assert.Regexp(t, `repaired ev partition 0: cut \d+ bytes from `+regexp.QuoteMeta(seg)+` \(.*\), dropped 247 records, deleted \d+ later segment`, out)
	assert.Contains(t, out, "after repair: verified 1 topic(s), 1 partition(s), 1 segment(s): 3 records")
	assert.Equal(t, "thirty-two bytes of a log line.\n", string(ok(t, nil, "--dir", dir, "consume", "ev", "--from", "2")))
}

// TestTornTailIsReportedNotCorruptAndRepairCutsIt ensures a half-written
// frame at the end of a partition is a torn tail for dump and verify (exit
// 0) and that verify --repair cuts it.
func TestTornTailIsReportedNotCorruptAndRepairCutsIt(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	ok(t, []byte("one\ntwo\n"), "--dir", dir, "produce", "ev")
	seg := segmentsOf(t, dir, "ev", 0)[0]
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, 9, 9}) // a 200-byte body announced, 2 written
	require.NoError(t, err)
	require.NoError(t, f.Close())

	out := string(ok(t, nil, "dump", seg))
	assert.Contains(t, out, "2 intact frames, then a bad frame at byte")
	assert.Contains(t, out, "a torn tail")
	out = string(ok(t, nil, "--dir", dir, "verify"))
	assert.Contains(t, out, "torn tail: topic ev partition 0 segment "+seg)
	assert.Contains(t, out, "offset 2")
	out = string(ok(t, nil, "--dir", dir, "verify", "--repair"))
	assert.Regexp(t, `repaired ev partition 0: cut 10 bytes from .*, dropped 0 records`, out)
	assert.NotContains(t, out[strings.Index(out, "after repair"):], "torn tail")
}

// writeAt writes b at byte pos of the file at path.
func writeAt(t *testing.T, path string, pos int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestDumpCallsDamageWithIntactFramesBehindCorruption ensures dump calls a
// bad frame or a zero length in the middle of a segment, with intact frames
// behind it, corruption (exit 3, naming byte and offset), not a torn tail;
// a bad last frame of a sealed segment too; that a file not named like a
// segment whose first frame is bad is not a segment file (exit 1), and that
// nothing reaches stdout before an error opening the file.
func TestDumpCallsDamageWithIntactFramesBehindCorruption(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "c", 1)
	var lines bytes.Buffer
	for i := 1; i <= 1000; i++ {
		fmt.Fprintln(&lines, i)
	}
	ok(t, lines.Bytes(), "--dir", dir, "produce", "c")
	seg := segmentsOf(t, dir, "c", 0)[0]
	clean, err := os.ReadFile(seg)
	require.NoError(t, err)
	frames := dumpJSON(t, seg)
	require.Len(t, frames, 1000)

	writeAt(t, seg, frames[501].Position+3, []byte{0x7f}) // a length past the end of the file
	r := strom(t, nil, "dump", seg)
	assert.Equal(t, 3, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stdout), fmt.Sprintf("501 intact frames, then a bad frame at byte %d (offset 501): corruption: an intact frame of offset 502 follows at byte %d", frames[501].Position, frames[502].Position))
	assert.Contains(t, string(r.stderr), fmt.Sprintf("bad frame at byte %d (offset 501)", frames[501].Position))
	assert.Equal(t, 3, strom(t, nil, "dump", "--json", seg).code)

	require.NoError(t, os.WriteFile(seg, clean, 0o644))
	writeAt(t, seg, 48*512, make([]byte, 480)) // dd if=/dev/zero bs=48 seek=512 count=10
	r = strom(t, nil, "dump", seg)
	assert.Equal(t, 3, r.code, "stderr: %s", r.stderr)
	assert.Regexp(t, `then a bad frame at byte \d+ \(offset \d+\): corruption: an intact frame of offset \d+ follows`, string(r.stdout))
	assert.NotContains(t, string(r.stdout), "end of data")

	notSeg := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(notSeg, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644))
	r = strom(t, nil, "dump", notSeg)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), notSeg+" is not a strom segment file")
	assert.Empty(t, r.stdout)

	r = strom(t, nil, "dump", filepath.Join(t.TempDir(), "00000000000000000000.log"))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "no such file")
	assert.Empty(t, r.stdout)

	// A bad last frame of a segment a later one follows: sealed, so corrupt.
	dir = newLog(t, "ev", 1)
	ok(t, bytes.Repeat([]byte("thirty-two bytes of a log line.\n"), 250), "--dir", dir, "produce", "ev", "--segment-bytes", "4096")
	seg = segmentsOf(t, dir, "ev", 0)[0]
	frames = dumpJSON(t, seg)
	writeAt(t, seg, frames[len(frames)-1].Position+8+20, []byte{0xff})
	r = strom(t, nil, "dump", seg)
	assert.Equal(t, 3, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stdout), "corruption: the segment is sealed: ")
}

// TestProduceStopsOnSIGTERMAppendingWhatItRead ensures produce, sent SIGTERM
// while it waits for more input on a pipe, appends and syncs the lines it
// read, prints their offsets and exits 0.
func TestProduceStopsOnSIGTERMAppendingWhatItRead(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	cmd := exec.Command(stromBin, "--dir", dir, "produce", "ev", "--print-offsets")
	cmd.Env = testutil.CleanEnv()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close() })
	_, err = stdin.Write([]byte("one\ntwo\nthree\n"))
	require.NoError(t, err)
	// The lines are appended (not yet synced) once produce reads them.
	require.Eventually(t, func() bool {
		return string(ok(t, nil, "--dir", dir, "consume", "ev")) == "one\ntwo\nthree\n"
	}, 10*time.Second, 10*time.Millisecond, "produce did not append the lines")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("produce did not exit on SIGTERM")
	}
	require.NoError(t, err, "stderr: %s", errb.String())
	assert.Equal(t, "ev/0@0\nev/0@1\nev/0@2\n", out.String())
	assert.Equal(t, "one\ntwo\nthree\n", string(ok(t, nil, "--dir", dir, "consume", "ev")))
}

// TestRetentionSkipsUnlimitedTopicsAndGoesOnAfterAFailure ensures retention
// takes no lock for a topic without a policy, and after a topic that fails
// (locked by another process) still applies the others, exiting 1 at the end.
func TestRetentionSkipsUnlimitedTopicsAndGoesOnAfterAFailure(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	ok(t, nil, "--dir", dir, "topics", "create", "a-locked", "--retention-bytes", "0")
	ok(t, nil, "--dir", dir, "topics", "create", "b-free", "--retention-bytes", "0")
	ok(t, nil, "--dir", dir, "topics", "create", "c-unlimited")
	for _, topic := range []string{"a-locked", "b-free"} {
		ok(t, bytes.Repeat([]byte("0123456789abcdef\n"), 100), "--dir", dir, "produce", topic, "--segment-bytes", "512")
	}
	lock := func(topic string) {
		f, err := os.OpenFile(filepath.Join(dir, topic, "writer.lock"), os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	}
	lock("a-locked")
	lock("c-unlimited")
	r := strom(t, nil, "--dir", dir, "retention")
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "retention of topic a-locked: ")
	assert.Contains(t, string(r.stderr), "retention failed for 1 of 3 topic(s)")
	assert.NotContains(t, string(r.stderr), "c-unlimited")
	assert.Regexp(t, `(?m)^b-free partition 0: deleted \d+ segment`, string(r.stdout))
	assert.Contains(t, string(r.stdout), "c-unlimited: nothing to delete (retention unlimited)\n")
}

// TestDirOneLevelTooHighIsSaid ensures topics list and verify on a directory
// without topics, whose subfolder holds them, say it is not a log directory
// and suggest the subfolder, exiting 1; verify on an empty one exits 1
// instead of finding no corruption.
func TestDirOneLevelTooHighIsSaid(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	above := filepath.Dir(dir)
	hint := above + " is not a strom log directory: it holds no topic (a folder with a topic.json) but 1 other entry (log); its subfolder " +
		dir + " holds 1 topic(s) (ev): did you mean --dir " + dir + "?"
	r := strom(t, nil, "--dir", above, "verify")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), hint)
	assert.NotContains(t, string(r.stdout), "no corruption found")
	r = strom(t, nil, "--dir", above, "topics", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), hint)
	assert.Empty(t, r.stdout)
	empty := t.TempDir()
	r = strom(t, nil, "--dir", empty, "verify")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "strom: nothing to verify: no topics in log directory "+empty+"\n", string(r.stderr))
}

// TestMessagesSayWhatHappened ensures topics list shows a retention policy
// without repeating the column's name, a bad first JSON line says nothing was
// appended and how to drop an unknown field, and positions lists the
// positions beside a corrupt position file, flagging it and exiting 1.
func TestMessagesSayWhatHappened(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, nil, "--dir", dir, "topics", "create", "aged", "--retention", "168h")
	out := string(ok(t, nil, "--dir", dir, "topics", "list"))
	assert.Regexp(t, `(?m)^ev\s+2\s+unlimited$`, out)
	assert.Regexp(t, `(?m)^aged\s+1\s+age 168h0m0s$`, out)

	r := strom(t, []byte(`{"value":"x","extra":1}`+"\n"), "--dir", dir, "produce", "ev", "--format", "json")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), `stdin line 1: unknown field "extra"`)
	assert.Contains(t, string(r.stderr), `jq -c 'del(.extra)'`)
	assert.Contains(t, string(r.stderr), "(nothing was appended)")
	r = strom(t, []byte(`{"value":"x"}`+"\n"+`{"value":"y","extra":1}`+"\n"), "--dir", dir, "produce", "ev", "--format", "json")
	assert.Contains(t, string(r.stderr), "stdin line 2: ")
	assert.Contains(t, string(r.stderr), "(the lines before it were appended)")

	state := t.TempDir()
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "0")
	require.NoError(t, os.WriteFile(filepath.Join(state, "ev-1.position"), []byte("garbage"), 0o644))
	r = strom(t, nil, "--dir", dir, "positions", "--state", state)
	assert.Equal(t, 3, r.code, "a position file that does not parse is corruption")
	assert.Regexp(t, `(?m)^ev\s+0\s+0\s`, string(r.stdout))
	assert.Contains(t, string(r.stderr), "ev-1.position")
	assert.Contains(t, string(r.stderr), "1 position file(s) in "+state+" do not parse")
}
