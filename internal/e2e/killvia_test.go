package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reugn/go-streams/flow"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The Via kill test's child: the test binary run again with viaChildEnv set
// to the test's folder runs viaChild instead of the tests.
const (
	viaChildEnv   = "STROM_E2E_VIA_CHILD"
	viaTopic      = "via-in"
	viaPartitions = 2
	viaRecords    = 20000
)

func init() {
	if dir := os.Getenv(viaChildEnv); dir != "" {
		os.Exit(viaChild(dir))
	}
}

// viaChild runs a checkpointed pipeline with a go-streams flow.Map inside
// it (stream.Via): a replay of every partition from the FileStore, the flow
// upper-casing each value, then a handler that appends "partition offset
// value" to handled.log (one O_APPEND write per record) before the record
// can finish, checkpointing every 20ms. The partition and offset written are
// those of the record the flow emitted, not the lineage Via paired it with,
// so the file says what really came out of the flow.
func viaChild(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "via child:", err)
		return 2
	}
	files, err := openChildFiles(dir)
	if err != nil {
		return fail(err)
	}
	defer files.close()
	lg, store, out := files.lg, files.store, files.out
	upper := flow.NewMap(func(r log.Record) log.Record {
		return log.Record{Partition: r.Partition, Offset: r.Offset, Value: bytes.ToUpper(r.Value)}
	}, 1)
	recs := stream.From(source.Topic(lg, viaTopic, source.FromStore(store), source.Replay(), source.MaxBytes(4<<10)))
	err = stream.Via[log.Record, log.Record](recs, upper).
		Tap(func(_ context.Context, r log.Record) error {
			_, err := fmt.Fprintf(out, "%d %d %s\n", r.Partition, r.Offset, r.Value)
			return err
		}).
		Checkpointing(store, stream.CheckpointInterval(20*time.Millisecond)).
		Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "via child:", err)
		return 1
	}
	return 0
}

// TestViaFlowMapSurvivesKill9 publishes 20,000 records into a 2-partition
// topic, runs the child pipeline (a go-streams flow.Map inside stream.Via,
// FileStore checkpoints), SIGKILLs it three times mid-stream (once its
// output has grown past a random mark) and
// restarts it, then lets it finish. After every kill no saved position is
// past a record whose output was not handled; at the end every record came
// out of the flow, upper-cased, at least once, and each partition's
// position equals its high watermark.
func TestViaFlowMapSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	want := publishVia(t, filepath.Join(dir, "log"))

	kills, midStream := 0, 0 // midStream: kills after some records and before all
	for round := 0; ; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), viaChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if round < 3 {
			// Kill once handled.log has grown past a random mark, so every
			// kill lands mid-stream however slowly the child starts.
			mark := int64(round+1)*80_000 + rand.Int64N(40_000)
			tick := time.NewTicker(2 * time.Millisecond)
			deadline := time.After(30 * time.Second)
		wait:
			for {
				select {
				case err := <-exited:
					tick.Stop()
					require.FailNow(t, "child ended before its kill", "%v: %s", err, stderr.String())
				case <-deadline:
					tick.Stop()
					_ = cmd.Process.Kill()
					require.FailNow(t, "child did not reach its kill mark in 30s", stderr.String())
				case <-tick.C:
					if fi, err := os.Stat(filepath.Join(dir, "handled.log")); err == nil && fi.Size() >= mark {
						break wait
					}
				}
			}
			tick.Stop()
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-exited
			kills++
			if n := checkViaPositions(t, dir, want); n > 0 && n < viaRecords {
				midStream++
			}
			continue
		}
		select {
		case err := <-exited:
			require.NoError(t, err, "final run: %s", stderr.String())
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatal("final run did not finish in a minute")
		}
		break
	}

	require.Equal(t, 3, midStream, "every kill landed mid-stream")
	handled := readViaHandled(t, dir)
	again := 0
	for p, values := range want {
		for off, value := range values {
			h, ok := handled[killKey{p, int64(off)}]
			require.True(t, ok, "partition %d offset %d never came out of the flow", p, off)
			require.Equal(t, strings.ToUpper(value), h.value, "partition %d offset %d", p, off)
			again += h.times - 1
		}
	}
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	for p, values := range want {
		pos, found, err := store.Load(context.Background(), viaTopic, int32(p))
		require.NoError(t, err)
		require.True(t, found, "partition %d has no position", p)
		require.Equal(t, int64(len(values)), pos.Offset, "partition %d position vs high watermark", p)
	}
	t.Logf("%d kill -9s, %d records, %d handled again after a kill, 0 lost", kills, len(handled), again)
}

// publishVia writes viaRecords records round-robin into viaTopic and returns
// the values per partition, indexed by offset.
func publishVia(t *testing.T, logDir string) [][]string {
	lg, err := log.Open(logDir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic(viaTopic, viaPartitions)
	require.NoError(t, err)
	want := make([][]string, viaPartitions)
	for i := range viaRecords {
		v := fmt.Sprintf("record-%05d", i)
		p, off, err := topic.Append(context.Background(), log.Record{Value: []byte(v)})
		require.NoError(t, err)
		require.Equal(t, int64(len(want[p])), off)
		want[p] = append(want[p], v)
	}
	require.NoError(t, topic.Sync())
	return want
}

type viaHandled struct {
	value string
	times int
}

// readViaHandled parses handled.log; a torn last line (the kill landed
// inside a write) is ignored, since its record cannot have finished.
func readViaHandled(t *testing.T, dir string) map[killKey]*viaHandled {
	data, err := os.ReadFile(filepath.Join(dir, "handled.log"))
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil // killed before it opened the file
	}
	require.NoError(t, err)
	out := make(map[killKey]*viaHandled)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		p, err1 := strconv.Atoi(f[0])
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		k := killKey{p, off}
		if h := out[k]; h != nil {
			h.times++
			continue
		}
		out[k] = &viaHandled{value: f[2], times: 1}
	}
	return out
}

// checkViaPositions checks the at-least-once rule after a kill: every
// record below a partition's saved position came out of the flow and was
// handled. It returns how many records were handled so far.
func checkViaPositions(t *testing.T, dir string, want [][]string) int {
	t.Helper()
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	handled := readViaHandled(t, dir)
	for p := range want {
		pos, found, err := store.Load(context.Background(), viaTopic, int32(p))
		require.NoError(t, err, "a position file must never be unreadable after kill -9")
		if !found {
			continue
		}
		for off := int64(0); off < pos.Offset; off++ {
			_, ok := handled[killKey{p, off}]
			require.True(t, ok, "partition %d: saved position %d is past offset %d, whose output was never handled", p, pos.Offset, off)
		}
	}
	return len(handled)
}
