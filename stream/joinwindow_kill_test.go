package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The join kill test's child: the test binary run again with
// joinKillChildEnv set to "<log folder>|<work folder>" runs the join
// pipeline there (joinKillChild) instead of the tests.
const (
	joinKillChildEnv = "STROM_JOINWINDOW_KILL_CHILD"
	joinKillSeedEnv  = "STROM_JOINWINDOW_KILL_SEED" // replays a kill schedule
	joinKillWithin   = 40                           // ms
	joinKillOut      = "joined.txt"
)

func init() {
	if v := os.Getenv(joinKillChildEnv); v != "" {
		logDir, work, _ := strings.Cut(v, "|")
		os.Exit(joinKillChild(logDir, work))
	}
}

// joinKillChild runs an outer JoinWindow of topics "left" and "right" of
// the log in logDir (replayed from the FileStore in work/state) and
// appends each result to work/joined.txt as "L R end" (O_APPEND, one write
// per batch, before the batch finishes: every result a saved position or
// state may have passed is in the file; a kill inside a write leaves a
// torn last line without its "end", which the next run ends with a
// newline). A Write sleeps 2ms, so that kills land mid-run.
func joinKillChild(logDir, work string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "join kill child:", err)
		return 1
	}
	lg, err := log.Open(logDir, log.ReadOnly())
	if err != nil {
		return fail(err)
	}
	defer lg.Close()
	store, err := checkpoint.NewFileStore(filepath.Join(work, "state"))
	if err != nil {
		return fail(err)
	}
	out, err := os.OpenFile(filepath.Join(work, joinKillOut), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	if data, err := os.ReadFile(out.Name()); err == nil && len(data) > 0 && data[len(data)-1] != '\n' {
		if _, err := out.WriteString("\n"); err != nil { // end the torn line
			return fail(err)
		}
	}
	read := func(topic string) *stream.Stream[[3]int64] {
		src := source.Topic(lg, topic, source.FromStore(store), source.Replay(), source.MaxBytes(1<<10))
		return stream.MapTo(stream.From(src), func(_ context.Context, r log.Record) ([3]int64, error) {
			var id, key, at int64
			_, err := fmt.Sscanf(string(r.Value), "%d %d %d", &id, &key, &at)
			return [3]int64{id, key, at}, err
		})
	}
	byKey := func(v [3]int64) int64 { return v[1] }
	at := func(v [3]int64) time.Time { return time.UnixMilli(v[2]) }
	joins := stream.OuterJoinWindow(stream.KeyBy(read("left"), byKey), stream.KeyBy(read("right"), byKey), joinKillWithin*time.Millisecond,
		func(l [3]int64, lok bool, r [3]int64, rok bool) joined {
			j := joined{-1, -1}
			if lok {
				j.L = int(l[0])
			}
			if rok {
				j.R = int(r[0])
			}
			return j
		}, stream.JoinTimes(at, at), stream.OutOfOrderness(50*time.Millisecond))
	err = joins.To(sinkFunc[joined](func(_ context.Context, js []joined) error {
		var b strings.Builder
		for _, j := range js {
			fmt.Fprintf(&b, "%d %d end\n", j.L, j.R)
		}
		_, err := out.WriteString(b.String())
		time.Sleep(2 * time.Millisecond)
		return err
	})).Checkpointing(store, stream.CheckpointInterval(5*time.Millisecond)).Run(context.Background())
	if err != nil {
		return fail(err)
	}
	return 0
}

// publishJoinInputs writes ords and pays into topics "left" and "right" (two
// partitions each, keyed by Key) of a log in dir, each value "ID key At".
func publishJoinInputs(t *testing.T, dir string, ords []order, pays []payment) {
	t.Helper()
	lg, err := log.Open(dir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	put := func(topic string, n int, rec func(i int) (string, string)) {
		tp, err := lg.CreateTopic(topic, 2)
		require.NoError(t, err)
		for i := range n {
			key, value := rec(i)
			_, _, err := tp.Append(context.Background(), log.Record{Key: []byte(key), Value: []byte(value)})
			require.NoError(t, err)
		}
		require.NoError(t, tp.Sync())
	}
	num := func(key string) string { return strings.TrimPrefix(key, "k") }
	put("left", len(ords), func(i int) (string, string) {
		return ords[i].Key, fmt.Sprintf("%d %s %d", ords[i].ID, num(ords[i].Key), ords[i].At)
	})
	put("right", len(pays), func(i int) (string, string) {
		return pays[i].Key, fmt.Sprintf("%d %s %d", pays[i].ID, num(pays[i].Key), pays[i].At)
	})
}

// joinKillRun starts the child on the log in logDir and the work folder
// work.
func joinKillRun(t *testing.T, logDir, work string) (*exec.Cmd, <-chan error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), joinKillChildEnv+"="+logDir+"|"+work)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited, &stderr
}

