package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/service"
)

func ptr(v int64) *int64 { return &v }

// serve answers /stats with v.
func serve(t *testing.T, v any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats" {
			http.NotFound(w, r)
			return
		}
		service.WriteJSON(w, http.StatusOK, v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSplitVerdictNamesReplayAndSkip ensures split tells a consumer behind (replay owed)
// from one ahead (skip), and treats a null position as 0.
func TestSplitVerdictNamesReplayAndSkip(t *testing.T) {
	ok, why := splitVerdict(10, ptr(10))
	assert.True(t, ok, why)
	ok, why = splitVerdict(10, ptr(7))
	assert.False(t, ok)
	assert.Contains(t, why, "replay still owed (3 records")
	ok, why = splitVerdict(10, ptr(12))
	assert.False(t, ok)
	assert.Contains(t, why, "skip")
	ok, _ = splitVerdict(0, nil)
	assert.True(t, ok, "an empty partition with nothing saved is caught up")
	ok, _ = splitVerdict(5, nil)
	assert.False(t, ok)
}

// TestResumedVerdictRejectsStartOverSkipAndLostCheckpoint ensures each rule of
// "check resumed" fails on its own.
func TestResumedVerdictRejectsStartOverSkipAndLostCheckpoint(t *testing.T) {
	cases := []struct {
		name    string
		resumed *int64
		before  int64
		low     int64
		ok      bool
		want    string
	}{
		{"within bounds", ptr(90), 100, 80, true, "ok: resumed from 90"},
		{"no low bound", ptr(90), 100, -1, true, "ok"},
		{"equal to before", ptr(100), 100, 100, true, "ok"},
		{"null", nil, 100, -1, false, "null"},
		{"log start", ptr(0), 100, -1, false, "started over"},
		{"past the kill", ptr(101), 100, -1, false, "skip"},
		{"below a saved position", ptr(70), 100, 80, false, "checkpoint was lost"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := resumedVerdict(c.resumed, c.before, c.low)
			assert.Equal(t, c.ok, ok, why)
			assert.Contains(t, why, c.want)
		})
	}
}

func TestStatsURLAcceptsHostPortAndFullURL(t *testing.T) {
	assert.Equal(t, "http://127.0.0.1:7070/stats", statsURL("127.0.0.1:7070"))
	assert.Equal(t, "http://127.0.0.1:7070/stats", statsURL("http://127.0.0.1:7070/"))
	assert.Equal(t, "http://127.0.0.1:7070/stats", statsURL("http://127.0.0.1:7070/stats"))
}

// TestSplitPassesWhenPositionsEqualWritten ensures a settled, complete run exits 0 and
// prints a line per partition.
func TestSplitPassesWhenPositionsEqualWritten(t *testing.T) {
	pub := serve(t, service.PublisherStats{Sent: 30, PerPartition: []int64{10, 12, 8}, Stopped: true})
	var cons []string
	for p, n := range []int64{10, 12, 8} {
		cons = append(cons, serve(t, service.ConsumerStats{Name: "c" + strconv.Itoa(p), Partition: int32(p), Position: ptr(n), Lag: ptr(0)}))
	}
	var out, errOut bytes.Buffer
	code := run([]string{"split", "--publisher", pub, "--consumers", strings.Join(cons, ","), "--wait", "5s"}, &out, &errOut)
	assert.Equal(t, exitPass, code, out.String()+errOut.String())
	assert.Contains(t, out.String(), "check split: ok")
	assert.Equal(t, 3, strings.Count(out.String(), " ok\n"), out.String())
}

// TestSplitFailsOnSkipAndMissingPartition ensures a position past what was written, and a
// partition nobody reads, exit 1.
func TestSplitFailsOnSkipAndMissingPartition(t *testing.T) {
	pub := serve(t, service.PublisherStats{Sent: 22, PerPartition: []int64{10, 12, 0}, Stopped: true})
	c0 := serve(t, service.ConsumerStats{Name: "c0", Partition: 0, Position: ptr(11), Lag: ptr(0)})
	c1 := serve(t, service.ConsumerStats{Name: "c1", Partition: 1, Position: ptr(12), Lag: ptr(0)})
	var out, errOut bytes.Buffer
	code := run([]string{"split", "--publisher", pub, "--consumers", c0 + "," + c1, "--wait", "5s"}, &out, &errOut)
	assert.Equal(t, exitFail, code, out.String()+errOut.String())
	assert.Contains(t, out.String(), "skip")
	assert.Contains(t, out.String(), "no consumer reads this partition")
}

