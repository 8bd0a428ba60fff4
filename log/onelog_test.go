package log_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestOneLogReadsATopicAnotherProcessWritesAndWritesItsOwn ensures one
// read-write Log of a process reads topic A, which a child process holds and
// appends to, and writes topic B: (a) it follows A's appends and writes B;
// (b) a write to A fails with a *LockedError naming the child's pid and
// changes nothing, and reading A goes on; (c) once the child is gone
// (leaving a torn frame behind, as a crash would), the first write to A
// takes the lock, cuts the torn tail and appends at the next offset, and the
// follower that was waiting gets it.
func TestOneLogReadsATopicAnotherProcessWritesAndWritesItsOwn(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		child := exec.Command(os.Args[0], "-test.run=^TestOneLogHelperProcess$")
		child.Env = append(os.Environ(), "STROM_ONELOG_HELPER="+dir+"|"+mode.String())
		stdin, err := child.StdinPipe()
		require.NoError(t, err)
		stdout, err := child.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, child.Start())
		t.Cleanup(func() { child.Process.Kill(); child.Wait() })
		lines := bufio.NewScanner(stdout)
		expect := func(want string) {
			t.Helper()
			require.True(t, lines.Scan(), "child ended: %v", lines.Err())
			require.Equal(t, want, lines.Text())
		}
		expect("ready") // the child holds A and appended 5 records

		lg := openLog(t, dir, log.WithMode(mode))
		ta, err := lg.Topic("A")
		require.NoError(t, err, "reading A takes no lock")
		pa, err := ta.Partition(0)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r := pa.Follow(0)
		var got []string
		readTo := func(n int) {
			t.Helper()
			for len(got) < n {
				recs, err := r.Next(ctx, 1<<20)
				require.NoError(t, err)
				for _, rec := range recs {
					require.EqualValues(t, len(got), rec.Offset)
					got = append(got, string(rec.Value))
				}
			}
		}
		readTo(5)

		// (a) write B in the same Log, follow A's new records.
		tb, err := lg.CreateTopic("B", 1)
		require.NoError(t, err)
		require.NoError(t, tb.AppendBatch(ctx, []log.Record{{Value: []byte("b0")}, {Value: []byte("b1")}}))
		fmt.Fprintln(stdin, "append 3")
		expect("ok")
		readTo(8)

		// (b) a write to A is refused, naming the child; reading goes on.
		_, _, err = ta.Append(ctx, log.Record{Value: []byte("mine")})
		require.ErrorIs(t, err, log.ErrLocked)
		var le *log.LockedError
		require.ErrorAs(t, err, &le)
		require.Equal(t, child.Process.Pid, le.PID)
		_, err = pa.Append(ctx, log.Record{Value: []byte("mine")})
		require.ErrorIs(t, err, log.ErrLocked)
		require.ErrorIs(t, pa.Truncate(0), log.ErrLocked)
		fmt.Fprintln(stdin, "append 2")
		expect("ok")
		readTo(10)
		require.EqualValues(t, 10, pa.HighWatermark())

		// (c) the child dies leaving a torn frame; the first write takes
		// over, recovers and appends at offset 10.
		fmt.Fprintln(stdin, "crash")
		require.Error(t, child.Wait()) // exit status 3, without closing
		waited := make(chan error, 1)
		go func() {
			recs, err := r.Next(ctx, 1<<20)
			if err == nil && (len(recs) != 1 || recs[0].Offset != 10 || string(recs[0].Value) != "mine") {
				err = fmt.Errorf("follower got %v", recs)
			}
			waited <- err
		}()
		part, off, err := ta.Append(ctx, log.Record{Value: []byte("mine")})
		require.NoError(t, err)
		require.EqualValues(t, 0, part)
		require.EqualValues(t, 10, off)
		require.NoError(t, <-waited)
		require.NotEmpty(t, pa.Recovery().Reason, "the torn tail was cut")
		all := readAll(t, pa)
		require.Len(t, all, 11)
		require.Greater(t, all[10].Epoch, all[9].Epoch, "a new epoch began at the takeover")
		require.Equal(t, "b1", string(readAll(t, mustPartition(t, tb, 0))[1].Value))

		// The lock is ours now: another Log cannot write A.
		lg2 := openLog(t, dir)
		_, err = lg2.WriteTopic("A")
		require.ErrorIs(t, err, log.ErrLocked)
	})
}

func mustPartition(t *testing.T, tp *log.Topic, id int32) *log.Partition {
	t.Helper()
	p, err := tp.Partition(id)
	require.NoError(t, err)
	return p
}

// TestOneLogHelperProcess is not a test: it is the child process of
// TestOneLogReadsATopicAnotherProcessWritesAndWritesItsOwn. It creates and
// holds topic A, appends 5 records, says "ready", then obeys its stdin:
// "append N" appends N more and says "ok"; "crash" writes half a frame
// after the last record and exits without closing the log.
func TestOneLogHelperProcess(t *testing.T) {
	env := os.Getenv("STROM_ONELOG_HELPER")
	if env == "" {
		return
	}
	fail := func(err error) { fmt.Println(err); os.Exit(1) }
	dir, modeName, _ := strings.Cut(env, "|")
	mode, err := log.ParseMode(modeName)
	if err != nil {
		fail(err)
	}
	lg, err := log.Open(dir, log.WithMode(mode))
	if err != nil {
		fail(err)
	}
	tp, err := lg.CreateTopic("A", 1)
	if err != nil {
		fail(err)
	}
	p, _ := tp.Partition(0)
	n := 0
	add := func(k int) {
		for range k {
			if _, err := p.Append(context.Background(), log.Record{Value: val(n)}); err != nil { // 56-byte frames
				fail(err)
			}
			n++
		}
	}
	add(5)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var k int
		switch line := in.Text(); {
		case line == "crash":
			f, err := os.OpenFile(segPath(dir, "A", 0, 0), os.O_RDWR, 0)
			if err != nil {
				fail(err)
			}
			torn := make([]byte, 20)
			torn[0] = 100 // a length prefix whose body never came
			if _, err := f.WriteAt(torn, int64(n*56)); err != nil {
				fail(err)
			}
			os.Exit(3)
		case func() bool { _, err := fmt.Sscanf(line, "append %d", &k); return err == nil }():
			add(k)
			fmt.Println("ok")
		default:
			fail(errors.New("unknown command " + line))
		}
	}
	lg.Close()
	os.Exit(0)
}
