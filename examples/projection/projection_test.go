package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/web"
)

// binary is the projection binary TestMain built.
var binary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "strom-projection-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "projection")
	build := exec.Command("go", "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build of the projection failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// TestParseFlagsDefaults ensures the documented defaults, the environment fallbacks and the
// required --dir.
func TestParseFlagsDefaults(t *testing.T) {
	for _, k := range []string{"STROM_DIR", "STROM_TOPIC", "STROM_STATE", "STROM_ADDR"} {
		t.Setenv(k, "")
	}
	cfg, err := parseFlags([]string{"--dir", "d"})
	require.NoError(t, err)
	assert.Equal(t, config{dir: "d", topic: "events", addr: "127.0.0.1:7075"}, cfg)

	_, err = parseFlags(nil)
	assert.ErrorContains(t, err, "--dir")

	t.Setenv("STROM_DIR", "envdir")
	t.Setenv("STROM_TOPIC", "clicks")
	cfg, err = parseFlags([]string{"--topic", "flagtopic"})
	require.NoError(t, err)
	assert.Equal(t, "envdir", cfg.dir)
	assert.Equal(t, "flagtopic", cfg.topic, "a flag beats its environment variable")
}

// statsAddr matches the startup line: "... stats on http://ADDR/stats".
var statsAddr = regexp.MustCompile(`stats on (http://\S+)/stats`)

// child is a running projection process.
type child struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
}

