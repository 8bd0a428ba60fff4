package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The kill test's child: the test binary run again with killChildEnv set to
// the test's folder runs killChild instead of the tests (see TestMain's
// caller, runKillChild).
const (
	killChildEnv = "STROM_E2E_KILL_CHILD"
	killTopic    = "loghub"
)

func init() {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir))
	}
}

// childFiles is what a kill-test child works on in its folder: the log
// under log/ (read-only), the FileStore under state/ and handled.log, where
// it appends what it handled (O_APPEND, so every write survives a SIGKILL
// whole).
type childFiles struct {
	lg    *log.Log
	store *checkpoint.FileStore
	out   *os.File
}

// openChildFiles opens the childFiles of dir.
func openChildFiles(dir string) (*childFiles, error) {
	lg, err := log.Open(filepath.Join(dir, "log"), log.ReadOnly())
	if err != nil {
		return nil, err
	}
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
	if err != nil {
		lg.Close()
		return nil, err
	}
	out, err := os.OpenFile(filepath.Join(dir, "handled.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		lg.Close()
		return nil, err
	}
	return &childFiles{lg: lg, store: store, out: out}, nil
}

func (c *childFiles) close() {
	c.out.Close()
	c.lg.Close()
}

// part is one piece of a record after the flat-map: records at an offset
// divisible by 7 are split in two, so a split record's position waits for
// both parts.
type part struct {
	rec   log.Record
	piece int
}

// killChild runs the whole-topic pipeline the kill test kills: a replay of
// every partition of the topic, from the FileStore, through a filter, a
// flat-map, a parallel handler and a batch, checkpointing every 20ms. The
// handler appends "partition offset piece hex(value)" to handled.log (one
// write per record, O_APPEND) before the record can finish, so the file
// holds every record a saved position may have passed.
func killChild(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	files, err := openChildFiles(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		return 2
	}
	defer files.close()
	lg, store, out := files.lg, files.store, files.out
	var mu sync.Mutex
	recs := stream.From(source.Topic(lg, killTopic, source.FromStore(store), source.Replay(), source.MaxBytes(16<<10))).
		Filter(func(_ context.Context, r log.Record) (bool, error) { return r.Value != nil, nil })
	parts := stream.FlatMap(recs, func(_ context.Context, r log.Record) ([]part, error) {
		if r.Offset%7 == 0 {
			return []part{{r, 0}, {r, 1}}, nil
		}
		return []part{{r, 0}}, nil
	})
	handled := parts.Tap(func(_ context.Context, p part) error {
		line := fmt.Sprintf("%d %d %d %s\n", p.rec.Partition, p.rec.Offset, p.piece, hex.EncodeToString(p.rec.Value))
		mu.Lock()
		defer mu.Unlock()
		_, err := out.WriteString(line)
		time.Sleep(200 * time.Microsecond) // some work, so kills land mid-stream
		return err
	}, stream.Parallel(4))
	err = stream.Batch(handled, 32, 5*time.Millisecond).
		Tap(func(context.Context, []part) error { return nil }).
		Checkpointing(store, stream.CheckpointInterval(20*time.Millisecond)).
		Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		return 1
	}
	return 0
}

