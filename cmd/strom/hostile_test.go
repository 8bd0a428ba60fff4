package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
)

// hostileCase is one command line that must fail: exit code and what
// stderr must say.
type hostileCase struct {
	stdin string
	args  []string
	code  int
	msg   string
}

// requireRefused runs each case and requires its exit code, its message
// after "strom: " on stderr, and no panic or Go stack.
func requireRefused(t *testing.T, cases []hostileCase) {
	t.Helper()
	for _, c := range cases {
		r := strom(t, []byte(c.stdin), c.args...)
		requireFailedCleanly(t, r, c.code, c.msg, c.args)
	}
}

func requireFailedCleanly(t *testing.T, r result, code int, msg string, args []string) {
	t.Helper()
	stderr := string(r.stderr)
	assert.Equal(t, code, r.code, "%q: %s", args, stderr)
	assert.True(t, strings.HasPrefix(stderr, "strom: "), "%q: %s", args, stderr)
	assert.Contains(t, stderr, msg, "%q", args)
	for _, stack := range []string{"panic", "goroutine ", ".go:"} {
		assert.NotContains(t, stderr, stack, "%q", args)
	}
}

// requireRecords requires consume of topic ev to print exactly lines.
func requireRecords(t *testing.T, dir string, lines ...string) {
	t.Helper()
	out := ok(t, nil, "--dir", dir, "consume", "ev")
	assert.Equal(t, strings.Join(lines, "\n")+"\n", string(out))
}