// startProjection runs the binary on dir with --addr 127.0.0.1:0 and the extra flags, and waits
// for its address.
func startProjection(t *testing.T, dir string, extra ...string) *child {
	t.Helper()
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(binary, append([]string{"--dir", dir, "--addr", "127.0.0.1:0"}, extra...)...)
	pipe, err := c.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if m := statsAddr.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_ = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill(t)
		if t.Failed() {
			c.mu.Lock()
			t.Logf("projection stderr:\n%s", c.out.String())
			c.mu.Unlock()
		}
	})
	select {
	case c.url = <-urls:
	case <-c.done:
		t.Fatalf("projection exited before serving: %s", c.out.String())
	case <-time.After(5 * time.Second):
		t.Fatal("projection printed no address within 5 s")
	}
	return c
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// get fetches path and returns the status code and body.
func get(url string) (int, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// countKeys replays every partition of topic and counts the records per key, the truth the
// projection must match.
func countKeys(t *testing.T, topic *log.Topic) (map[string]int64, int64) {
	t.Helper()
	counts := make(map[string]int64)
	var total int64
	for i := range topic.Partitions() {
		part, err := topic.Partition(int32(i))
		require.NoError(t, err)
		r := part.Replay(part.StartOffset())
		for {
			recs, err := r.Next(context.Background(), 1<<20)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			for _, rec := range recs {
				counts[string(rec.Key)]++
				total++
			}
		}
	}
	return counts, total
}

// TestCountsEqualTheLogAtEveryQuietPointAcrossTwoKills writes 10,000 events over 100 users
// into a 3-partition topic from this process while the projection runs in another (read-only)
// and is SIGKILLed mid-write twice, and restarted each time. At each quiet point (all writes
// done, the projection caught up) every user's GET /users/ID equals the records with that key
// in the log, counted by a replay here: the restart's replay and the hand-over to the follow
// lose nothing and count nothing twice.
func TestCountsEqualTheLogAtEveryQuietPointAcrossTwoKills(t *testing.T) {
	dir := t.TempDir()
	lg, err := log.Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)

	const users = 100
	rng := rand.New(rand.NewPCG(1, 2))
	var written atomic.Int64
	write := func(n int) {
		for range n {
			seq := written.Add(1)
			user := fmt.Sprintf("user-%d", rng.IntN(users))
			value := fmt.Sprintf(`{"user":%q,"event":"click","seq":%d,"ts":%d}`, user, seq, time.Now().UnixMilli())
			_, _, err := topic.Append(context.Background(), log.Record{Key: []byte(user), Value: []byte(value)})
			if !assert.NoError(t, err) {
				return
			}
		}
	}
	// writeWhile writes n records in the background and returns a wait for them.
	writeWhile := func(n int) func() {
		var wg sync.WaitGroup
		wg.Go(func() { write(n) })
		return wg.Wait
	}
	// quietPoint waits until the projection has applied every record, then compares all users.
	quietPoint := func(c *child, round int) {
		want, total := countKeys(t, topic)
		require.EqualValues(t, written.Load(), total)
		require.Eventually(t, func() bool {
			var st stats
			err := service.GetJSON(context.Background(), c.url+"/stats", &st)
			return err == nil && st.Ready && st.Events == total && st.Read == total
		}, 8*time.Second, 10*time.Millisecond, "round %d: projection never applied all %d records", round, total)
		for i := range users {
			user := fmt.Sprintf("user-%d", i)
			var got userCount
			err := service.GetJSON(context.Background(), c.url+"/users/"+user, &got)
			require.NoError(t, err, "round %d: %s", round, user)
			assert.Equal(t, want[user], got.Events, "round %d: %s", round, user)
		}
		code, _, err := get(c.url + "/users/user-unknown")
		require.NoError(t, err)
		assert.Equal(t, http.StatusNotFound, code, "a user with no events is 404")
		// The live page at /ui/ shows the running pipeline caught up: every partition's
		// position at its high watermark, the positions adding up to the log's records.
		require.Eventually(t, func() bool {
			var snap web.PipelineSnapshot
			if service.GetJSON(context.Background(), c.url+"/ui/snapshot.json", &snap) != nil ||
				!snap.Running || len(snap.Stages) == 0 || len(snap.Partitions) != 3 {
				return false
			}
			var sum int64
			for _, ps := range snap.Partitions {
				if !ps.HasHighWatermark || ps.Lag != 0 || ps.Stalled {
					return false
				}
				sum += ps.Position
			}
			return sum == total
		}, 8*time.Second, 50*time.Millisecond, "round %d: /ui/snapshot.json never showed the pipeline caught up", round)
	}

	write(2000) // some history for the first replay
	for round := range 3 {
		c := startProjection(t, dir)
		// Records appended while the projection starts race its replay and hand-over.
		writeWhile(2000)()
		quietPoint(c, round)
		if round == 2 {
			break
		}
		// Kill it in the middle of a stream of writes, once it has applied some of them.
		before := written.Load()
		wait := writeWhile(1000)
		require.Eventually(t, func() bool {
			var st stats
			err := service.GetJSON(context.Background(), c.url+"/stats", &st)
			// This process applied every record up to before (the quiet point), then these.
			return err == nil && st.Read > before+100
		}, 5*time.Second, time.Millisecond)
		c.kill(t)
		t.Logf("round %d: killed with %d of 1000 records written", round, written.Load()-before)
		wait()
	}
	assert.EqualValues(t, 10000, written.Load())
}

// TestMissingDirIsAStartupError ensures the projection binary given a --dir that does not
// exist (a typo) exits 1 at once with a message naming the path and the publisher, instead of
// waiting forever for a topic in a log nobody writes, and creates nothing.
func TestMissingDirIsAStartupError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mistyped")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--dir", dir, "--addr", "127.0.0.1:0").CombinedOutput()
	require.NoError(t, ctx.Err(), "the projection was still running 30s after starting on a missing --dir: %s", out)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "output: %s", out)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "projection: --dir: log: no log directory: "+dir)
	assert.Contains(t, string(out), "start the publisher first")
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing created")
}

// latestOf replays every partition of topic and returns each key's count and latest value, the
// truth the table must equal, and the number of records.
func latestOf(t *testing.T, topic *log.Topic) (map[string]userCount, int64) {
	t.Helper()
	rows := make(map[string]userCount)
	var total int64
	for i := range topic.Partitions() {
		part, err := topic.Partition(int32(i))
		require.NoError(t, err)
		r := part.Replay(part.StartOffset())
		for {
			recs, err := r.Next(context.Background(), 1<<20)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			for _, rec := range recs {
				u := rows[string(rec.Key)]
				rows[string(rec.Key)] = userCount{User: string(rec.Key), Events: u.Events + 1, Last: string(rec.Value)}
				total++
			}
		}
	}
	return rows, total
}

