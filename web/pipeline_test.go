package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
	"github.com/strom-dev/strom/web"
)

// plSource is a source of one partition, orders/0, fed by the test: append
// raises its high watermark and hands the records to the next Read.
type plSource struct {
	batches chan []stream.Element[int]
	hwm     atomic.Int64
}

func newPLSource() *plSource { return &plSource{batches: make(chan []stream.Element[int], 16)} }

func (s *plSource) Read(ctx context.Context) ([]stream.Element[int], error) {
	select {
	case b := <-s.batches:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *plSource) Close() error { return nil }

func (s *plSource) HighWatermark(topic string, partition int32) (int64, bool) {
	return s.hwm.Load(), topic == "orders" && partition == 0
}

// append appends n records from offset from.
func (s *plSource) append(from, n int) {
	b := make([]stream.Element[int], n)
	for i := range b {
		b[i] = stream.Element[int]{Value: from + i, Topic: "orders", Partition: 0, Offset: int64(from + i)}
	}
	s.hwm.Store(int64(from + n))
	s.batches <- b
}

// plGetSnapshot gets url (a /snapshot.json) and decodes it.
func plGetSnapshot(t *testing.T, h http.Handler, target string) web.PipelineSnapshot {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, 1, strings.Count(rec.Body.String(), "\n"), "one line, as each event: a history of 300 samples indented would run 300 lines")
	var snap web.PipelineSnapshot
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &snap))
	return snap
}

func plPartition(snap web.PipelineSnapshot, topic string, p int32) (stream.PartitionSnapshot, bool) {
	for _, ps := range snap.Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return ps, true
		}
	}
	return stream.PartitionSnapshot{}, false
}

// TestPipelineSnapshotCountsEqualStats ensures /snapshot.json at a quiescent
// moment (Run returned) shows each stage's counts exactly as Stats.
func TestPipelineSnapshotCountsEqualStats(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(50), streamtest.BatchSize(7))).
		Map(func(_ context.Context, v int) (int, error) { return v * 2, nil }).
		Filter(func(_ context.Context, v int) (bool, error) { return v%3 == 0, nil }, stream.Name("thirds"))
	page := web.Pipeline(p)
	t.Cleanup(func() { _ = page.Close() })
	require.NoError(t, p.Run(context.Background()))

	snap := plGetSnapshot(t, page, "/snapshot.json")
	stats := p.Stats()
	require.Len(t, snap.Stages, len(stats))
	for i, st := range snap.Stages {
		assert.Equal(t, stats[i], st.StageStats, "stage %d", i)
	}
	assert.Equal(t, "thirds", snap.Stages[1].Name)
	assert.Equal(t, int64(17), snap.Stages[1].Out)
	part, ok := plPartition(snap, streamtest.Topic, streamtest.Partition)
	require.True(t, ok)
	assert.Equal(t, int64(50), part.Position)
}