// TestSplitComparesAnywayAfterWait ensures a consumer that never catches up fails with
// "replay still owed" once --wait runs out, instead of hanging.
func TestSplitComparesAnywayAfterWait(t *testing.T) {
	pub := serve(t, service.PublisherStats{Sent: 10, PerPartition: []int64{10}, Stopped: true})
	c0 := serve(t, service.ConsumerStats{Name: "c0", Partition: 0, Position: ptr(4), Lag: ptr(6)})
	var out, errOut bytes.Buffer
	code := run([]string{"split", "--publisher", pub, "--consumers", c0, "--wait", "300ms"}, &out, &errOut)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, out.String(), "not settled")
	assert.Contains(t, out.String(), "replay still owed (6 records")
}

// TestResumedTakesBeforeBeforeOrAfterFlags ensures BEFORE may come before or after the flags.
func TestResumedTakesBeforeBeforeOrAfterFlags(t *testing.T) {
	c := serve(t, service.ConsumerStats{Name: "c1", Partition: 1, ResumedFrom: ptr(50)})
	var out bytes.Buffer
	assert.Equal(t, exitPass, run([]string{"resumed", "60", "--consumer", c, "--at-least", "40"}, &out, &out), out.String())
	assert.Equal(t, exitPass, run([]string{"resumed", "--consumer", c, "60"}, &out, &out), out.String())
	assert.Equal(t, exitFail, run([]string{"resumed", "49", "--consumer", c}, &out, &out), out.String())
	assert.Equal(t, exitUsage, run([]string{"resumed", "--consumer", c}, &out, &out))
	assert.Equal(t, exitUsage, run([]string{"resumed", "x", "--consumer", c}, &out, &out))
}

// TestUnreachableServiceExits2 ensures an HTTP failure is exit status 2, not a failed check.
func TestUnreachableServiceExits2(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	var out bytes.Buffer
	assert.Equal(t, exitUsage, run([]string{"resumed", "5", "--consumer", url, "--wait", "200ms"}, &out, &out))
	assert.Equal(t, exitUsage, run([]string{"bogus"}, &out, &out))
}

// TestGetPrintsOneValue ensures "check get" prints numbers as integers, strings bare and
// null as null.
func TestGetPrintsOneValue(t *testing.T) {
	pub := serve(t, service.PublisherStats{Topic: "events", NextOffset: []int64{1 << 60, 2}, PerPartition: []int64{1, 2}})
	c := serve(t, service.ConsumerStats{Name: "c0"})
	for _, tc := range []struct{ url, path, want string }{
		{pub, "nextOffset.0", "1152921504606846976\n"},
		{pub, "topic", "events\n"},
		{c, "position", "null\n"},
	} {
		var out bytes.Buffer
		require.Equal(t, exitPass, run([]string{"get", tc.url, tc.path}, &out, &out), out.String())
		assert.Equal(t, tc.want, out.String())
	}
	var out bytes.Buffer
	assert.Equal(t, exitUsage, run([]string{"get", pub, "nextOffset.9"}, &out, &out))
}

// TestTablePrintsARowPerConsumer ensures the demo's table has the columns it promises.
func TestTablePrintsARowPerConsumer(t *testing.T) {
	pub := serve(t, service.PublisherStats{PerPartition: []int64{7, 9}})
	c0 := serve(t, service.ConsumerStats{Name: "c0", Partition: 0, Position: ptr(7), Handled: 7, Lag: ptr(0)})
	c1 := serve(t, service.ConsumerStats{Name: "c1", Partition: 1, Position: ptr(9), Handled: 11, ResumedFrom: ptr(5), Lag: ptr(0)})
	var out bytes.Buffer
	require.Equal(t, exitPass, run([]string{"table", "--publisher", pub, "--consumers", c0 + "," + c1}, &out, &out), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"partition", "written", "position", "handled", "resumedFrom", "lag", "consumer"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"1", "9", "9", "11", "5", "0", "c1"}, strings.Fields(lines[2]))
}

// TestSplitCountsRecordsOfEarlierPublisherRuns ensures a publisher restarted
// mid-run (its perPartition counts only its own records) is judged by the
// partitions' high watermarks, so complete consumers pass.
func TestSplitCountsRecordsOfEarlierPublisherRuns(t *testing.T) {
	pub := serve(t, service.PublisherStats{Sent: 5, PerPartition: []int64{2, 3}, NextOffset: []int64{40, 50}, Stopped: true})
	c0 := serve(t, service.ConsumerStats{Name: "c0", Partition: 0, Position: ptr(40), Lag: ptr(0)})
	c1 := serve(t, service.ConsumerStats{Name: "c1", Partition: 1, Position: ptr(50), Lag: ptr(0)})
	var out, errOut bytes.Buffer
	code := run([]string{"split", "--publisher", pub, "--consumers", c0 + "," + c1, "--wait", "5s"}, &out, &errOut)
	assert.Equal(t, exitPass, code, out.String()+errOut.String())
}