// TestHostileNamesNumbersAndOffsetsExitWithAMessage ensures bad topic
// names, partition numbers and counts, offsets below the log start and past
// the end, and a record one byte over
// the segment are refused by every command that takes them, with the exit
// status and a message naming what was wrong, and lose nothing. (A NUL
// byte cannot be passed in an argument; the log's own tests give it.)
func TestHostileNamesNumbersAndOffsetsExitWithAMessage(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, []byte("a\nb\nc\n"), "--dir", dir, "produce", "ev", "--partition", "0")
	long := strings.Repeat("a", 250)
	state := t.TempDir()
	var cases []hostileCase
	for _, name := range []string{"a/b", "../ev", "..", long} {
		for _, args := range [][]string{
			{"topics", "create", name}, {"produce", name}, {"consume", name},
			{"topics", "describe", name}, {"verify", name}, {"retention", name},
			{"positions", "set", "--state", state, name, "0", "0"},
		} {
			cases = append(cases, hostileCase{"x\n", append([]string{"--dir", dir}, args...), 2, "invalid topic name"})
		}
	}
	cases = append(cases,
		hostileCase{"", []string{"--dir", dir, "topics", "create", "new", "--partitions", "-1"}, 2, "-1"},
		hostileCase{"", []string{"--dir", dir, "topics", "create", "new", "--partitions", "0"}, 2, "--partitions 0: want 1 to"},
		hostileCase{"", []string{"--dir", dir, "topics", "create", "new", "--partitions", "1000000000"}, 2, "--partitions 1000000000: want 1 to"},
		hostileCase{"", []string{"--dir", dir, "topics", "create", "new", "--partitions", "99999999999999999999"}, 2, "--partitions"},
		hostileCase{"x\n", []string{"--dir", dir, "produce", "ev", "--partition", "-1"}, 2, "--partition -1"},
		hostileCase{"x\n", []string{"--dir", dir, "produce", "ev", "--partition", "2"}, 2, "partitions 0 to 1"},
		hostileCase{"x\n", []string{"--dir", dir, "produce", "ev", "--partition", "2147483648"}, 2, "--partition"},
		hostileCase{"", []string{"--dir", dir, "consume", "ev", "--partition", "2147483647"}, 2, "partitions 0 to 1"},
		hostileCase{"", []string{"--dir", dir, "consume", "ev", "--partition", "0", "--from", "4"}, 1, "offset 4 out of range [0, 3]"},
		hostileCase{"", []string{"--dir", dir, "consume", "ev", "--partition", "0", "--from", "9223372036854775807"}, 1, "offset 9223372036854775807 out of range [0, 3]"},
		hostileCase{"", []string{"--dir", dir, "consume", "ev", "--partition", "0", "--from", "99999999999999999999"}, 2, "--from"},
		hostileCase{"", []string{"--dir", dir, "positions", "set", "--state", state, "ev", "0", "4"}, 1, "offset 4"},
		hostileCase{"", []string{"--dir", dir, "positions", "set", "--state", state, "ev", "2", "0"}, 2, "partition 2: topic ev has partitions 0 to 1"},
		hostileCase{"", []string{"--dir", dir, "positions", "set", "--state", state, "ev", "99999999999", "0"}, 2, "99999999999"},
	)
	requireRefused(t, cases)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only ev")
	requireRecords(t, dir, "a", "b", "c")

	// Below the log start offset: retention deleted the first segments.
	aged := newLog(t, "ev", 1)
	ok(t, nil, "--dir", aged, "topics", "create", "ev", "--retention-bytes", "0")
	var ten []string
	for i := range 10 {
		ten = append(ten, fmt.Sprint(i))
	}
	ok(t, []byte(strings.Join(ten, "\n")+"\n"), "--dir", aged, "produce", "ev", "--segment-bytes", "256")
	ok(t, nil, "--dir", aged, "retention")
	requireRefused(t, []hostileCase{
		{"", []string{"--dir", aged, "consume", "ev", "--partition", "0", "--from", "3"}, 1, "offset 3 out of range [5, 10]"},
		{"", []string{"--dir", aged, "positions", "set", "--state", state, "ev", "0", "4"}, 1, "offset 4"},
	})
	requireRecords(t, aged, "5", "6", "7", "8", "9") // 48-byte frames, 5 a segment

	// A segment of 1024 bytes holds a record of a 980-byte value (8 header
	// bytes, a 36-byte body around it), not one of 981.
	small := newLog(t, "ev", 1)
	fits := strings.Repeat("x", 980)
	ok(t, []byte("a\n"+fits+"\n"), "--dir", small, "produce", "ev", "--segment-bytes", "1024")
	requireRefused(t, []hostileCase{{fits + "y\n", []string{"--dir", small, "produce", "ev", "--segment-bytes", "1024"}, 1,
		"record needs 1032 bytes but a segment holds 1024 bytes"}})
	requireRecords(t, small, "a", fits)
}

// TestDamagedSegmentFilesExitWithTheirPath ensures a segment file truncated
// to zero, replaced by a directory or by a symlink out of the log directory
// makes produce, consume, describe and verify exit non-zero naming the
// file (and dump of a directory or a FIFO exit 1 rather than wait on it),
// never writes through the link, and that with the file put back
// every record is there.
func TestDamagedSegmentFilesExitWithTheirPath(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.WriteFile(outside, []byte("not a segment\n"), 0o644))
	fifo := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	requireRefused(t, []hostileCase{{"", []string{"dump", fifo}, 1, fifo + " is not a regular file"}})
	for _, damage := range []string{"truncated", "directory", "symlink"} {
		dir := newLog(t, "ev", 1)
		var lines []string
		var in bytes.Buffer
		for i := range 10 {
			lines = append(lines, fmt.Sprintf("record-%d", i))
			fmt.Fprintln(&in, lines[i])
		}
		ok(t, in.Bytes(), "--dir", dir, "produce", "ev", "--segment-bytes", "256")
		seg := filepath.Join(dir, "ev", "0", "00000000000000000000.log")
		saved, err := os.ReadFile(seg)
		require.NoError(t, err)
		msg := seg
		switch damage {
		case "truncated":
			require.NoError(t, os.Truncate(seg, 0))
		case "directory":
			require.NoError(t, os.Remove(seg))
			require.NoError(t, os.Mkdir(seg, 0o755))
			msg = seg + " is a directory, not a regular file"
		case "symlink":
			require.NoError(t, os.Remove(seg))
			require.NoError(t, os.Symlink(outside, seg))
			msg = seg + " is a symbolic link, not a regular file"
		}
		if damage == "directory" {
			requireRefused(t, []hostileCase{{"", []string{"dump", seg}, 1, seg + " is a directory"}})
		}
		requireRefused(t, []hostileCase{
			{"x\n", []string{"--dir", dir, "produce", "ev"}, 3, msg},
			{"", []string{"--dir", dir, "consume", "ev"}, 3, msg},
			{"", []string{"--dir", dir, "topics", "describe", "ev"}, 3, msg},
			{"", []string{"--dir", dir, "verify"}, 3, seg},
		})
		b, err := os.ReadFile(outside)
		require.NoError(t, err)
		require.Equal(t, "not a segment\n", string(b), "%s: the file outside was not written", damage)
		require.NoError(t, os.RemoveAll(seg))
		require.NoError(t, os.WriteFile(seg, saved, 0o644))
		requireRecords(t, dir, lines...)
	}
}