// TestTableOf100kUsersIsRestoredAfterSIGKILLAndReadsOnlyWhatFollowsTheCheckpoint builds the
// table of 100,000 users (120,000 records: every user once, then 20,000 updates) with --state,
// SIGKILLs the projection while 5,000 more records are written, and restarts it: once ready,
// every user's count and latest value equal a replay of the topic, and the restart read exactly
// the records past the positions the killed process had saved (restored from the snapshot, not
// by reading the topic again).
func TestTableOf100kUsersIsRestoredAfterSIGKILLAndReadsOnlyWhatFollowsTheCheckpoint(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	lg, err := log.Open(dir)
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	const users = 100_000
	rng := rand.New(rand.NewPCG(3, 4))
	var seq atomic.Int64
	write := func(n int, user func(i int) int) {
		recs := make([]log.Record, 0, 1000)
		flush := func() {
			err := topic.AppendBatch(context.Background(), recs)
			require.NoError(t, err)
			recs = recs[:0]
		}
		for i := range n {
			u := fmt.Sprintf("user-%d", user(i))
			recs = append(recs, log.Record{Key: []byte(u), Value: fmt.Appendf(nil, `{"user":%q,"seq":%d}`, u, seq.Add(1))})
			if len(recs) == cap(recs) {
				flush()
			}
		}
		if len(recs) > 0 {
			flush()
		}
	}
	write(users, func(i int) int { return i })
	write(20_000, func(int) int { return rng.IntN(users) })

	caughtUp := func(c *child, total int64) stats {
		var st stats
		require.Eventually(t, func() bool {
			st = stats{}
			err := service.GetJSON(context.Background(), c.url+"/stats", &st)
			return err == nil && st.Ready && st.Events == total
		}, time.Minute, 10*time.Millisecond, "the projection never caught up with %d records", total)
		return st
	}

	c := startProjection(t, dir, "--state", state)
	_, total := latestOf(t, topic)
	caughtUp(c, total)
	require.Eventually(t, func() bool { // a checkpoint saved the table
		var st stats
		if err := service.GetJSON(context.Background(), c.url+"/stats", &st); err != nil {
			return false
		}
		var sum int64
		for _, p := range st.Partitions {
			if p.Checkpointed != nil {
				sum += *p.Checkpointed
			}
		}
		return sum == total
	}, time.Minute, 10*time.Millisecond)
	// Kill it while it reads 5,000 more, once it has read some of them.
	var wg sync.WaitGroup
	wg.Go(func() { write(5000, func(int) int { return rng.IntN(users) }) })
	require.Eventually(t, func() bool {
		var st stats
		err := service.GetJSON(context.Background(), c.url+"/stats", &st)
		return err == nil && st.Read > total+500
	}, time.Minute, time.Millisecond)
	c.kill(t)
	wg.Wait()

	store, err := checkpoint.NewFileStore(state)
	require.NoError(t, err)
	var saved int64
	for p := range int32(3) {
		pos, found, err := store.Load(context.Background(), "events", p)
		require.NoError(t, err)
		require.True(t, found, "partition %d has a saved position", p)
		saved += pos.Offset
	}
	require.Greater(t, saved, int64(users), "the killed process had checkpointed the first table")

	want, total := latestOf(t, topic)
	require.Len(t, want, users)
	c = startProjection(t, dir, "--state", state)
	st := caughtUp(c, total)
	assert.Equal(t, total-saved, st.Read, "the restart reads only the records after the saved positions")
	assert.Equal(t, users, st.Users)
	var got map[string]userCount
	require.NoError(t, service.GetJSON(context.Background(), c.url+"/users", &got))
	require.Len(t, got, users)
	for u, w := range want {
		if !assert.Equal(t, w, got[u], u) {
			break
		}
	}
}
