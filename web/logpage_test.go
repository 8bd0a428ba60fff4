package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/web"
)

// writeLog creates, in a fresh directory, the topic "events" of 3
// partitions holding 40, 7 and 0 records in segments of 4 KiB (so
// partition 0 has several), and "orders" of 1 partition holding 2, and
// returns the directory and the writing log, still open.
func writeLog(t *testing.T) (string, *log.Log) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	lg, err := log.Open(dir, log.CreateIfMissing(), log.WithSegmentBytes(4096))
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	events, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	orders, err := lg.CreateTopic("orders", 1)
	require.NoError(t, err)
	appendN(t, events, 0, 40)
	appendN(t, events, 1, 7)
	appendN(t, orders, 0, 2)
	return dir, lg
}

// appendN appends n records of 200 bytes to partition p of t.
func appendN(t *testing.T, tp *log.Topic, p int32, n int) {
	t.Helper()
	part, err := tp.Partition(p)
	require.NoError(t, err)
	for range n {
		_, err := part.Append(context.Background(), log.Record{Value: []byte(strings.Repeat("v", 200))})
		require.NoError(t, err)
	}
}

// newPage builds a LogPage on dir with opts, serves it, and closes both
// when the test ends. It returns the page and the server's URL.
func newPage(t *testing.T, dir string, opts ...web.LogPageOption) (*web.LogPage, string) {
	t.Helper()
	page, err := web.NewLogPage(dir, opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(page)
	t.Cleanup(func() {
		require.NoError(t, page.Close()) // first: it ends the event streams Close below waits on
		srv.Close()
	})
	return page, srv.URL
}

// client bounds the requests of get: an answer that does not end (an event
// stream served where a refusal was due) fails the test instead of hanging it.
var client = &http.Client{Timeout: 10 * time.Second}

// get fetches url and returns the answer and its body.
func get(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "%s %s", method, url)
	return resp, string(b)
}

// getSnapshot fetches base/snapshot.json.
func getSnapshot(t *testing.T, base string) web.LogSnapshot {
	t.Helper()
	resp, body := get(t, http.MethodGet, base+"/snapshot.json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var snap web.LogSnapshot
	require.NoError(t, json.Unmarshal([]byte(body), &snap))
	return snap
}

// openEvents opens the event stream at url and returns the snapshots it
// sends (a LogSnapshot or a PipelineSnapshot), in order; the channel
// closes when the stream ends. The stream is closed when the test ends.
func openEvents[S any](t *testing.T, url string) <-chan S {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan S, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "snapshot":
				var snap S
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &snap) == nil {
					select {
					case events <- snap:
					case <-ctx.Done():
						return
					}
				}
			case line == "":
				event = ""
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return events
}

// waitEvent reads events until one satisfies cond, and returns it; it
// fails the test when none did by the deadline or the stream ended.
func waitEvent[S any](t *testing.T, events <-chan S, deadline time.Time, what string, cond func(S) bool) S {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case snap, ok := <-events:
			require.True(t, ok, "the event stream ended before %s", what)
			if cond(snap) {
				return snap
			}
		case <-timer.C:
			t.Fatalf("no event showed %s by the deadline", what)
		}
	}
}

// partitionOf finds topic's partition p in snap.
func partitionOf(snap web.LogSnapshot, topic string, p int32) (web.PartitionFigures, bool) {
	for _, t := range snap.Topics {
		if t.Topic != topic {
			continue
		}
		for _, pf := range t.Partitions {
			if pf.Partition == p {
				return pf, true
			}
		}
	}
	return web.PartitionFigures{}, false
}

