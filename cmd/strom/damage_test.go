package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// hundredLines is the input of the damage tests: 100 records of 48-byte
// frames, offsets 0 to 99.
func hundredLines() []byte {
	var b bytes.Buffer
	for i := 1; i <= 100; i++ {
		fmt.Fprintln(&b, i)
	}
	return b.Bytes()
}

// cutBelowRecoveryPoint cuts n bytes off the end of the last segment of
// topic ev partition 0, all of whose records produce synced (its recovery
// point is the end), and returns the segment's path.
func cutBelowRecoveryPoint(t *testing.T, dir string, n int64) string {
	t.Helper()
	segs := segmentsOf(t, dir, "ev", 0)
	seg := segs[len(segs)-1]
	fi, err := os.Stat(seg)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(seg, fi.Size()-n))
	return seg
}

// corruptWhere is what every command's error says of a damaged frame.
var corruptWhere = regexp.MustCompile(`partition 0: corrupt frame in segment \S+ at byte \d+ \(offset \d+\)`)

// TestEveryCommandReportsAnEndBelowTheRecoveryPointAsVerifyDoes ensures
// that with 50 bytes cut off a segment below its recovery point, or its
// last segment deleted (records known to be on disk are gone), consume,
// topics describe and positions exit 3 as verify does, naming the
// partition, segment, byte position and offset verify names, print no
// records, and point at verify --repair; and that after the repair every
// command agrees on the records left.
func TestEveryCommandReportsAnEndBelowTheRecoveryPointAsVerifyDoes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the segment named
		where  string                                // byte and offset named
		left   int
	}{
		{"50 bytes cut", func(t *testing.T, dir string) string { return cutBelowRecoveryPoint(t, dir, 50) },
			fmt.Sprintf("at byte %d (offset 98)", (98-84)*48), 98}, // segment 84 holds 84 to 99
		{"last segment deleted", func(t *testing.T, dir string) string {
			segs := segmentsOf(t, dir, "ev", 0)
			require.NoError(t, os.Remove(segs[len(segs)-1]))
			return segs[len(segs)-2]
		}, "(offset 84)", 84}, // 21 frames of 48 bytes to a 1 KiB segment
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newLog(t, "ev", 1)
			ok(t, hundredLines(), "--dir", dir, "produce", "ev", "--segment-bytes", "1024")
			state := t.TempDir()
			ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "latest")
			seg := c.damage(t, dir)

			r := strom(t, nil, "--dir", dir, "verify")
			require.Equal(t, 3, r.code, "stderr: %s", r.stderr)
			where := corruptWhere.FindString(string(r.stderr))
			require.Contains(t, where, "segment "+seg+" ")
			require.Contains(t, where, c.where)
			assert.Contains(t, string(r.stderr), "below the recovery point (offset 100")
			assert.Contains(t, string(r.stderr), "'strom verify --repair' cuts")
			for _, args := range [][]string{
				{"consume", "ev"},
				{"consume", "ev", "--partition", "0", "--from", "10"},
				{"topics", "describe"},
				{"topics", "describe", "ev", "--json"},
				{"positions", "--state", state},
			} {
				r := strom(t, nil, append([]string{"--dir", dir}, args...)...)
				requireFailedCleanly(t, r, 3, where, args)
				assert.Contains(t, string(r.stderr), "below the recovery point (offset 100", "%q", args)
				assert.Contains(t, string(r.stderr), "\nstrom: 'strom verify' lists every damaged place; 'strom verify --repair' cuts", "%q", args)
				assert.Empty(t, r.stdout, "%q printed records or segments of a damaged partition", args)
			}

			out := string(ok(t, nil, "--dir", dir, "verify", "--repair"))
			assert.Contains(t, out, fmt.Sprintf("dropped %d records", 100-c.left))
			assert.Equal(t, c.left, strings.Count(string(ok(t, nil, "--dir", dir, "consume", "ev")), "\n"))
			var d []struct {
				Partitions []struct{ NextOffset int64 } `json:"partitions"`
			}
			require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "topics", "describe", "--json"), &d))
			assert.EqualValues(t, c.left, d[0].Partitions[0].NextOffset)
			assert.Contains(t, string(ok(t, nil, "--dir", dir, "verify")), "no corruption found")
		})
	}
}

