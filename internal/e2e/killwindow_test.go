package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// The window kill test's settings.
const (
	kwSeed   = 20261201 // the kill schedule's seed
	kwKills  = 5
	kwPace   = "500us" // sshwatch --pace: about 1s of publishing, then 1s of windows
	kwLines  = 2000    // lines of OpenSSH_2k.log
	kwWindow = "windows.jsonl"
)

// kwWindowKey names a window of sshwatch: source IP and window start.
type kwWindowKey struct{ ip, start string }

// TestSshwatchWindowsSurviveKill9 runs examples/sshwatch over
// OpenSSH_2k.log once without a kill (--dir A) for the reference: every
// window's count (windows.jsonl) and the alerts (stdout, --json). Then, in
// a fresh --dir B, paced (--pace 500us), it SIGKILLs sshwatch 5 times at
// seeded random points and starts it again each time, and lets the sixth
// run finish: the first two kills after a random 50 to 400ms (while it
// publishes the file into the log), the other three once windows.jsonl
// holds 3 to 8, then 30 to 35, then 42 to 48 distinct windows (of 61),
// plus up to 150ms (while the window pipeline runs). It ensures every kill hit a running process, at least one
// landed while publishing and at least two mid-pipeline (every line
// published, some windows written, not all), two of those after a
// checkpoint that saved the window's state, that no checkpoint is ever
// unreadable, that over all runs the alerts printed are the reference's
// set, and that windows.jsonl holds every reference window with its count,
// none missing, none extra, a window written twice always with one count.
func TestSshwatchWindowsSurviveKill9(t *testing.T) {
	input := filepath.Join(loghub.Dir(t), "OpenSSH_2k.log")
	binary := buildSshwatch(t)
	work := t.TempDir()
	args := func(dir string, extra ...string) []string {
		return append([]string{"--input", input, "--dir", dir, "--json", "--year", "2026"}, extra...)
	}

	// The reference, uninterrupted.
	refDir := filepath.Join(work, "A")
	ref := exec.Command(binary, args(refDir)...)
	var refErr bytes.Buffer
	ref.Stderr = &refErr
	refOut, err := ref.Output()
	require.NoError(t, err, refErr.String())
	refAlerts := kwParse(t, refOut)
	refWindows := kwParse(t, kwReadWindows(t, refDir))
	require.NotEmpty(t, refAlerts)
	for k, c := range refWindows {
		if c >= 5 {
			require.Equal(t, c, refAlerts[k], "the reference alerts on window %v", k)
		}
	}
	require.Len(t, refAlerts, len(kwAtLeast(refWindows, 5)))

	// Killed and restarted.
	dir := filepath.Join(work, "B")
	rng := rand.New(rand.NewPCG(kwSeed, 0))
	var alerts bytes.Buffer // what every run printed
	duringPublish, midPipeline, resumable := 0, 0, 0
	var notes []string
	for round := 0; ; round++ {
		cmd := exec.Command(binary, args(dir, "--pace", kwPace)...)
		cmd.Env = testutil.CleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		if round == kwKills {
			select {
			case err := <-exited:
				require.NoError(t, err, "final run: %s", stderr.String())
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("final run did not finish in 30s: %s", stderr.String())
			}
			alerts.Write(stdout.Bytes())
			break
		}

		// The kill's trigger: a delay, or windows.jsonl growing.
		var fire <-chan time.Time
		mark := 0 // kill once windows.jsonl holds this many windows
		switch round {
		case 0, 1:
			fire = time.After(time.Duration(50+rng.IntN(350)) * time.Millisecond)
		case 2:
			mark = 3 + rng.IntN(6)
		case 3:
			mark = 30 + rng.IntN(6)
		case 4:
			mark = 42 + rng.IntN(7)
		}
		extra := time.Duration(rng.IntN(150)) * time.Millisecond
		tick := time.NewTicker(2 * time.Millisecond)
		deadline := time.After(20 * time.Second)
	wait:
		for {
			select {
			case err := <-exited:
				tick.Stop()
				require.FailNow(t, "sshwatch ended before its kill", "round %d: %v\n%s", round, err, stderr.String())
			case <-deadline:
				tick.Stop()
				_ = cmd.Process.Kill()
				require.FailNow(t, "sshwatch did not reach its kill point in 20s", "round %d:\n%s", round, stderr.String())
			case <-fire:
				break wait
			case <-tick.C:
				if mark > 0 && len(kwParse(t, kwReadWindows(t, dir))) >= mark {
					fire, mark = time.After(extra), 0
				}
			}
		}
		tick.Stop()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err := <-exited
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "round %d", round)
		ws, ok := ee.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
			"round %d: the kill hit a running sshwatch, not one that had ended (%v)", round, err)
		alerts.Write(stdout.Bytes())

		// Where the kill landed.
		pub := kwPublished(t, dir)
		seen := kwParse(t, kwReadWindows(t, dir))
		pos, state := kwCheckpoint(t, dir)
		switch {
		case pub < kwLines:
			duringPublish++
		case len(seen) > 0 && len(seen) < len(refWindows):
			midPipeline++
			if pos > 0 && state {
				resumable++
			}
		}
		notes = append(notes, fmt.Sprintf("kill %d: %d lines published, position %d, %d windows.jsonl lines (%d windows)",
			round+1, pub, pos, kwCountLines(t, dir), len(seen)))
	}

	require.GreaterOrEqual(t, duringPublish, 1, "a kill landed while publishing: %v", notes)
	require.GreaterOrEqual(t, midPipeline, 2, "kills landed mid-pipeline: %v", notes)
	require.GreaterOrEqual(t, resumable, 2, "kills landed mid-pipeline after a checkpoint with the window's state: %v", notes)
	require.Equal(t, refAlerts, kwParse(t, alerts.Bytes()), "the set of alerts over all runs")
	windows := kwReadWindows(t, dir)
	require.Equal(t, refWindows, kwParse(t, windows), "every window and its count")
	t.Logf("%d kills (%d while publishing, %d mid-pipeline): %s; %d windows (%d lines written, %d alert lines printed for %d alerts), all equal to the uninterrupted run",
		kwKills, duringPublish, midPipeline, strings.Join(notes, "; "), len(refWindows),
		bytes.Count(windows, []byte("\n")), bytes.Count(alerts.Bytes(), []byte("\n")), len(refAlerts))
}

