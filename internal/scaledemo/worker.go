package scaledemo

// The workers: sshwatch processes in Kafka mode, members of the group.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyLine is what sshwatch prints to stderr in Kafka mode once a signal
// stops it cleanly.
const readyLine = "sshwatch: reading the Kafka topic"

// worker is one sshwatch process of the group.
type worker struct {
	name       string // w0, w1, ...
	dir        string // its --dir: windows.jsonl
	stdoutPath string // its alerts
	stderrPath string

	cmd       *exec.Cmd
	done      chan struct{} // closed once it exited
	err       error         // its exit, once done
	signalled bool          // the run sent it SIGKILL or SIGTERM
}

type exitError = exec.ExitError

// sshwatch returns the command running sshwatch with args.
func (r *run) sshwatch(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.cfg.SSHWatch, args...)
}

// startWorker starts the next worker: sshwatch --brokers ... in the group,
// its alerts (stdout) and stderr in files of the run folder.
func (r *run) startWorker() error {
	name := "w" + strconv.Itoa(len(r.workers))
	w := &worker{name: name, dir: filepath.Join(r.cfg.Dir, name),
		stdoutPath: filepath.Join(r.cfg.Dir, name+".alerts"), stderrPath: filepath.Join(r.cfg.Dir, name+".stderr"),
		done: make(chan struct{})}
	args := []string{"--brokers", strings.Join(r.cluster.Brokers(), ","), "--topic", topic, "--group", group,
		"--json", "--year", strconv.Itoa(r.cfg.Year), "--dir", w.dir,
		"--session-timeout", sessionTimeout.String(), "--rebalance-timeout", rebalanceTimeout.String()}
	if r.cfg.Repartition {
		args = append(args, "--repartition", "--out-of-order", repartitionOutOfOrder.String())
	}
	stdout, err := os.Create(w.stdoutPath)
	if err != nil {
		return fmt.Errorf("scaledemo: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.Create(w.stderrPath)
	if err != nil {
		return fmt.Errorf("scaledemo: %w", err)
	}
	defer stderr.Close()
	// Not CommandContext: the run stops its workers itself (killAll on
	// the way out of a failure).
	w.cmd = exec.Command(r.cfg.SSHWatch, args...)
	w.cmd.Stdout, w.cmd.Stderr = stdout, stderr
	if err := w.cmd.Start(); err != nil {
		return fmt.Errorf("scaledemo: start %s: %w", name, err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	r.workers = append(r.workers, w)
	return nil
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (w *worker) kill() error {
	w.signalled = true
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil && !w.exited() {
		return fmt.Errorf("scaledemo: kill %s: %w", w.name, err)
	}
	select {
	case <-w.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("scaledemo: %s did not exit within 30s of SIGKILL", w.name)
	}
}

// terminate waits until the worker handles SIGTERM (it printed readyLine),
// then sends it.
func (w *worker) terminate(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(w.stderrPath)
		if err == nil && bytes.Contains(data, []byte(readyLine)) {
			break
		}
		if w.exited() {
			return fmt.Errorf("scaledemo: %s exited before SIGTERM: %v (see %s)", w.name, w.err, w.stderrPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scaledemo: %s was not ready for SIGTERM within 30s (see %s)", w.name, w.stderrPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scaledemo: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
	w.signalled = true
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("scaledemo: stop %s: %w", w.name, err)
	}
	return nil
}
