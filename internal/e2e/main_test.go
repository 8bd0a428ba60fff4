package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/internal/testutil"
)

// bin holds the paths of the service binaries TestMain built.
var bin struct {
	publisher, consumer, check string
	relay, kafkatool           string
}

// repoRoot is the folder holding go.mod, found by walking up from the test's folder.
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "strom-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the services needs the go command: %v\n", err)
		return 1
	}
	build := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator),
		"./examples/publisher", "./examples/consumer", "./examples/check",
		"./examples/relay", "./internal/cmd/kafkatool")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build of the services failed: %v\n%s", err, out)
		return 1
	}
	bin.publisher = filepath.Join(dir, "publisher")
	bin.consumer = filepath.Join(dir, "consumer")
	bin.check = filepath.Join(dir, "check")
	bin.relay = filepath.Join(dir, "relay")
	bin.kafkatool = filepath.Join(dir, "kafkatool")
	return m.Run()
}

// findRepoRoot walks up from the working directory to the folder holding go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// statsAddr matches the startup line of every service: "... stats on http://ADDR/stats".
var statsAddr = regexp.MustCompile(`stats on (http://\S+)/stats`)

// proc is a service running as a child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string // http://host:port, read from the startup line

	mu     sync.Mutex
	stderr strings.Builder // everything it printed

	done chan struct{} // closed once it has exited
	err  error         // cmd.Wait's result, valid after done
}

// startProc starts a service binary with --addr 127.0.0.1:0 and waits until it prints the
// address it serves on. The process is killed when the test ends; its output is logged if
// the test failed.
func startProc(t *testing.T, name, path string, args ...string) *proc {
	t.Helper()
	return startChild(t, name, nil, statsAddr, path, append(args, "--addr", "127.0.0.1:0")...)
}

// startChild starts path with args and the clean environment plus env, and
// waits until a line of its stderr matches ready; the first group of ready
// is its url. Otherwise as startProc.
func startChild(t *testing.T, name string, env []string, ready *regexp.Regexp, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(testutil.CleanEnv(), env...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- %s (pid %d) printed:\n%s", p.name, p.cmd.Process.Pid, p.output())
		}
	})
	select {
	case p.url = <-urls:
		return p
	case <-p.done:
		t.Fatalf("%s exited at startup (%v):\n%s", name, p.err, p.output())
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not start serving within 15s:\n%s", name, p.output())
	}
	return nil
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and returns the exit error (nil for status 0), failing after 10s.
func (p *proc) stop(t *testing.T) error {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10s of SIGTERM", p.name)
		return nil
	}
}

// stats reads the service's /stats into v.
func (p *proc) stats(t *testing.T, v any) {
	t.Helper()
	if err := service.GetJSON(context.Background(), p.url+"/stats", v); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// waitFor polls cond every 20ms until it returns true, failing with what() after timeout.
// waitForProgress waits until cond reports done, failing when the progress
// it reports (a count that only grows, such as the sum of positions) stays
// the same for stall. A wait on work that takes as long as the machine makes
// it take (consumers handling records beside every other test package and
// two CPU hogs) bounds a stall, not the whole: a deadline for the whole was
// a throughput assertion, and failed under load (TestRealInputSurvivesSIGKILL
// at 46 records/s, during make test beside two CPU hogs, 2026-12-02).
func waitForProgress(t *testing.T, stall time.Duration, cond func() (done bool, progress int64), what func() string) {
	t.Helper()
	last := int64(-1)
	moved := time.Now()
	for {
		done, progress := cond()
		if done {
			return
		}
		if progress != last {
			last, moved = progress, time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("no progress for %v: %s", stall, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