// buildSshwatch builds examples/sshwatch into the test's temporary folder
// (without the race detector, like TestMain's services).
func buildSshwatch(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sshwatch")
	build := exec.Command("go", "build", "-o", out, "./examples/sshwatch")
	build.Dir = repoRoot
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/sshwatch: %v\n%s", err, msg)
	}
	return out
}

// kwParse reads sshwatch's JSON result lines (alerts or windows.jsonl) into
// their counts by window, requiring a window seen twice to have one count.
// A line that is not JSON is skipped: only a torn last line left by a kill
// inside a write can be one (sshwatch ends it with a newline at its next
// start, and writes that result again whole).
func kwParse(t *testing.T, data []byte) map[kwWindowKey]int64 {
	t.Helper()
	out := make(map[kwWindowKey]int64)
	for line := range strings.Lines(string(data)) {
		var r struct {
			Start string `json:"window_start"`
			End   string `json:"window_end"`
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		k := kwWindowKey{r.Key, r.Start}
		if c, seen := out[k]; seen {
			require.Equal(t, c, r.Count, "window %v written twice with different counts", k)
		}
		out[k] = r.Count
	}
	return out
}

func kwAtLeast(m map[kwWindowKey]int64, n int64) map[kwWindowKey]int64 {
	out := make(map[kwWindowKey]int64)
	for k, c := range m {
		if c >= n {
			out[k] = c
		}
	}
	return out
}

func kwReadWindows(t *testing.T, dir string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, kwWindow))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return data
}

func kwCountLines(t *testing.T, dir string) int {
	return bytes.Count(kwReadWindows(t, dir), []byte("\n"))
}

// kwPublished returns how many lines the log in dir holds: the sum of the
// high watermarks of topic "ssh" (0 before it exists).
func kwPublished(t *testing.T, dir string) int {
	t.Helper()
	lg, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.Topic("ssh")
	if errors.Is(err, log.ErrUnknownTopic) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for p := range topic.Partitions() {
		part, err := topic.Partition(int32(p))
		require.NoError(t, err)
		n += int(part.HighWatermark())
	}
	return n
}

// kwCheckpoint loads the position and the window's state saved in
// dir/checkpoints, requiring both to be readable (or absent), never
// corrupt, after a kill. It returns the position (0 when none) and whether
// a state was saved.
func kwCheckpoint(t *testing.T, dir string) (position int64, state bool) {
	t.Helper()
	cp := filepath.Join(dir, "checkpoints")
	if _, err := os.Stat(cp); errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	store, err := checkpoint.NewFileStore(cp)
	require.NoError(t, err)
	pos, _, err := store.Load(context.Background(), "ssh", 0)
	require.NoError(t, err, "position after a kill")
	_, found, err := store.LoadState(context.Background(), "failed-per-ip")
	require.NoError(t, err, "window state after a kill")
	return pos.Offset, found
}