func ints(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// TestPipelineEventsShowLagWithin2sAndClearWhenHandled ensures the event
// stream shows a partition's lag within 2 s of records being appended that
// the pipeline has not handled, and shows it cleared once they are.
func TestPipelineEventsShowLagWithin2sAndClearWhenHandled(t *testing.T) {
	src := newPLSource()
	release := make(chan struct{})
	p := stream.From[int](src).Map(func(ctx context.Context, v int) (int, error) {
		if v >= 5 {
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return v, nil
	})
	page := web.Pipeline(p)
	srv := httptest.NewServer(page)
	t.Cleanup(func() {
		srv.Close()
		_ = page.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	events := openEvents[web.PipelineSnapshot](t, srv.URL+"/events")
	src.append(0, 5)
	waitEvent(t, events, time.Now().Add(10*time.Second), "records 0-4 handled", func(s web.PipelineSnapshot) bool {
		ps, ok := plPartition(s, "orders", 0)
		return ok && ps.Position == 5 && ps.Lag == 0
	})

	appended := time.Now()
	src.append(5, 5) // the map holds them
	snap := waitEvent(t, events, appended.Add(2*time.Second), "lag 5 within 2 s", func(s web.PipelineSnapshot) bool {
		ps, _ := plPartition(s, "orders", 0)
		return ps.Lag == 5
	})
	ps, _ := plPartition(snap, "orders", 0)
	assert.Equal(t, int64(10), ps.HighWatermark)
	assert.Equal(t, int64(5), ps.Position)
	assert.Equal(t, 5, ps.InFlight)

	close(release)
	waitEvent(t, events, time.Now().Add(10*time.Second), "lag cleared", func(s web.PipelineSnapshot) bool {
		ps, _ := plPartition(s, "orders", 0)
		return ps.Lag == 0 && ps.Position == 10
	})
}

// TestPipelinePageFlagsAStalledPartitionAndClearsIt ensures the page's
// snapshot marks a partition stalled when its handler blocks on a record
// for the stall limit (plus at most 5 s), and clears the mark once the
// record is released. Fake time (synctest): no test waits 30 s.
func TestPipelinePageFlagsAStalledPartitionAndClearsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newPLSource()
		release := make(chan struct{})
		p := stream.From[int](src, stream.StallAfter(10*time.Second), stream.WithLogger(slog.New(slog.DiscardHandler))).Map(func(ctx context.Context, v int) (int, error) {
			if v == 3 {
				select {
				case <-release:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			return v, nil
		})
		page := web.Pipeline(p)
		defer page.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		src.append(0, 8)
		synctest.Wait() // the map blocks on record 3
		start := time.Now()
		for {
			ps, _ := plPartition(plGetSnapshot(t, page, "/snapshot.json"), "orders", 0)
			if ps.Stalled {
				assert.Equal(t, int64(8), ps.Lag)
				break
			}
			require.Less(t, time.Since(start), 15*time.Second, "not flagged within the limit plus 5 s")
			time.Sleep(100 * time.Millisecond)
		}
		assert.GreaterOrEqual(t, time.Since(start), 10*time.Second, "flagged before the limit")

		close(release)
		synctest.Wait()
		for {
			ps, _ := plPartition(plGetSnapshot(t, page, "/snapshot.json"), "orders", 0)
			if !ps.Stalled {
				assert.Equal(t, int64(0), ps.Lag)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		require.NoError(t, <-done)
	})
}

// TestPipelinePageRefusesBadPathsAndParametersWithAShortMessage ensures
// hostile requests get 404, 405 or 400 with a one-line message naming what
// was wrong, and never a stack.
func TestPipelinePageRefusesBadPathsAndParametersWithAShortMessage(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(3))).Map(func(_ context.Context, v int) (int, error) { return v, nil })
	page := web.Pipeline(p)
	t.Cleanup(func() { _ = page.Close() })
	cases := []struct {
		method, target string
		status         int
		says           string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, `no page at "/nope"`},
		{http.MethodGet, "/../../etc/passwd", http.StatusNotFound, "no page at"},
		{http.MethodGet, "/snapshot.json/x", http.StatusNotFound, "no page at"},
		{http.MethodGet, "/snapshot.json?history=1", http.StatusBadRequest, `unknown parameter "history"`},
		{http.MethodGet, "/events?topic=a&topic=b", http.StatusBadRequest, "given 2 times"},
		{http.MethodGet, "/snapshot.json?topic=..", http.StatusBadRequest, "bad parameter topic"},
		{http.MethodGet, "/snapshot.json?%zz", http.StatusBadRequest, "bad query"},
		{http.MethodPost, "/snapshot.json", http.StatusMethodNotAllowed, "read-only"},
		{http.MethodDelete, "/", http.StatusMethodNotAllowed, "read-only"},
		// A long name is not echoed back whole (a new user's trial got a
		// 100,101-byte answer to a 100,000-byte topic).
		{http.MethodGet, "/snapshot.json?topic=" + strings.Repeat("t", 100_000), http.StatusBadRequest, "bad parameter topic"},
		{http.MethodGet, "/" + strings.Repeat("p", 100_000), http.StatusNotFound, "no page at"},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "/", nil)
		req.URL.Path, req.URL.RawQuery, _ = strings.Cut(c.target, "?")
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, req)
		body := rec.Body.String()
		assert.Less(t, len(body), 512, "%s %s: a short message", c.method, c.target[:min(len(c.target), 40)])
		assert.Equal(t, c.status, rec.Code, "%s %s: %s", c.method, c.target, body)
		assert.Contains(t, body, c.says, "%s %s", c.method, c.target)
		assert.Equal(t, 1, strings.Count(body, "\n"), "one line: %q", body)
		assert.NotContains(t, body, "goroutine")
		assert.NotContains(t, body, ".go:")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	page.ServeHTTP(rec, req)
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))

	require.NoError(t, page.Close())
	rec = httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "closed")
}

// TestPipelinePageServesItsEmbeddedPageWithTestHooks ensures the page, its
// script and style come from the binary with their content types and a
// policy that allows nothing from elsewhere, and that the page carries the
// hooks the browser test reads, and a topic filter keeps one topic.
func TestPipelinePageServesItsEmbeddedPageWithTestHooks(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(3))).Map(func(_ context.Context, v int) (int, error) { return v, nil })
	page := web.Pipeline(p)
	t.Cleanup(func() { _ = page.Close() })
	require.NoError(t, p.Run(context.Background()))
	srv := httptest.NewServer(http.StripPrefix("/ui", page))
	t.Cleanup(srv.Close)
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, html := get("/ui/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	for _, s := range []string{`id="stages"`, `id="partitions"`, `id="checkpoints"`, `id="errors"`, `src="pipeline.js"`, `href="pipeline.css"`} {
		assert.Contains(t, html, s)
	}
	assert.NotContains(t, html, "http://", "no outside asset")
	assert.NotContains(t, html, "https://", "no outside asset")
	resp, js := get("/ui/pipeline.js")
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	for _, s := range []string{`"data-stage"`, `"data-topic"`, `"data-partition"`, `"data-field": f`, `"data-field": "lag"`, `"data-field": "in"`} {
		if s == `"data-field": "in"` {
			assert.Contains(t, js, `["in", "in"]`, "the stage field in")
			continue
		}
		assert.Contains(t, js, s)
	}
	assert.NotContains(t, js, "innerHTML", "names and errors are never parsed as HTML")
	resp, _ = get("/ui/pipeline.css")
	assert.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))

	snap := plGetSnapshot(t, page, "/snapshot.json?topic=other")
	assert.Empty(t, snap.Partitions, "another topic kept")
	snap = plGetSnapshot(t, page, "/snapshot.json?topic="+streamtest.Topic)
	assert.Len(t, snap.Partitions, 1)
}
