package log_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// noPoll is a poll interval long enough that a follower woken only by its
// poll would fail the test: every wake-up must come from an append.
const noPoll = time.Hour

// TestFollowNeverLosesAWakeUp ensures a follower blocked at the high
// watermark is woken by an append racing its last look, 1,000 times in a
// row (50,000 under STROM_SOAK=1, as make soak runs it; 200 with -short),
// in each write mode: in the writer's own Log (the notify channel), and in
// a second, read-only Log of the same directory (inotify and, in ModeMmap,
// the waiters flag), with polling off. Each iteration has its own
// timeout, so a lost wake-up fails instead of hanging. Segments are small,
// so the race also crosses rolls.
func TestFollowNeverLosesAWakeUp(t *testing.T) {
	iterations := strength(200, 1000, 50000)
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		for _, readOnly := range []bool{false, true} {
			t.Run(map[bool]string{false: "same-log", true: "read-only-log"}[readOnly], func(t *testing.T) {
				dir := t.TempDir()
				lg := openLog(t, dir, log.WithMode(mode), log.WithSegmentBytes(64<<10))
				w := openPartition(t, lg, "events", 1)
				rp := w
				if readOnly {
					ro := openLog(t, dir, log.ReadOnly(), log.WithPollInterval(noPoll))
					tp, err := ro.Topic("events")
					require.NoError(t, err)
					rp, err = tp.Partition(0)
					require.NoError(t, err)
				}
				appendNow := make(chan int)
				appended := make(chan error, 1)
				go func() {
					for i := range appendNow {
						_, err := w.Append(context.Background(), log.Record{Value: val(i)})
						appended <- err
					}
				}()
				defer close(appendNow)
				r := rp.Follow(0)
				for i := range iterations {
					appendNow <- i // the append races the Next below
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					recs, err := r.Next(ctx, 1<<20)
					cancel()
					require.NoError(t, err, "iteration %d: the follower was not woken", i)
					require.Len(t, recs, 1)
					require.EqualValues(t, i, recs[0].Offset)
					require.NoError(t, <-appended)
				}
			})
		}
	})
}

// TestFollowAcrossProcessesNeedsNoPolling ensures a follower in a log
// opened read-only, with polling off, gets every record a child process
// appends in either write mode, woken by the appends themselves, with a
// median delay under 10 ms.
func TestFollowAcrossProcessesNeedsNoPolling(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		lat := followChild(t, mode, 200, 2*time.Millisecond, log.WithPollInterval(noPoll))
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		t.Logf("%s: cross-process follow latency p50 %v p99 %v max %v", mode, p50, p99, lat[len(lat)-1])
		assert.Less(t, p50, 10*time.Millisecond)
	})
}

// followChild creates topic events in a new directory, starts a child
// process appending n records in the given mode, one every gap, each
// carrying its append time, follows them from a read-only log opened with
// opts, and returns the delays from append to Next, sorted.
func followChild(t testing.TB, mode log.Mode, n int, gap time.Duration, opts ...log.Option) []time.Duration {
	t.Helper()
	dir := t.TempDir()
	lg, err := log.Open(dir, log.WithMode(mode))
	require.NoError(t, err)
	_, err = lg.CreateTopic("events", 1)
	require.NoError(t, err)
	require.NoError(t, lg.Close())

	ro, err := log.Open(dir, append(opts, log.ReadOnly())...)
	require.NoError(t, err)
	defer ro.Close()
	tp, err := ro.Topic("events")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	r := p.Follow(0)

	child := exec.Command(os.Args[0], "-test.run=^TestFollowHelperProcess$")
	child.Env = append(os.Environ(), "STROM_FOLLOW_HELPER="+strings.Join([]string{dir, mode.String(), strconv.Itoa(n), gap.String()}, "|"))
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	defer child.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lat := make([]time.Duration, 0, n)
	for len(lat) < n {
		recs, err := r.Next(ctx, 1<<20)
		require.NoError(t, err, "after %d records", len(lat))
		now := time.Now()
		for _, rec := range recs {
			require.EqualValues(t, len(lat), rec.Offset)
			ns, err := strconv.ParseInt(string(rec.Value), 10, 64)
			require.NoError(t, err)
			lat = append(lat, now.Sub(time.Unix(0, ns)))
		}
	}
	require.NoError(t, child.Wait())
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}

// TestFollowHelperProcess is not a test: it is the child process of
// followChild, appending to topic events partition 0 of a directory.
func TestFollowHelperProcess(t *testing.T) {
	args := strings.Split(os.Getenv("STROM_FOLLOW_HELPER"), "|")
	if len(args) != 4 {
		return
	}
	err := func() error {
		mode, err := log.ParseMode(args[1])
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		gap, err := time.ParseDuration(args[3])
		if err != nil {
			return err
		}
		lg, err := log.Open(args[0], log.WithMode(mode))
		if err != nil {
			return err
		}
		defer lg.Close()
		tp, err := lg.Topic("events")
		if err != nil {
			return err
		}
		p, _ := tp.Partition(0)
		for range n {
			time.Sleep(gap)
			if _, err := p.Append(context.Background(), log.Record{Value: strconv.AppendInt(nil, time.Now().UnixNano(), 10)}); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestFollowSurvivesWriterRestarts ensures a follower in a read-only log,
// polling off, keeps being woken across writers that come and go: one that
// starts after the follower went to sleep, one that finds the waiters file
// deleted and makes a new one (the follower must map the new file), and
// one that finds it in place.
func TestFollowSurvivesWriterRestarts(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		dir := t.TempDir()
		lg := openLog(t, dir, log.WithMode(mode))
		openPartition(t, lg, "events", 1)
		require.NoError(t, lg.Close())
		ro := openLog(t, dir, log.ReadOnly(), log.WithPollInterval(noPoll))
		tp, err := ro.Topic("events")
		require.NoError(t, err)
		rp, err := tp.Partition(0)
		require.NoError(t, err)
		r := rp.Follow(0)
		for round := range 3 {
			got := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				recs, err := r.Next(ctx, 1<<20)
				if err == nil && (len(recs) != 1 || recs[0].Offset != int64(round)) {
					err = fmt.Errorf("got %d records from %d", len(recs), recs[0].Offset)
				}
				got <- err
			}()
			time.Sleep(20 * time.Millisecond) // the follower is asleep
			if round == 1 && mode == log.ModeMmap {
				require.NoError(t, os.Remove(dir+"/events/0/follow.waiters"))
			}
			lg := openLog(t, dir, log.WithMode(mode))
			tp, err := lg.Topic("events")
			require.NoError(t, err)
			w, err := tp.Partition(0)
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond) // the follower may have woken for the open
			appendN(t, w, round, 1)
			require.NoError(t, <-got, "round %d", round)
			require.NoError(t, lg.Close())
		}
	})
}