// TestLogPageSnapshotAgreesWithTheLog ensures /snapshot.json gives every
// topic and partition with the figures `strom topics describe` reads
// through the log API (log start offset, next offset, segments, the sum of
// their bytes), read here through another read-only log.
func TestLogPageSnapshotAgreesWithTheLog(t *testing.T) {
	dir, _ := writeLog(t)
	_, base := newPage(t, dir)
	snap := getSnapshot(t, base)

	ro, err := log.Open(dir, log.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	names, err := ro.Topics()
	require.NoError(t, err)
	require.Equal(t, []string{"events", "orders"}, names)
	assert.Equal(t, dir, snap.Dir)
	assert.Equal(t, int64(1000), snap.SampleIntervalMs)
	assert.Equal(t, web.DefaultHistory, snap.History)
	assert.Empty(t, snap.Errors)
	require.Len(t, snap.Topics, len(names))
	for i, name := range names {
		tp, err := ro.Topic(name)
		require.NoError(t, err)
		tf := snap.Topics[i]
		assert.Equal(t, name, tf.Topic)
		assert.Equal(t, tp.ID().String(), tf.ID)
		assert.Len(t, tf.ID, 22)
		assert.Empty(t, tf.Error)
		require.Equal(t, tp.Partitions(), tf.PartitionCount)
		require.Len(t, tf.Partitions, tp.Partitions())
		for j, pf := range tf.Partitions {
			p, err := tp.Partition(int32(j))
			require.NoError(t, err)
			segs, err := p.Segments()
			require.NoError(t, err)
			var bytes int64
			for _, s := range segs {
				bytes += s.Bytes
			}
			assert.Equal(t, int32(j), pf.Partition, "%s", name)
			assert.Equal(t, p.StartOffset(), pf.LogStartOffset, "%s/%d", name, j)
			assert.Equal(t, p.HighWatermark(), pf.NextOffset, "%s/%d", name, j)
			assert.Equal(t, len(segs), pf.Segments, "%s/%d", name, j)
			assert.Equal(t, bytes, pf.Bytes, "%s/%d", name, j)
		}
	}
	ev, _ := partitionOf(snap, "events", 0)
	assert.Equal(t, int64(40), ev.NextOffset)
	assert.Greater(t, ev.Segments, 1, "4 KiB segments rolled")
	assert.Positive(t, ev.Bytes)

	only := getSnapshotURL(t, base+"/snapshot.json?topic=orders")
	require.Len(t, only.Topics, 1, "?topic= keeps one topic")
	assert.Equal(t, "orders", only.Topics[0].Topic)
}

// getSnapshotURL fetches a snapshot at url.
func getSnapshotURL(t *testing.T, url string) web.LogSnapshot {
	t.Helper()
	resp, body := get(t, http.MethodGet, url)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var snap web.LogSnapshot
	require.NoError(t, json.Unmarshal([]byte(body), &snap))
	return snap
}

// TestLogPageShowsPositionsAndLagFromFileStores ensures every position
// saved in the state folders is listed, folder by folder, with the lag
// (high watermark minus position) and a note where the log lacks its
// topic or partition, and that a position file that does not parse is
// reported by name without hiding the others.
func TestLogPageShowsPositionsAndLagFromFileStores(t *testing.T) {
	dir, _ := writeLog(t)
	ctx := context.Background()
	stateA, stateB := filepath.Join(t.TempDir(), "state-a"), filepath.Join(t.TempDir(), "state-b")
	a, err := checkpoint.NewFileStore(stateA)
	require.NoError(t, err)
	b, err := checkpoint.NewFileStore(stateB)
	require.NoError(t, err)
	require.NoError(t, a.Save(ctx, "events", 0, checkpoint.At(12)))
	require.NoError(t, a.Save(ctx, "events", 1, checkpoint.At(7)))
	require.NoError(t, a.Save(ctx, "gone", 0, checkpoint.At(3)))
	require.NoError(t, a.Save(ctx, "events", 9, checkpoint.At(1)))
	require.NoError(t, os.WriteFile(filepath.Join(stateA, "events-2.position"), []byte("not json"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(stateA, "counts.state"), []byte("{}"), 0o644))
	require.NoError(t, b.Save(ctx, "orders", 0, checkpoint.At(0)))

	_, base := newPage(t, dir, web.WithStateDirs(stateA), web.WithStateDirs(stateB))
	snap := getSnapshot(t, base)

	type row struct {
		state, topic string
		partition    int32
		position     int64
		lag          *int64
		note         string
	}
	lag := func(n int64) *int64 { return &n }
	var got []row
	for _, p := range snap.Positions {
		got = append(got, row{p.State, p.Topic, p.Partition, p.Position, p.Lag, p.Note})
	}
	assert.Equal(t, []row{
		{stateA, "events", 0, 12, lag(28), ""},
		{stateA, "events", 1, 7, lag(0), ""},
		{stateA, "events", 9, 1, nil, "partition not in the log (the topic has 3)"},
		{stateA, "gone", 0, 3, nil, "topic not in the log"},
		{stateB, "orders", 0, 0, lag(2), ""},
	}, got)
	p0 := snap.Positions[0]
	require.NotNil(t, p0.NextOffset)
	assert.Equal(t, int64(40), *p0.NextOffset)
	assert.Equal(t, int64(0), *p0.LogStartOffset)
	require.Len(t, snap.Errors, 1)
	assert.Contains(t, snap.Errors[0], filepath.Join(stateA, "events-2.position"))

	only := getSnapshotURL(t, base+"/snapshot.json?topic=orders")
	require.Len(t, only.Positions, 1, "?topic= keeps the topic's positions")
	assert.Equal(t, "orders", only.Positions[0].Topic)
}

// TestLogPageEventsShowANewHighWatermarkWithin2s ensures the event stream
// sends a snapshot at once, and, at the default sample interval, one
// showing records appended by the writer within 2 s of their append.
func TestLogPageEventsShowANewHighWatermarkWithin2s(t *testing.T) {
	dir, lg := writeLog(t)
	_, base := newPage(t, dir)
	events := openEvents[web.LogSnapshot](t, base+"/events")
	first := waitEvent(t, events, time.Now().Add(5*time.Second), "a first snapshot", func(web.LogSnapshot) bool { return true })
	p, ok := partitionOf(first, "events", 1)
	require.True(t, ok)
	require.Equal(t, int64(7), p.NextOffset)

	tp, err := lg.Topic("events")
	require.NoError(t, err)
	appendN(t, tp, 1, 5)
	appended := time.Now()
	waitEvent(t, events, appended.Add(2*time.Second), "next offset 12 on events/1", func(s web.LogSnapshot) bool {
		p, _ := partitionOf(s, "events", 1)
		return p.NextOffset == 12
	})
	t.Logf("seen %v after the append", time.Since(appended))

	one := openEvents[web.LogSnapshot](t, base+"/events?topic=orders")
	s := waitEvent(t, one, time.Now().Add(5*time.Second), "a snapshot of orders", func(web.LogSnapshot) bool { return true })
	require.Len(t, s.Topics, 1, "?topic= keeps one topic")
	assert.Equal(t, "orders", s.Topics[0].Topic)
}

// TestLogPageRatesRiseAfterAppends ensures a partition's rate, and the
// last of its sparkline's rates, become non-zero after records are
// appended, that a partition nothing is appended to stays at zero, and
// that the sparkline keeps at most WithHistory rates.
func TestLogPageRatesRiseAfterAppends(t *testing.T) {
	dir, lg := writeLog(t)
	page, base := newPage(t, dir, web.WithSampleInterval(20*time.Millisecond), web.WithHistory(5))
	events := openEvents[web.LogSnapshot](t, base+"/events")
	waitEvent(t, events, time.Now().Add(5*time.Second), "five rates of events/0", func(s web.LogSnapshot) bool {
		p, _ := partitionOf(s, "events", 0)
		return len(p.Rates) == 5
	})
	tp, err := lg.Topic("events")
	require.NoError(t, err)
	appendN(t, tp, 0, 50)
	snap := waitEvent(t, events, time.Now().Add(5*time.Second), "a non-zero rate on events/0", func(s web.LogSnapshot) bool {
		p, _ := partitionOf(s, "events", 0)
		return p.NextOffset == 90 && p.Rate > 0
	})
	p, _ := partitionOf(snap, "events", 0)
	assert.Equal(t, 5, snap.History)
	assert.Len(t, p.Rates, 5, "at most WithHistory rates")
	assert.Equal(t, p.Rate, p.Rates[len(p.Rates)-1], "Rate is the newest rate")
	idle, _ := partitionOf(snap, "events", 2)
	assert.Zero(t, idle.Rate)
	assert.Equal(t, []float64{0, 0, 0, 0, 0}, idle.Rates)

	var sum float64
	for _, tf := range page.Snapshot().Topics {
		for _, pf := range tf.Partitions {
			for _, r := range pf.Rates {
				sum += r
			}
		}
	}
	assert.Positive(t, sum, "Snapshot carries the rates too")
}

// TestLogPageRefusesBadPathsAndParametersWithAShortMessage ensures what the
// page does not serve is answered 400, 404 or 405 with one plain-text line
// naming what was wrong, never a stack.
func TestLogPageRefusesBadPathsAndParametersWithAShortMessage(t *testing.T) {
	dir, _ := writeLog(t)
	_, base := newPage(t, dir)
	for _, c := range []struct {
		method, path string
		status       int
		says         string
	}{
		{"GET", "/nope", 404, `no page at "/nope"`},
		{"GET", "/snapshot.json/x", 404, "no page at"},
		{"GET", "/index.html", 404, "no page at"},
		{"GET", "/%2e%2e/%2e%2e/etc/passwd", 404, `no page at "/../../etc/passwd"`},
		{"GET", "/" + strings.Repeat("a", 5000), 404, "no page at"},
		{"GET", "/events?topic=nope", 404, "no topic nope"},
		{"GET", "/snapshot.json?topic=nope", 404, "no topic nope"},
		{"GET", "/snapshot.json?topic=a/b", 400, "bad parameter topic"},
		{"GET", "/snapshot.json?topic=..", 400, "bad parameter topic"},
		{"GET", "/snapshot.json?topic=", 400, "bad parameter topic"},
		{"GET", "/?topic=events&topic=orders", 400, "parameter topic given 2 times"},
		{"GET", "/snapshot.json?foo=1", 400, `unknown parameter "foo"`},
		{"GET", "/events?since=3", 400, `unknown parameter "since"`},
		{"GET", "/snapshot.json?%zz", 400, "bad query"},
		{"POST", "/snapshot.json", 405, "method \"POST\" not allowed"},
		{"DELETE", "/", 405, "not allowed"},
		{"PUT", "/events", 405, "not allowed"},
	} {
		resp, body := get(t, c.method, base+c.path)
		name := c.method + " " + c.path[:min(len(c.path), 40)]
		assert.Equal(t, c.status, resp.StatusCode, "%s: %s", name, body)
		assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"), name)
		assert.Contains(t, body, c.says, name)
		assert.True(t, strings.HasPrefix(body, "strom: "), "%s: %q", name, body)
		assert.Equal(t, 1, strings.Count(body, "\n"), "%s: one line: %q", name, body)
		assert.Less(t, len(body), 400, "%s: short", name)
		for _, stack := range []string{"goroutine ", "panic", ".go:"} {
			assert.NotContains(t, body, stack, name)
		}
		if c.status == 405 {
			assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"), name)
		}
	}
}

// fileState is what TestLogPageNeverWritesToTheLogOrStateFolders compares
// of each file and folder.
type fileState struct {
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

// walkState records every path under the roots with its size, mode and
// modification time.
func walkState(t *testing.T, roots ...string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	for _, root := range roots {
		require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			out[path] = fileState{fi.Size(), fi.Mode(), fi.ModTime()}
			return nil
		}))
	}
	return out
}

