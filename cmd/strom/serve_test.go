package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/web"
)

// servingRe is the line `strom serve` prints once it listens.
var servingRe = regexp.MustCompile(`^serving on (http://\S+/) \(log directory (.+), read-only; Ctrl-C stops\)$`)

// serving is a `strom serve` process a test started.
type serving struct {
	cmd    *exec.Cmd
	url    string        // the page's URL, "http://127.0.0.1:PORT/"
	stderr *bytes.Buffer // read it only after exited is closed
	exited chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's error, once exited is closed
}

// startServe starts `strom serve` with args and waits, at most 10 s, for
// the line that says where it listens. The process is interrupted, if still
// running, when the test ends.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	s := &serving{cmd: exec.Command(stromBin, args...), stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	s.cmd.Env = testutil.CleanEnv()
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		<-s.exited
	})
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case line := <-lines:
		m := servingRe.FindStringSubmatch(line)
		require.NotNil(t, m, "first line %q", line)
		s.url = m[1]
	case <-s.exited:
		t.Fatalf("strom serve exited before it listened: %v: %s", s.err, s.stderr)
	case <-timer.C:
		t.Fatal("strom serve printed no address within 10 s")
	}
	return s
}

// stop sends sig and requires an exit with status 0 within 10 s.
func (s *serving) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(sig))
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-s.exited:
		require.NoError(t, s.err, "stderr: %s", s.stderr)
		assert.Equal(t, 0, s.cmd.ProcessState.ExitCode())
	case <-timer.C:
		t.Fatalf("strom serve still runs 10 s after %v", sig)
	}
}

// getServeSnapshot fetches url (a snapshot.json) from a running strom serve.
func getServeSnapshot(t *testing.T, url string) web.LogSnapshot {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var snap web.LogSnapshot
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	return snap
}

// describedTopic is what TestServeAgreesWithTopicsDescribe reads of
// `topics describe --json`.
type describedTopic struct {
	Topic          string `json:"topic"`
	ID             string `json:"id"`
	PartitionCount int    `json:"partitionCount"`
	Partitions     []struct {
		Partition      int32 `json:"partition"`
		LogStartOffset int64 `json:"logStartOffset"`
		NextOffset     int64 `json:"nextOffset"`
		Segments       []struct {
			Bytes int64 `json:"bytes"`
		} `json:"segments"`
	} `json:"partitions"`
}