// TestWholeTopicPipelineSurvivesKill9 publishes the five Loghub samples into
// one 3-partition topic (keyed as the demo keys them), then runs the child
// pipeline (source.Topic, Filter, FlatMap, Parallel(4), Batch, FileStore),
// SIGKILLs it at random moments and restarts it, and finally lets it finish.
// After every kill, no saved position is past a record whose every part was
// not handled; at the end every line was handled at least once, byte for
// byte, and each partition's position equals its high watermark.
func TestWholeTopicPipelineSurvivesKill9(t *testing.T) {
	samples := loghub.Dir(t)
	dir := t.TempDir()
	want := publishLoghub(t, samples, filepath.Join(dir, "log"))

	kills := 0
rounds:
	for round := 0; ; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if round < 4 {
			select {
			case err := <-exited:
				require.NoError(t, err, "child ended before its kill: %s", stderr.String())
				require.GreaterOrEqual(t, kills, 2, "the child finished before its second kill; the kill test needs more work per record")
				break rounds
			case <-time.After(time.Duration(150+rand.IntN(250)) * time.Millisecond):
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-exited
			kills++
			checkNoPositionPastUnhandled(t, dir, want)
			continue
		}
		select {
		case err := <-exited:
			require.NoError(t, err, "final run: %s", stderr.String())
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatal("final run did not finish in 2 minutes")
		}
		break
	}

	handled := readHandled(t, dir)
	replays := 0
	for p, offs := range want {
		for off, value := range offs {
			got, ok := handled[killKey{p, int64(off)}]
			require.True(t, ok, "partition %d offset %d never handled", p, off)
			require.Equal(t, value, got.value, "partition %d offset %d handled with other bytes", p, off)
			require.GreaterOrEqual(t, got.pieces, 1)
			replays += got.times - 1
		}
	}
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	for p, offs := range want {
		pos, found, err := store.Load(context.Background(), killTopic, int32(p))
		require.NoError(t, err)
		if len(offs) == 0 {
			continue
		}
		require.True(t, found, "partition %d has no position", p)
		require.Equal(t, int64(len(offs)), pos.Offset, "partition %d position vs high watermark", p)
	}
	t.Logf("%d kill -9s, %d records, %d handled again after a kill, 0 lost", kills, len(handled), replays)
}

type killKey struct {
	partition int
	offset    int64
}

type killHandled struct {
	value  []byte
	pieces int // distinct pieces seen
	times  int // times piece 0 was handled
}

// publishLoghub writes every line of the five samples into killTopic (3
// partitions), keyed by the first group of the file's regexp, and returns
// the values per partition, indexed by offset.
func publishLoghub(t *testing.T, samples, logDir string) [][][]byte {
	lg, err := log.Open(logDir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic(killTopic, partitions)
	require.NoError(t, err)
	want := make([][][]byte, partitions)
	for _, f := range loghubFiles {
		data, err := os.ReadFile(filepath.Join(samples, f.file))
		require.NoError(t, err)
		re := regexp.MustCompile(f.key)
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			var k []byte
			if m := re.FindSubmatch(line); m != nil {
				k = bytes.Clone(m[1])
			}
			p, off, err := topic.Append(context.Background(), log.Record{Key: k, Value: line})
			require.NoError(t, err)
			require.Equal(t, int64(len(want[p])), off)
			want[p] = append(want[p], line)
		}
		require.NoError(t, sc.Err())
	}
	require.NoError(t, topic.Sync())
	return want
}

// readHandled parses handled.log; a torn last line (the kill landed inside
// a write) is ignored, since its record cannot have finished.
func readHandled(t *testing.T, dir string) map[killKey]*killHandled {
	data, err := os.ReadFile(filepath.Join(dir, "handled.log"))
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil // killed before it opened the file: nothing handled yet
	}
	require.NoError(t, err)
	out := make(map[killKey]*killHandled)
	seen := make(map[[3]int64]bool)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		p, err1 := strconv.Atoi(f[0])
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		piece, err3 := strconv.Atoi(f[2])
		value, err4 := hex.DecodeString(f[3])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		k := killKey{p, off}
		h := out[k]
		if h == nil {
			h = &killHandled{value: value}
			out[k] = h
		}
		if piece == 0 {
			h.times++
		}
		if s := [3]int64{int64(p), off, int64(piece)}; !seen[s] {
			seen[s] = true
			h.pieces++
		}
	}
	return out
}

// checkNoPositionPastUnhandled checks the at-least-once rule after a kill:
// every record below a partition's saved position was handled, all its
// pieces (two for offsets divisible by 7).
func checkNoPositionPastUnhandled(t *testing.T, dir string, want [][][]byte) {
	t.Helper()
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	handled := readHandled(t, dir)
	for p := range want {
		pos, found, err := store.Load(context.Background(), killTopic, int32(p))
		require.NoError(t, err, "a position file must never be unreadable after kill -9")
		if !found {
			continue
		}
		for off := int64(0); off < pos.Offset; off++ {
			h, ok := handled[killKey{p, off}]
			require.True(t, ok, "partition %d: saved position %d is past offset %d, never handled", p, pos.Offset, off)
			pieces := 1
			if off%7 == 0 {
				pieces = 2
			}
			require.Equal(t, pieces, h.pieces, "partition %d: saved position %d is past offset %d, whose parts were not all handled", p, pos.Offset, off)
		}
	}
}
