package log_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// killCompactionOptions are the options of the kill test's log: small
// segments, so a pass rewrites many.
func killCompactionOptions() []log.Option {
	return []log.Option{log.WithSegmentBytes(32 << 10), log.WithRetentionCheckInterval(0)}
}

// TestHelperCompactionProcess is not a test: it is the child of
// TestCompactionKilledAtEachFileOperation. It opens the log in
// STROM_COMPACT_DIR, runs a cleaner pass over topic "users" and kills
// itself with SIGKILL before the pass's file operation number
// STROM_COMPACT_KILL_AT (counting from 1).
func TestHelperCompactionProcess(t *testing.T) {
	dir := os.Getenv("STROM_COMPACT_DIR")
	if dir == "" {
		return
	}
	at, _ := strconv.Atoi(os.Getenv("STROM_COMPACT_KILL_AT"))
	lg, err := log.Open(dir, killCompactionOptions()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tp, err := lg.WriteTopic("users")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := 0
	defer log.SetCleanerHook(func(op string) {
		if n++; n == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})()
	if _, err := tp.Compact(time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(3) // the pass ended before the kill
}

// TestCompactionKilledAtEachFileOperation kills a cleaner pass (a real
// child process, SIGKILL) before each of its file operations: creating,
// writing and syncing a cleaned copy, writing the compacted flag, removing
// the seal marker, the rename, the directory sync, the new marker and the
// checkpoint. After each kill the log opens for writing, every record it
// serves is the one written at its offset, every key's latest record is
// what it was before the pass, the high watermark has not moved, and a
// pass run then gives exactly what an uninterrupted pass gives.
func TestCompactionKilledAtEachFileOperation(t *testing.T) {
	fixture := t.TempDir()
	in := newCompactionInput(21, 100, 60) // 6,000 records, about 13 segments of 32 KiB
	lg := openLog(t, fixture, killCompactionOptions()...)
	tp, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := 0; i < len(in.recs); i += 200 {
		_, err := p.Append(context.Background(), in.recs[i:i+200]...)
		require.NoError(t, err)
	}
	want := lastValues(readAll(t, p))
	hw := p.HighWatermark()
	require.NoError(t, lg.Close())

	// The uninterrupted pass: how many file operations, and what it leaves.
	clean := copyLogDir(t, fixture)
	ops := 0
	lg, tp, p = openUsers(t, clean)
	undo := log.SetCleanerHook(func(string) { ops++ })
	_, err = tp.Compact(time.Now())
	undo()
	require.NoError(t, err)
	reference := readAll(t, p)
	require.NoError(t, lg.Close())
	require.Greater(t, ops, 16, "the pass rewrote several segments")

	// Every operation of the first two segments and the checkpoint, and a
	// seeded sample of the rest (all of them in a soak).
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (STROM_COMPACT_SEED replays it), %d file operations in a pass", seed, ops)
	if s, err := strconv.ParseUint(os.Getenv("STROM_COMPACT_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	var kills []int
	for k := 1; k <= ops; k++ {
		if k <= 16 || k == ops || rng.IntN(ops) < strength(4, 16, ops) {
			kills = append(kills, k)
		}
	}
	for _, k := range kills {
		dir := copyLogDir(t, fixture)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCompactionProcess$")
		cmd.Env = append(os.Environ(), "STROM_COMPACT_DIR="+dir, "STROM_COMPACT_KILL_AT="+strconv.Itoa(k))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "kill at operation %d: %s", k, out)
		require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "kill at operation %d: %s", k, out)

		lg, tp, p := openUsers(t, dir)
		require.EqualValues(t, hw, p.HighWatermark(), "kill at operation %d", k)
		got := readAll(t, p)
		for _, r := range got {
			require.Equal(t, in.recs[r.Offset].Value, r.Value, "kill at operation %d: offset %d", k, r.Offset)
		}
		lv := lastValues(got)
		require.Len(t, lv, len(want), "kill at operation %d", k)
		for key, r := range want {
			require.Equal(t, r.Offset, lv[key].Offset, "kill at operation %d: key %s", k, key)
		}
		_, err = tp.Compact(time.Now())
		require.NoError(t, err, "kill at operation %d: a pass after the crash", k)
		assert.Equal(t, reference, readAll(t, p), "kill at operation %d: the pass after the crash leaves what an uninterrupted one does", k)
		leftovers, _ := filepath.Glob(filepath.Join(dir, "users", "0", "*.cleaned"))
		assert.Empty(t, leftovers, "kill at operation %d: the open removed the cleaned copy left behind", k)
		require.NoError(t, lg.Close())
	}
}

// openUsers opens the log in dir for writing and returns topic "users" and
// its partition 0.
func openUsers(t *testing.T, dir string) (*log.Log, *log.Topic, *log.Partition) {
	t.Helper()
	lg := openLog(t, dir, killCompactionOptions()...)
	tp, err := lg.WriteTopic("users")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return lg, tp, p
}

// copyLogDir copies the log directory src to a new temporary directory.
func copyLogDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}