// TestLogPageNeverWritesToTheLogOrStateFolders ensures a session of
// requests (the page, its files, snapshots, event streams, refused
// requests) and the sampling leave every file and folder of the log
// directory and the state folders as they were: the same names, sizes,
// modes and modification times.
func TestLogPageNeverWritesToTheLogOrStateFolders(t *testing.T) {
	dir, lg := writeLog(t)
	require.NoError(t, lg.Close())
	state := filepath.Join(t.TempDir(), "state")
	st, err := checkpoint.NewFileStore(state)
	require.NoError(t, err)
	require.NoError(t, st.Save(context.Background(), "events", 0, checkpoint.At(3)))
	before := walkState(t, dir, state)

	page, err := web.NewLogPage(dir, web.WithStateDirs(state), web.WithSampleInterval(10*time.Millisecond))
	require.NoError(t, err)
	srv := httptest.NewServer(page)
	defer srv.Close()
	for _, path := range []string{"/", "/log.js", "/log.css", "/snapshot.json", "/snapshot.json?topic=events",
		"/nope", "/snapshot.json?topic=nope", "/snapshot.json?topic=a/b"} {
		get(t, http.MethodGet, srv.URL+path)
		get(t, http.MethodPost, srv.URL+path)
	}
	events := openEvents[web.LogSnapshot](t, srv.URL+"/events")
	n := 0
	waitEvent(t, events, time.Now().Add(5*time.Second), "ten snapshots", func(web.LogSnapshot) bool { n++; return n == 10 })
	require.NoError(t, page.Close())

	assert.Equal(t, before, walkState(t, dir, state))
}