// TestServeAgreesWithTopicsDescribeAndPositions ensures the snapshot `strom
// serve` serves gives, for every partition, the log start offset, next
// offset, segment count and bytes `strom topics describe --json` reports,
// and for every saved position the lag `strom positions --json` reports;
// that it sees what another process appends while it serves (it holds no
// lock); and that SIGINT stops it with exit status 0.
func TestServeAgreesWithTopicsDescribeAndPositions(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 2)
	ok(t, bytes.Repeat([]byte("a line of thirty-two bytes.....\n"), 300), "--dir", dir, "produce", "ev", "--partition", "0", "--segment-bytes", "4096", "--mode", "file")
	ok(t, []byte("one\ntwo\n"), "--dir", dir, "produce", "ev", "--partition", "1")
	state := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(state, 0o755))
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "0", "100")
	ok(t, nil, "--dir", dir, "positions", "set", "--state", state, "ev", "1", "latest")

	s := startServe(t, "--dir", dir, "serve", "--addr", "127.0.0.1:0", "--state", state)
	snap := getServeSnapshot(t, s.url+"snapshot.json")
	var described []describedTopic
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "topics", "describe", "--json"), &described))
	require.Len(t, described, 1)
	require.Len(t, snap.Topics, 1)
	d, tf := described[0], snap.Topics[0]
	assert.Equal(t, d.Topic, tf.Topic)
	assert.Equal(t, d.ID, tf.ID)
	assert.Equal(t, d.PartitionCount, tf.PartitionCount)
	require.Len(t, tf.Partitions, len(d.Partitions))
	for i, dp := range d.Partitions {
		pf := tf.Partitions[i]
		var bytes int64
		for _, seg := range dp.Segments {
			bytes += seg.Bytes
		}
		assert.Equal(t, dp.Partition, pf.Partition)
		assert.Equal(t, dp.LogStartOffset, pf.LogStartOffset, "partition %d", i)
		assert.Equal(t, dp.NextOffset, pf.NextOffset, "partition %d", i)
		assert.Equal(t, len(dp.Segments), pf.Segments, "partition %d", i)
		assert.Equal(t, bytes, pf.Bytes, "partition %d", i)
	}
	assert.Greater(t, tf.Partitions[0].Segments, 2, "4 KiB segments rolled")

	var positions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Position  int64  `json:"position"`
		Lag       *int64 `json:"lag"`
	}
	require.NoError(t, json.Unmarshal(ok(t, nil, "--dir", dir, "positions", "--state", state, "--json"), &positions))
	require.Len(t, snap.Positions, len(positions))
	for i, p := range positions {
		sp := snap.Positions[i]
		assert.Equal(t, state, sp.State)
		assert.Equal(t, p.Topic, sp.Topic)
		assert.Equal(t, p.Partition, sp.Partition)
		assert.Equal(t, p.Position, sp.Position)
		require.NotNil(t, sp.Lag)
		assert.Equal(t, *p.Lag, *sp.Lag, "%s/%d", p.Topic, p.Partition)
	}
	assert.Equal(t, int64(200), *snap.Positions[0].Lag)

	ok(t, []byte("three\n"), "--dir", dir, "produce", "ev", "--partition", "1") // takes the writer lock
	snap = getServeSnapshot(t, s.url+"snapshot.json?topic=ev")
	assert.Equal(t, int64(3), snap.Topics[0].Partitions[1].NextOffset)
	assert.Equal(t, int64(1), *snap.Positions[1].Lag)

	s.stop(t, os.Interrupt)
	assert.Empty(t, s.stderr.String())
}

// TestServeOnAnyInterfaceWarnsAndStopsOnSIGTERM ensures --addr on every
// interface serves, says on stderr that the page has no authentication,
// and stops on SIGTERM with exit status 0.
func TestServeOnAnyInterfaceWarnsAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	s := startServe(t, "--dir", dir, "serve", "--addr", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/"))
	require.NoError(t, err)
	snap := getServeSnapshot(t, fmt.Sprintf("http://127.0.0.1:%s/snapshot.json", port))
	assert.Equal(t, "ev", snap.Topics[0].Topic)
	s.stop(t, syscall.SIGTERM)
	assert.Contains(t, s.stderr.String(), "strom: warning: --addr 0.0.0.0:0 is not a loopback address: anyone who can reach it can read the page, which has no authentication")
}

// TestServeRefusesABadAddressABusyPortAndAMissingStateFolder ensures each
// fails at once with a message naming it, and creates nothing.
func TestServeRefusesABadAddressABusyPortAndAMissingStateFolder(t *testing.T) {
	t.Parallel()
	dir := newLog(t, "ev", 1)
	r := strom(t, nil, "--dir", dir, "serve", "--addr", "7080")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, string(r.stderr), `strom: --addr "7080" is not HOST:PORT`)

	missing := filepath.Join(t.TempDir(), "state")
	r = strom(t, nil, "--dir", dir, "serve", "--addr", "127.0.0.1:0", "--state", missing)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "checkpoint folder "+missing+" does not exist")
	assert.NoDirExists(t, missing)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	r = strom(t, nil, "--dir", dir, "serve", "--addr", ln.Addr().String())
	assert.Equal(t, 1, r.code)
	assert.Contains(t, string(r.stderr), "strom: listen on "+ln.Addr().String()+": address already in use")

	r = strom(t, nil, "--dir", dir, "serve", "extra")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, string(r.stderr), "serve takes no arguments, got 1")
}
