package torture

// The supervisor's children as processes: their arguments, starting,
// signalling, and waiting for their exits.

import (
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

// child is one of the supervisor's child processes, across its
// incarnations.
type child struct {
	name      string
	role      string // rolePublisher, roleConsumer, roleRelay, roleRelayBack, roleProbe, roleScaleWorker or roleEOSKafkaWorker
	partition int32  // the consumer's partition, the scale worker's slot; -1 for the others
	inc       int    // incarnations started so far, minus one
	cmd       *exec.Cmd
	running   bool  // the current incarnation has not been seen to exit
	signalled bool  // the supervisor sent the current incarnation SIGKILL or SIGTERM
	exitErr   error // the current incarnation's exit, once !running
}

// The roles of the children.
const (
	rolePublisher = "publisher"
	roleConsumer  = "consumer"
	roleRelay     = "relay"      // examples/relay log-to-kafka
	roleRelayBack = "relay-back" // examples/relay kafka-to-log
	roleProbe     = "probe"      // ScenarioSlow's first-checkpoint probe
)

// exit is a child's exit, sent by its wait goroutine.
type exit struct {
	c   *child
	inc int
	err error
}

// args returns the child's command-line arguments for its next incarnation.
func (s *supervisor) args(c *child) []string {
	if c.role == roleScaleWorker {
		return s.scaleWorkerArgs(c)
	}
	if c.role == roleEOSKafkaWorker {
		return s.eosKafkaWorkerArgs(c)
	}
	if c.role == roleEOSLogWorker {
		return s.eosLogWorkerArgs(c)
	}
	if c.role == roleRelayBack {
		return []string{"--direction", "kafka-to-log", "--brokers", strings.Join(s.cluster.Brokers(), ","),
			"--dir", logDir(s.cfg.Dir), "--from", RelayTopic, "--to", BackTopic, "--partitions", strconv.Itoa(Partitions),
			"--group", BackGroup, "--session-timeout", backSession.String(), "--rebalance-timeout", backRebalance.String(), "--instance-id", "torture-back", "--addr", "127.0.0.1:0"}
	}
	if c.role == roleRelay && s.cfg.Scenario == ScenarioRelayExactlyOnce {
		return []string{"--direction", "log-to-kafka", "--brokers", strings.Join(s.cluster.Brokers(), ","),
			"--dir", logDir(s.cfg.Dir), "--from", Topic, "--to", RelayTopic,
			"--exactly-once", "--transactional-id", RelayTransactionalID, "--addr", "127.0.0.1:0"}
	}
	if c.role == roleRelay {
		return []string{"--direction", "log-to-kafka", "--brokers", strings.Join(s.cluster.Brokers(), ","),
			"--dir", logDir(s.cfg.Dir), "--from", Topic, "--to", RelayTopic,
			"--state", filepath.Join(relayDir(s.cfg.Dir), "state"), "--addr", "127.0.0.1:0"}
	}
	common := []string{"--dir", s.cfg.Dir, "--inc", strconv.Itoa(c.inc), "--seed", strconv.FormatUint(s.rng.Uint64(), 10),
		"--ready", s.readyPath(c)}
	if c.role == rolePublisher {
		return append(append([]string{"publish"}, common...),
			"--mode", s.cfg.Mode.String(),
			"--segment-bytes", strconv.FormatInt(s.cfg.SegmentBytes, 10),
			"--rate", strconv.Itoa(s.cfg.Rate))
	}
	if s.cfg.Scenario == ScenarioSlow {
		return append(append([]string{"consume"}, common...), s.slowArgs(c)...)
	}
	// A checkpoint interval of 1 to 10 ms: saves are frequent, so kills
	// land inside them.
	interval := time.Duration(1+s.rng.IntN(10)) * time.Millisecond
	return append(append([]string{"consume"}, common...),
		"--partition", strconv.Itoa(int(c.partition)),
		"--scenario", s.cfg.Scenario,
		"--forget-every", strconv.FormatInt(s.cfg.ForgetEvery, 10),
		"--checkpoint-interval", interval.String())
}

// readyPath is the file c's incarnations write their number to once they
// handle SIGTERM.
func (s *supervisor) readyPath(c *child) string { return filepath.Join(s.cfg.Dir, c.name+".ready") }

// terminate waits until c's current incarnation handles SIGTERM, then sends
// it.
func (s *supervisor) terminate(ctx context.Context, c *child) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c.role == roleRelay || c.role == roleRelayBack {
			// examples/relay prints its address once it handles SIGTERM.
			if stderrReady(filepath.Join(s.cfg.Dir, c.name+".stderr"), c.inc, "stats on http://") {
				break
			}
		} else if data, err := os.ReadFile(s.readyPath(c)); err == nil && string(data) == strconv.Itoa(c.inc) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("torture: %s (incarnation %d) was not ready for SIGTERM within 30s", c.name, c.inc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.mu.Lock()
	c.signalled = true
	s.mu.Unlock()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("torture: stop %s: %w", c.name, err)
	}
	return nil
}