// TestLogPageServesItsPageWithEmbeddedScriptAndStyle ensures / is HTML that
// loads only the page's own script and style, each served with its content
// type, and that the script reads the event stream and marks each figure
// with data-field for a browser test to read.
func TestLogPageServesItsPageWithEmbeddedScriptAndStyle(t *testing.T) {
	dir, _ := writeLog(t)
	_, base := newPage(t, dir)
	resp, html := get(t, http.MethodGet, base+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	assert.Contains(t, html, `<script src="log.js" defer></script>`)
	assert.Contains(t, html, `<link rel="stylesheet" href="log.css">`)
	for _, id := range []string{`id="partitions-body"`, `id="positions-body"`, `id="status"`, `id="errors"`} {
		assert.Contains(t, html, id)
	}
	assert.NotRegexp(t, regexp.MustCompile(`(src|href)="[^"]*(//|:)`), html, "no outside assets")

	resp, js := get(t, http.MethodGet, base+"/log.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, js, `new EventSource("events" + query)`)
	for _, field := range []string{"logStartOffset", "nextOffset", "segments", "bytes", "rate", "rates", "position", "lag"} {
		assert.Contains(t, js, fmt.Sprintf("%q", field), "the script marks %s with data-field", field)
	}
	assert.NotContains(t, js, "innerHTML")
	assert.NotContains(t, js, "https://")

	resp, css := get(t, http.MethodGet, base+"/log.css")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, css, "svg.spark")
	assert.NotContains(t, css, "@import")

	resp, body := get(t, http.MethodHead, base+"/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body)
}

// TestLogPageCloseEndsEventStreamsAndStopsSampling ensures Close ends an
// open event stream, leaves no goroutine behind, answers later requests
// 503, and may be called again.
func TestLogPageCloseEndsEventStreamsAndStopsSampling(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir, lg := writeLog(t)
	require.NoError(t, lg.Close())
	page, err := web.NewLogPage(dir, web.WithSampleInterval(10*time.Millisecond))
	require.NoError(t, err)
	srv := httptest.NewServer(page)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()

	require.NoError(t, page.Close())
	select {
	case err := <-ended:
		assert.NoError(t, err, "the stream ends cleanly")
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream is still open 5 s after Close")
	}
	r, body := get(t, http.MethodGet, srv.URL+"/snapshot.json")
	assert.Equal(t, http.StatusServiceUnavailable, r.StatusCode)
	assert.Contains(t, body, web.ErrPageClosed.Error())
	assert.NoError(t, page.Close(), "a second Close")
	srv.Close()
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

// TestNewLogPageRefusesAMissingLogOrStateFolderAndBadOptions ensures
// NewLogPage names what is wrong, creates nothing, and takes zero options
// as the defaults.
func TestNewLogPageRefusesAMissingLogOrStateFolderAndBadOptions(t *testing.T) {
	dir, _ := writeLog(t)
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := web.NewLogPage(missing)
	assert.ErrorIs(t, err, log.ErrNoLog)
	assert.NoDirExists(t, missing)

	_, err = web.NewLogPage(dir, web.WithStateDirs(missing))
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
	assert.NoDirExists(t, missing, "a state folder is never created")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = web.NewLogPage(dir, web.WithStateDirs(file))
	assert.ErrorContains(t, err, file+" is not a directory")

	for _, c := range []struct {
		opt  web.LogPageOption
		says string
	}{
		{web.WithSampleInterval(time.Millisecond), "sample interval 1ms is below the minimum 10ms"},
		{web.WithSampleInterval(-time.Second), "sample interval -1s is below the minimum 10ms"},
		{web.WithHistory(-1), "history of -1 rates per partition is outside 1 to 3600"},
		{web.WithHistory(web.MaxHistory + 1), "history of 3601 rates"},
	} {
		_, err := web.NewLogPage(dir, c.opt)
		assert.ErrorContains(t, err, c.says)
	}

	page, err := web.NewLogPage(dir, web.WithSampleInterval(0), web.WithHistory(0))
	require.NoError(t, err)
	defer page.Close()
	assert.Equal(t, int64(1000), page.Snapshot().SampleIntervalMs, "zero is the default")
}

// TestLogPageShowsADamagedTopicBesideTheOthers ensures a partition whose
// last segment lost bytes below its recovery point (records known to be on
// disk are gone) is shown as its topic's error, naming the damage as verify
// does, while the other topics are shown in full.
func TestLogPageShowsADamagedTopicBesideTheOthers(t *testing.T) {
	dir, lg := writeLog(t)
	require.NoError(t, lg.Close()) // syncs: the recovery point is the end
	segs, err := filepath.Glob(filepath.Join(dir, "events", "0", "*.log"))
	require.NoError(t, err)
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, fi.Size()-50))

	_, base := newPage(t, dir)
	snap := getSnapshot(t, base)
	require.Len(t, snap.Topics, 2)
	t.Logf("events: %s", snap.Topics[0].Error)
	assert.Contains(t, snap.Topics[0].Error, "corrupt")
	assert.Contains(t, snap.Topics[0].Error, filepath.Base(last))
	assert.Empty(t, snap.Topics[1].Error)
	p, ok := partitionOf(snap, "orders", 0)
	require.True(t, ok)
	assert.Equal(t, int64(2), p.NextOffset)
}