// readJoined returns the results in work's joined.txt, each complete line
// (ending in "end") once per time it was written.
func readJoined(t *testing.T, work string) []joined {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(work, joinKillOut))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []joined
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "end" || !strings.HasSuffix(line, "\n") {
			continue // torn by a kill
		}
		l, err1 := strconv.Atoi(f[0])
		r, err2 := strconv.Atoi(f[1])
		require.NoError(t, errors.Join(err1, err2), "line %q", line)
		out = append(out, joined{l, r})
	}
	return out
}

// TestJoinWindowSurvivesKill9 runs an outer JoinWindow of two log topics
// (two partitions each) in a child process once uninterrupted, for the
// reference, and once SIGKILLed at 5 seeded moments (once the run has
// written a seeded number of results) and restarted each time from its
// FileStore, the sixth run let finish. It ensures every kill hit a running
// child, and that the killed runs' results, without duplicates, equal the
// reference's, which equal a nested loop over the inputs.
func TestJoinWindowSurvivesKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(joinKillSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, joinKillSeedEnv)
		seed = v
	}
	t.Logf("seed %d (%s=%d replays it)", seed, joinKillSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 9))

	ords, pays := joinInputs(41, 1500, 1200, 8, 10, 40)
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	publishJoinInputs(t, logDir, ords, pays)
	want := nestedLoop("outer", ords, pays, joinKillWithin)

	ref := filepath.Join(dir, "reference")
	_, exited, stderr := joinKillRun(t, logDir, ref)
	require.NoError(t, <-exited, "reference run: %s", stderr)
	refJoined := readJoined(t, ref)
	require.Equal(t, want, sorted(refJoined), "the uninterrupted run's results are the nested loop's, once each")

	work := filepath.Join(dir, "killed")
	var notes []string
	resumed := 0
	for round := 0; ; round++ {
		before := len(readJoined(t, work))
		cmd, exited, stderr := joinKillRun(t, logDir, work)
		if round == 5 {
			select {
			case err := <-exited:
				require.NoError(t, err, "final run: %s", stderr)
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("final run did not finish in a minute: %s", stderr)
			}
			break
		}
		mark := before + 1 + rng.IntN(len(want)/8)
		tick := time.NewTicker(time.Millisecond)
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case err := <-exited:
				tick.Stop()
				require.FailNow(t, "the child finished before its kill", "round %d (seed %d): %v; it needs more work per result\n%s", round, seed, err, stderr)
			case <-deadline:
				tick.Stop()
				_ = cmd.Process.Kill()
				require.FailNow(t, "the child did not reach its kill point in a minute", "round %d (seed %d)\n%s", round, seed, stderr)
			case <-tick.C:
				if len(readJoined(t, work)) >= mark {
					break wait
				}
			}
		}
		tick.Stop()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err := <-exited
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "round %d", round)
		ws, ok := ee.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "round %d: the kill hit a running child (%v)", round, err)
		// The checkpoint a kill leaves is readable, never torn.
		store, err := checkpoint.NewFileStore(filepath.Join(work, "state"))
		require.NoError(t, err)
		_, saved, err := store.LoadState(context.Background(), stream.StageOuterJoinWindow)
		require.NoError(t, err, "the join's state after kill %d", round+1)
		if saved {
			resumed++
		}
		notes = append(notes, fmt.Sprintf("kill %d after %d results (state saved: %v)", round+1, len(readJoined(t, work))-before, saved))
	}
	require.GreaterOrEqual(t, resumed, 3, "kills that left a saved state to restore: %v", notes)
	got := readJoined(t, work)
	require.Equal(t, want, dedup(got), "the killed runs' results without duplicates (seed %d)", seed)
	t.Logf("%s; %d results written for %d distinct", strings.Join(notes, ", "), len(got), len(want))
}