// TestHostilePositionFilesExitWithTheirPath ensures positions lists what it
// can and exits 3 naming each position file that is empty, negative or not
// a number, and flags a position beyond the log end.
func TestHostilePositionFilesExitWithTheirPath(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 5)
	ok(t, []byte("a\nb\n"), "--dir", dir, "produce", "ev", "--partition", "0")
	state := t.TempDir()
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "1")
	for p, content := range map[int]string{
		1: "",
		2: `{"version":1,"topic":"ev","partition":2,"position":-3}`,
		3: `{"version":1,"topic":"ev","partition":3,"position":"ten"}`,
		4: `{"version":1,"topic":"ev","partition":4,"position":1000}`,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(state, fmt.Sprintf("ev-%d.position", p)), []byte(content), 0o644))
	}
	r := strom(t, nil, "--dir", dir, "positions", "--state", state)
	requireFailedCleanly(t, r, 3, "3 position file(s) in "+state+" do not parse", nil)
	for p, why := range map[int]string{1: "empty file", 2: "negative position", 3: "invalid JSON"} {
		assert.Contains(t, string(r.stderr), fmt.Sprintf("%s: %s", filepath.Join(state, fmt.Sprintf("ev-%d.position", p)), why))
	}
	assert.Regexp(t, `(?m)^ev\s+0\s+1\s`, string(r.stdout))
	assert.Regexp(t, `(?m)^ev\s+4\s+1000\s.*position 1000 is past the high watermark 0`, string(r.stdout))
	requireRecords(t, dir, "a", "b")
}

// TestSecondWritingProcessExitsNamingTheHolder ensures a produce to a topic
// another strom process is writing (a produce waiting on its stdin) exits
// 1 naming that process's pid, and that the first one's records are all
// there after it ends.
func TestSecondWritingProcessExitsNamingTheHolder(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	first := exec.Command(stromBin, "--dir", dir, "produce", "ev")
	first.Env = testutil.CleanEnv()
	stdin, err := first.StdinPipe()
	require.NoError(t, err)
	var out bytes.Buffer
	first.Stdout, first.Stderr = &out, &out
	require.NoError(t, first.Start())
	_, err = stdin.Write([]byte("one\n"))
	require.NoError(t, err)
	// The lock is taken once the first line is appended: wait for it.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "ev", "writer.lock"))
		return err == nil && strings.TrimSpace(string(b)) == fmt.Sprint(first.Process.Pid)
	}, 10*time.Second, 5*time.Millisecond)

	r := strom(t, []byte("two\n"), "--dir", dir, "produce", "ev")
	requireFailedCleanly(t, r, 1, fmt.Sprintf("locked for writing by pid %d", first.Process.Pid), nil)
	assert.Contains(t, string(r.stderr), filepath.Join(dir, "ev", "writer.lock"))

	_, err = stdin.Write([]byte("three\n"))
	require.NoError(t, err)
	require.NoError(t, stdin.Close())
	require.NoError(t, first.Wait(), out.String())
	requireRecords(t, dir, "one", "three")
}