// describeWritePath returns the write path topics describe --json shows
// for the last segment of topic ev partition 0.
func describeWritePath(t *testing.T, dir string) string {
	t.Helper()
	var d []struct {
		Partitions []struct {
			Segments []struct{ WritePath string } `json:"segments"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "topics", "describe", "ev", "--json"), &d))
	segs := d[0].Partitions[0].Segments
	return segs[len(segs)-1].WritePath
}

// TestDescribeShowsTheWritePathTheSegmentWasWrittenWith ensures describe
// labels a file-mode segment that ends in a torn frame (bytes past its
// frames) "file", not "mmap", and a segment a running produce --mode mmap
// writes "mmap".
func TestDescribeShowsTheWritePathTheSegmentWasWrittenWith(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	ok(t, []byte("one\ntwo\n"), "--dir", dir, "produce", "ev", "--mode", "file")
	assert.Equal(t, "file", describeWritePath(t, dir))
	seg := segmentsOf(t, dir, "ev", 0)[0]
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, 9, 9}) // a 200-byte body announced, 2 written
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, "file", describeWritePath(t, dir), "a torn tail is not a reserved zero tail")

	live := newLog(t, "ev", 1)
	cmd := exec.Command(stromBin, "--dir", live, "produce", "ev", "--mode", "mmap")
	cmd.Env = testutil.CleanEnv()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	_, err = stdin.Write([]byte("one\ntwo\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return string(ok(t, nil, "--dir", live, "consume", "ev")) == "one\ntwo\n"
	}, 10*time.Second, 10*time.Millisecond, "produce did not append the lines")
	assert.Equal(t, "mmap", describeWritePath(t, live))
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
}

// positionsJSON is one object of positions --json, as the tests read it.
type positionsJSON struct {
	Position     int64  `json:"position"`
	NextOffset   *int64 `json:"nextOffset"`
	ResumeOffset *int64 `json:"resumeOffset"`
	Lag          *int64 `json:"lag"`
	Note         string `json:"note"`
}

// firstOffsetResumed returns the offset of the first record a replaying
// source.FromStore over state reads of topic ev partition 0, or its error.
func firstOffsetResumed(t *testing.T, dir, state string) (int64, error) {
	t.Helper()
	lg, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer lg.Close()
	store, err := checkpoint.NewFileStore(state)
	require.NoError(t, err)
	src := source.Partition(lg, "ev", 0, source.FromStore(store), source.Replay())
	defer src.Close()
	els, err := src.Read(context.Background())
	if err != nil {
		return -1, err
	}
	require.NotEmpty(t, els)
	return els[0].Value.Offset, nil
}

// TestPositionsAfterRepairSayWhereTheConsumerResumes ensures positions,
// after verify --repair dropped records a saved position had passed, says
// where a consumer resuming from it will read (where the repair's epoch
// began) instead of a negative lag, and that a consumer does resume there;
// and that a position past the high watermark no epoch explains is said to
// stop the consumer, as it does, with no lag. strom serve's page says the
// same as positions --json.
func TestPositionsAfterRepairSayWhereTheConsumerResumes(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	ok(t, hundredLines(), "--dir", dir, "produce", "ev")
	state := t.TempDir()
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "latest")
	cutBelowRecoveryPoint(t, dir, 50)
	ok(t, nil, "--dir", dir, "verify", "--repair")

	out := string(ok(t, nil, "--dir", dir, "positions", "--state", state))
	assert.Regexp(t, `(?m)^ev\s+0\s+100\s+\d+\s+0\s+98\s+0\s+position 100 is past the high watermark 98: records it had passed were dropped`, out)
	assert.Contains(t, out, "the consumer will resume at 98")
	assert.NotContains(t, out, "-2")
	var rows []positionsJSON
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json"), &rows))
	require.Len(t, rows, 1)
	require.NotNil(t, rows[0].ResumeOffset)
	assert.EqualValues(t, 98, *rows[0].ResumeOffset)
	assert.EqualValues(t, 0, *rows[0].Lag)
	// strom serve's page says the same (both read internal/positions).
	s := startServe(t, "--dir", dir, "serve", "--addr", "127.0.0.1:0", "--state", state)
	snap := getServeSnapshot(t, s.url+"snapshot.json")
	s.stop(t, os.Interrupt)
	require.Len(t, snap.Positions, 1)
	sp := snap.Positions[0]
	require.NotNil(t, sp.ResumeOffset)
	require.NotNil(t, sp.Lag)
	assert.Equal(t, *rows[0].ResumeOffset, *sp.ResumeOffset)
	assert.Equal(t, *rows[0].Lag, *sp.Lag)
	assert.Equal(t, rows[0].Note, sp.Note)

	// Records appended since: the consumer reads them from 98, as said.
	ok(t, []byte("new-98\nnew-99\nnew-100\n"), "--dir", dir, "produce", "ev")
	out = string(ok(t, nil, "--dir", dir, "positions", "--state", state))
	assert.Regexp(t, `(?m)^ev\s+0\s+100\s+\d+\s+0\s+101\s+3\s+a later epoch began at 98, below this position`, out)
	assert.Contains(t, out, "the consumer will resume at 98")
	off, err := firstOffsetResumed(t, dir, state)
	require.NoError(t, err)
	assert.EqualValues(t, 98, off)

	// A position past the high watermark with no epoch: the consumer stops.
	require.NoError(t, os.WriteFile(filepath.Join(state, "ev-0.position"),
		[]byte(`{"version":1,"topic":"ev","partition":0,"position":120}`), 0o644))
	out = string(ok(t, nil, "--dir", dir, "positions", "--state", state))
	assert.Regexp(t, `(?m)^ev\s+0\s+120\s+-1\s+0\s+101\s+-\s+position 120 is past the high watermark 101`, out)
	assert.Contains(t, out, "the consumer will stop with an offset-out-of-range error")
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json"), &rows))
	assert.Nil(t, rows[0].ResumeOffset)
	assert.Nil(t, rows[0].Lag)
	_, err = firstOffsetResumed(t, dir, state)
	assert.ErrorIs(t, err, log.ErrOffsetOutOfRange)
}

// TestPositionsBelowTheLogStartSayWhereTheConsumerResumes ensures a
// position retention passed is said to resume, by default, at the log start
// offset, where a consumer does resume.
func TestPositionsBelowTheLogStartSayWhereTheConsumerResumes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "log")
	ok(t, nil, "--dir", dir, "topics", "create", "ev", "--retention-bytes", "0")
	state := t.TempDir()
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "earliest")
	ok(t, bytes.Repeat([]byte("0123456789abcdef\n"), 20), "--dir", dir, "produce", "ev", "--segment-bytes", "256")
	ok(t, nil, "--dir", dir, "retention")
	var rows []positionsJSON
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json"), &rows))
	require.Len(t, rows, 1)
	require.NotNil(t, rows[0].ResumeOffset)
	start := *rows[0].ResumeOffset
	assert.Greater(t, start, int64(0))
	assert.Contains(t, rows[0].Note, fmt.Sprintf("below the log start offset %d: %d records deleted unread; the consumer resumes at %d by default", start, start, start))
	off, err := firstOffsetResumed(t, dir, state)
	require.NoError(t, err)
	assert.Equal(t, start, off)
}

// TestCorruptPositionFileAloneLeavesStdoutEmpty ensures positions, when the
// only position file does not parse, prints nothing on stdout (not "no
// positions saved") and exits 3 with stderr naming the file and what is
// wrong with it.
func TestCorruptPositionFileAloneLeavesStdoutEmpty(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	state := t.TempDir()
	path := filepath.Join(state, "ev-0.position")
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644))
	r := strom(t, nil, "--dir", dir, "positions", "--state", state)
	requireFailedCleanly(t, r, 3, path+": starts with byte 0x67, want '{'", nil)
	assert.Contains(t, string(r.stderr), "1 position file(s) in "+state+" do not parse")
	assert.Empty(t, r.stdout)

	empty := t.TempDir()
	assert.Equal(t, "no positions saved in "+empty+"\n", string(ok(t, nil, "--dir", dir, "positions", "--state", empty)))
}

// TestEveryMessageIsPrefixedOnce ensures every command's errors, usage
// errors included, are printed after one "strom: " and never as "strom:
// strom COMMAND: ...".
func TestEveryMessageIsPrefixedOnce(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	commands := [][]string{
		{}, {"topics"}, {"topics", "create"}, {"topics", "list"}, {"topics", "describe"},
		{"produce"}, {"consume"}, {"positions"}, {"positions", "set"},
		{"dump"}, {"verify"}, {"retention"},
	}
	var runs [][]string
	for _, c := range commands {
		runs = append(runs,
			append(append([]string{"--dir", dir}, c...), "--bogus"),
			append(append([]string{"--dir", dir}, c...), "a", "b", "c", "d", "e"),
		)
	}
	runs = append(runs,
		[]string{"--dir", dir, "consume", "ev", "--max", "-1"},
		[]string{"--dir", dir, "consume", "ev", "--partition", "-1"},
		[]string{"--dir", dir, "topics", "create", "x", "--retention", "-1s"},
		[]string{"--dir", dir, "topics", "create", "x", "--timestamp-type", "Never"},
		[]string{"--dir", dir, "positions", "set", "--state", dir, "ev", "-1", "0"},
		[]string{"--dir", dir, "consume", "nope"},
	)
	for _, args := range runs {
		r := strom(t, []byte("x\n"), args...)
		require.NotZero(t, r.code, "%q", args)
		for _, line := range strings.Split(strings.TrimSuffix(string(r.stderr), "\n"), "\n") {
			assert.True(t, strings.HasPrefix(line, "strom: "), "%q: %q", args, line)
			assert.NotRegexp(t, regexp.MustCompile(`^strom: strom\b`), line, "%q", args)
		}
	}
}

// TestTopicsListTellsALogFromWhatIsNot ensures topics list (and the other
// commands that read a log) treat an empty directory as an empty log (exit
// 0, stdout empty, stderr says so), and a missing path, a file, and a
// directory with other things but no topic as no log (exit 1, naming it).
func TestTopicsListTellsALogFromWhatIsNot(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	r := strom(t, nil, "--dir", empty, "topics", "list")
	assert.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "strom: no topics in log directory "+empty+"\n", string(r.stderr))
	assert.Equal(t, "[]\n", string(ok(t, nil, "--dir", empty, "topics", "list", "--json")))
	require.NoError(t, os.WriteFile(filepath.Join(empty, ".keep"), nil, 0o644))
	ok(t, nil, "--dir", empty, "topics", "list")

	missing := filepath.Join(t.TempDir(), "nope")
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	other := t.TempDir()
	for _, name := range []string{"notes.txt", "photos", "b", "c"} {
		require.NoError(t, os.WriteFile(filepath.Join(other, name), []byte("x"), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(other, "sub"), 0o755))
	for _, c := range []struct{ dir, msg string }{
		{missing, "log directory " + missing + " does not exist"},
		{file, "log directory " + file + " is not a directory"},
		{other, other + " is not a strom log directory: it holds no topic (a folder with a topic.json) but 5 other entries (b, c, notes.txt, ...)"},
	} {
		for _, args := range [][]string{{"topics", "list"}, {"topics", "list", "--json"}, {"topics", "describe"}, {"consume", "ev"}, {"verify"}} {
			r := strom(t, nil, append([]string{"--dir", c.dir}, args...)...)
			requireFailedCleanly(t, r, 1, c.msg, args)
			assert.Empty(t, r.stdout, "%q", args)
		}
	}
}
