package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// BenchmarkCLI measures strom produce from a file and strom consume of a
// partition to /dev/null, each run as the built binary, beside the old
// tool's way of doing the same work in the same run: one Topic.Append and
// one unbuffered offset line per record for produce, one JSON line written
// to stdout with one write syscall per record for consume (the old
// `strom append` and `strom read` loops, run in-process, so they pay no
// argument-list limit and no process start). The input is the five Loghub
// samples repeated to STROM_BENCH_MB megabytes (200 by default), built in a
// temporary folder and never committed. Each figure is records/s; the
// x-old metric is the ratio to the old way measured just before. Run it
// with
//
//	go test -run '^$' -bench CLI -benchtime 1x ./cmd/strom/
//
// It prints the table at the end; the issue asks for 10x on both.
func BenchmarkCLI(b *testing.B) {
	mb := 200
	if s := os.Getenv("STROM_BENCH_MB"); s != "" {
		var err error
		mb, err = strconv.Atoi(s)
		require.NoError(b, err, "STROM_BENCH_MB")
	}
	work := b.TempDir()
	input, records := buildInput(b, filepath.Join(work, "input.log"), mb<<20)
	rates := map[string]float64{}
	measure := func(name string, setup func() string, fn func(dir string)) {
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := setup()
				// Write back what the run before left dirty, so no run
				// pays for another's page cache.
				syscall.Sync()
				b.StartTimer()
				start := time.Now()
				fn(dir)
				total += time.Since(start)
			}
			rate := float64(records) * float64(b.N) / total.Seconds()
			rates[name] = rate
			b.ReportMetric(rate, "records/s")
			if old, ok := rates[oldOf(name)]; ok && name != oldOf(name) {
				b.ReportMetric(rate/old, "x-old")
			}
		})
	}
	freshLog := func() string {
		dir, err := os.MkdirTemp(work, "log-")
		require.NoError(b, err)
		out, err := stromCmd(nil, "--dir", dir, "topics", "create", "bench").CombinedOutput()
		require.NoError(b, err, "%s", out)
		return dir
	}
	var consumeDir string
	measure("produce/old", freshLog, func(dir string) { oldAppend(b, dir, input) })
	measure("produce/strom", freshLog, func(dir string) {
		consumeDir = dir
		f, err := os.Open(input)
		require.NoError(b, err)
		defer f.Close()
		out, err := stromCmd(f, "--dir", dir, "produce", "bench").CombinedOutput()
		require.NoError(b, err, "%s", out)
	})
	logDir := func() string { return consumeDir }
	measure("consume/old", logDir, func(dir string) { oldRead(b, dir) })
	consume := func(args ...string) func(dir string) {
		return func(dir string) {
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			require.NoError(b, err)
			defer null.Close()
			cmd := stromCmd(nil, append([]string{"--dir", dir, "consume", "bench", "--partition", "0"}, args...)...)
			cmd.Stdout = null
			var errb bytes.Buffer
			cmd.Stderr = &errb
			require.NoError(b, cmd.Run(), "%s", errb.Bytes())
		}
	}
	measure("consume/strom", logDir, consume())
	measure("consume/strom-json", logDir, consume("--format", "json"))

	fmt.Printf("\nstrom CLI on %d MB of Loghub lines (%d records), records/s:\n", mb, records)
	fmt.Printf("%-22s %14s %14s %8s\n", "", "old way", "strom", "ratio")
	for _, row := range [][2]string{{"produce from a file", "produce/strom"}, {"consume to /dev/null", "consume/strom"}, {"consume --format json", "consume/strom-json"}} {
		old, now := rates[oldOf(row[1])], rates[row[1]]
		if old > 0 && now > 0 {
			fmt.Printf("%-22s %14.0f %14.0f %7.1fx\n", row[0], old, now, now/old)
		}
	}
}

// oldOf names the old-way benchmark a strom one is compared with.
func oldOf(name string) string {
	dir, _ := filepath.Split(name)
	return dir + "old"
}

// stromCmd is the built binary with args, stdin and a clean environment.
func stromCmd(stdin io.Reader, args ...string) *exec.Cmd {
	cmd := exec.Command(stromBin, args...)
	cmd.Env = testutil.CleanEnv()
	cmd.Stdin = stdin
	return cmd
}

// buildInput writes the Loghub samples, each ending in '\n', repeated until
// the file holds at least size bytes, and returns its path and line count.
func buildInput(b *testing.B, path string, size int) (string, int64) {
	src := loghub.Dir(b)
	var one []byte
	for _, name := range loghub.Files {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(b, err)
		one = append(one, data...)
		if len(one) > 0 && one[len(one)-1] != '\n' {
			one = append(one, '\n')
		}
	}
	f, err := os.Create(path)
	require.NoError(b, err)
	w := bufio.NewWriterSize(f, 1<<20)
	var lines int64
	for written := 0; written < size; written += len(one) {
		_, err := w.Write(one)
		require.NoError(b, err)
		lines += int64(bytes.Count(one, []byte{'\n'}))
	}
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	return path, lines
}

// oldAppend is the old `strom append` loop: one Topic.Append per record,
// each offset printed with one unbuffered write, a sync at the end.
func oldAppend(b *testing.B, dir, input string) {
	data, err := os.ReadFile(input)
	require.NoError(b, err)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(b, err)
	defer null.Close()
	lg, err := log.Open(dir)
	require.NoError(b, err)
	defer lg.Close()
	t, err := lg.Topic("bench")
	require.NoError(b, err)
	ctx := context.Background()
	for line := range bytes.Lines(data) {
		v := bytes.TrimSuffix(line, []byte{'\n'})
		p, off, err := t.Append(ctx, log.Record{Value: v})
		require.NoError(b, err)
		fmt.Fprintf(null, "%s/%d@%d\n", "bench", p, off)
	}
	require.NoError(b, t.Sync())
}

// oldRecord is the old `strom read` output line.
type oldRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
}

// oldRead is the old `strom read` loop: a replay of partition 0, each record
// encoded as JSON straight to an unbuffered stdout (one write per record).
func oldRead(b *testing.B, dir string) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(b, err)
	defer null.Close()
	lg, err := log.Open(dir, log.ReadOnly())
	require.NoError(b, err)
	defer lg.Close()
	t, err := lg.Topic("bench")
	require.NoError(b, err)
	p, err := t.Partition(0)
	require.NoError(b, err)
	r := p.Replay(p.StartOffset())
	enc := json.NewEncoder(null)
	for {
		recs, err := r.Next(context.Background(), 1<<20)
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(b, err)
		for _, rec := range recs {
			jr := oldRecord{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Value: string(rec.Value)}
			if rec.Key != nil {
				k := string(rec.Key)
				jr.Key = &k
			}
			require.NoError(b, enc.Encode(jr))
		}
	}
}