// start starts c's next incarnation, its stderr appended to NAME.stderr.
func (s *supervisor) start(c *child) error {
	if c.cmd != nil {
		c.inc++
	}
	out, err := os.OpenFile(filepath.Join(s.cfg.Dir, c.name+".stderr"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	defer out.Close()
	fmt.Fprintf(out, "--- torture: incarnation %d\n", c.inc)
	var cmd *exec.Cmd
	if c.role == roleRelay || c.role == roleRelayBack {
		cmd = s.cfg.RelayCommand(s.args(c)...)
	} else {
		cmd = s.cfg.Command(s.args(c)...)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("torture: start %s: %w", c.name, err)
	}
	c.cmd, c.running, c.signalled, c.exitErr = cmd, true, false, nil
	inc := c.inc
	go func() { s.exits <- exit{c: c, inc: inc, err: cmd.Wait()} }()
	return nil
}

// wait waits for c's current incarnation to exit, after the supervisor
// signalled it, and returns its exit error; ok is false after timeout. An
// exit of a child the supervisor did not signal is a violation.
func (s *supervisor) wait(c *child, timeout time.Duration) (err error, ok bool) {
	deadline := time.After(timeout)
	for c.running {
		select {
		case e := <-s.exits:
			s.exited(e)
		case <-deadline:
			return nil, false
		}
	}
	return c.exitErr, true
}

// exited records e: a child's incarnation is gone. When the supervisor did
// not signal it, that is a violation.
func (s *supervisor) exited(e exit) {
	if e.inc != e.c.inc {
		return
	}
	e.c.running, e.c.exitErr = false, e.err
	if !e.c.signalled {
		s.unexpected(e)
	}
}

// unexpected records an exit the supervisor did not cause.
func (s *supervisor) unexpected(e exit) {
	s.violate("%s (incarnation %d) exited by itself: %v (see %s.stderr)", e.c.name, e.inc, e.err, e.c.name)
}

// dumpStacks makes every relay still running print its goroutines and
// exit (SIGQUIT: the Go runtime writes every goroutine's stack to stderr,
// the child's NAME.stderr), so that a relay that stopped making progress
// says where it stands.
func (s *supervisor) dumpStacks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		if c.running && (c.role == roleRelay || c.role == roleRelayBack) {
			c.signalled = true
			_ = c.cmd.Process.Signal(syscall.SIGQUIT)
			s.wait(c, 10*time.Second)
		}
	}
}

// killAll kills every child still running, on the way out of a failed run.
func (s *supervisor) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		if c.running {
			c.signalled = true
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, c := range s.children {
		if !c.running {
			continue
		}
		if _, ok := s.wait(c, 10*time.Second); !ok {
			return
		}
	}
}