// TestFullDiskAndReadOnlyFileSystemExitWithTheReason ensures produce on a
// full file system (a tmpfs filled by another file) exits 1 with "no space
// left on device" naming the file (the open of a writer writes an epoch
// file before any segment), positions set there exits 1 naming the
// position file's folder, and on the file system remounted read-only
// produce exits 1 with "read-only file system" while consume still reads:
// every record appended before is there.
func TestFullDiskAndReadOnlyFileSystemExitWithTheReason(t *testing.T) {
	t.Parallel()
	testutil.RunInTmpfs(t, 2<<20, func(t *testing.T, tmp string) {
		dir := filepath.Join(tmp, "log")
		ok(t, nil, "--dir", dir, "topics", "create", "ev")
		ok(t, []byte("a\nb\n"), "--dir", dir, "produce", "ev")
		state := filepath.Join(tmp, "state")
		require.NoError(t, os.Mkdir(state, 0o755))
		ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "1")
		free := testutil.FillDisk(t, filepath.Join(tmp, "ballast"))

		big := bytes.Repeat([]byte(strings.Repeat("x", 1000)+"\n"), 100)
		r := strom(t, big, "--dir", dir, "produce", "ev")
		requireFailedCleanly(t, r, 1, "no space left on device", nil)
		assert.Contains(t, string(r.stderr), filepath.Join(dir, "ev", "0")+"/") // the epoch file or the segment, whichever met the full disk
		r = strom(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "2")
		requireFailedCleanly(t, r, 1, "no space left on device", nil)
		assert.Contains(t, string(r.stderr), state)
		assert.Regexp(t, `(?m)^ev\s+0\s+1\s`, string(ok(t, nil, "--dir", dir, "positions", "--state", state)))
		free()
		out := ok(t, nil, "--dir", dir, "consume", "ev")
		require.True(t, bytes.HasPrefix(out, []byte("a\nb\n")), "the records before are there")

		testutil.RemountReadOnly(t, tmp)
		r = strom(t, []byte("c\n"), "--dir", dir, "produce", "ev")
		requireFailedCleanly(t, r, 1, "read-only file system", nil)
		assert.Contains(t, string(r.stderr), filepath.Join(dir, "ev"))
		assert.Equal(t, out, ok(t, nil, "--dir", dir, "consume", "ev"))
	})
}

// TestTimestampsAheadAndBackwardsThroughProduce ensures produce refuses a
// record stamped more than an hour ahead of the clock with exit 1 naming
// the timestamp and the line, appending nothing of it, accepts timestamps
// that go backwards, and consume --from a time finds the first record at or
// after it.
func TestTimestampsAheadAndBackwardsThroughProduce(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	now := time.Now().UnixMilli()
	ahead := now + 2*time.Hour.Milliseconds()
	in := fmt.Sprintf(`{"value":"new","timestamp":%d}`+"\n"+`{"value":"old","timestamp":%d}`+"\n", now, now-time.Hour.Milliseconds())
	ok(t, []byte(in), "--dir", dir, "produce", "ev", "--format", "json")
	r := strom(t, []byte(fmt.Sprintf(`{"value":"future","timestamp":%d}`+"\n", ahead)), "--dir", dir, "produce", "ev", "--format", "json")
	requireFailedCleanly(t, r, 1, fmt.Sprintf("stdin line 1: timestamp %d", ahead), nil)
	assert.Contains(t, string(r.stderr), "ahead of the clock")
	requireRecords(t, dir, "new", "old")
	from := time.UnixMilli(now).UTC().Format(time.RFC3339Nano)
	assert.Equal(t, "new\nold\n", string(ok(t, nil, "--dir", dir, "consume", "ev", "--from", from)))
}
