package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/web"
)

// browserWidth and browserHeight are the viewport of the headless
// browser, so the size of a screenshot of it, in CSS pixels.
const (
	browserWidth  = 1280
	browserHeight = 800
)

// chromium returns the path of a Chromium (Debian's chromium package:
// .ci/run installs it with apt-get). Without one the browser tests are
// skipped on a developer's machine, and fail under CI=true, where a missing
// browser would hide the page's test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium package for the browser tests")
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the browser tests run in CI")
	return ""
}

// browser starts a headless Chromium for t and returns a chromedp context
// on one tab, ended with t.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	_, err := chromedp.Run(ctx, chromedp.EmulateViewport(browserWidth, browserHeight))
	require.NoError(t, err, "start chromium")
	return ctx
}

// renderedRow is one table row of the rendered page: its data attributes
// and, per data-field cell, its data-value when it has one, else its text.
type renderedRow struct {
	Topic     string            `json:"topic"`
	Partition string            `json:"partition"`
	State     string            `json:"state"`
	Fields    map[string]string `json:"fields"`
}

// rowsScript reads the rows of the table body with the given id off the
// page, as the page's data attributes describe them (web's package doc).
const rowsScript = `Array.from(document.querySelectorAll('#%s tr')).map(tr => ({
	topic: tr.dataset.topic || '', partition: tr.dataset.partition || '', state: tr.dataset.state || '',
	fields: Object.fromEntries(Array.from(tr.querySelectorAll('[data-field]')).map(
		td => [td.dataset.field, td.dataset.value !== undefined ? td.dataset.value : td.textContent.trim()]))
}))`

func renderedRows(ctx context.Context, body string) ([]renderedRow, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[[]renderedRow](fmt.Sprintf(rowsScript, body)))
}

// waitRendered polls the page until cond holds of the rows of body, or
// fails t after a minute (a bound for a loaded machine, not the page's
// promise: the time it took is logged).
func waitRendered(t *testing.T, ctx context.Context, body, what string, cond func([]renderedRow) bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(time.Minute)
	var last []renderedRow
	for {
		rows, err := renderedRows(ctx, body)
		require.NoError(t, err)
		if cond(rows) {
			return time.Since(start)
		}
		last = rows
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s; last rows of #%s: %+v", what, body, last)
		}
		// Each check is a round trip to the browser, which is paced by
		// its own rendering; a short pause between them spares the CPU.
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func field(rows []renderedRow, state, topic string, partition int32, name string) (string, bool) {
	for _, r := range rows {
		if r.Topic == topic && r.Partition == strconv.Itoa(int(partition)) && r.State == state {
			v, ok := r.Fields[name]
			return v, ok
		}
	}
	return "", false
}

// TestLogPageInABrowserShowsTheLogsFiguresAndLagAsRecordsArriveAndAreHandled
// opens the log page in headless Chromium over a log the test writes and
// reads the numbers off the rendered page: every partition's log start
// offset, next offset and segment count equal the log's own (what `strom
// topics describe` prints: cmd/strom's TestServeAgreesWithTopicsDescribeAndPositions
// checks the page's JSON against it); a consumer's lag appears once records
// are appended after its position, and clears once its position is saved
// past them. It saves a screenshot of the page (see screenshot: docs/img/log-page.png
// is one) and checks that it is not blank:
// the window's size and more than a few colours.
func TestLogPageInABrowserShowsTheLogsFiguresAndLagAsRecordsArriveAndAreHandled(t *testing.T) {
	ctx := browser(t)
	dir, stateDir := t.TempDir(), t.TempDir()
	lg, err := log.Open(dir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	orders, err := lg.CreateTopic("orders", 3)
	require.NoError(t, err)
	clicks, err := lg.CreateTopic("clicks", 1)
	require.NoError(t, err)
	appendN := func(tp *log.Topic, partition int32, n int) {
		p, err := tp.Partition(partition)
		require.NoError(t, err)
		recs := make([]log.Record, n)
		for i := range recs {
			recs[i] = log.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte("v"), 100)}
		}
		_, err = p.Append(context.Background(), recs...)
		require.NoError(t, err)
	}
	for p := range int32(3) {
		appendN(orders, p, 100*int(p+1))
	}
	appendN(clicks, 0, 50)
	store, err := checkpoint.NewFileStore(stateDir)
	require.NoError(t, err)
	require.NoError(t, store.Save(context.Background(), "orders", 1, checkpoint.At(200))) // caught up

	page, err := web.NewLogPage(dir, web.WithStateDirs(stateDir), web.WithSampleInterval(200*time.Millisecond))
	require.NoError(t, err)
	srv := httptest.NewServer(page)
	defer func() {
		// The page ends its event streams first: the server's Close
		// waits for its connections, and the browser holds one open.
		_ = page.Close()
		srv.Close()
	}()
	_, err = chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/"))
	require.NoError(t, err)

	// Every partition, as the log has it.
	waitRendered(t, ctx, "partitions-body", "the four partitions", func(rows []renderedRow) bool { return len(rows) == 4 })
	rows, err := renderedRows(ctx, "partitions-body")
	require.NoError(t, err)
	for _, tp := range []*log.Topic{orders, clicks} {
		for id := range int32(tp.Partitions()) {
			p, err := tp.Partition(id)
			require.NoError(t, err)
			segs, err := p.Segments()
			require.NoError(t, err)
			for name, want := range map[string]int64{"logStartOffset": p.StartOffset(), "nextOffset": p.HighWatermark(), "segments": int64(len(segs))} {
				got, ok := field(rows, "", tp.Name(), id, name)
				require.True(t, ok, "%s/%d has no %s cell: %+v", tp.Name(), id, name, rows)
				require.Equal(t, strconv.FormatInt(want, 10), got, "%s/%d %s on the page", tp.Name(), id, name)
			}
		}
	}

	// A consumer's lag appears with the records appended after its
	// position, and clears once it saves a position past them.
	lagIs := func(want int64) func([]renderedRow) bool {
		return func(rows []renderedRow) bool {
			got, ok := field(rows, stateDir, "orders", 1, "lag")
			return ok && got == strconv.FormatInt(want, 10)
		}
	}
	waitRendered(t, ctx, "positions-body", "lag 0 at the saved position", lagIs(0))
	appendN(orders, 1, 40)
	took := waitRendered(t, ctx, "positions-body", "the lag of 40 records appended", lagIs(40))
	t.Logf("the lag showed %v after the append (sample interval 200ms)", took)
	require.NoError(t, store.Save(context.Background(), "orders", 1, checkpoint.At(240)))
	took = waitRendered(t, ctx, "positions-body", "the lag cleared once handled", lagIs(0))
	t.Logf("the lag cleared %v after the save", took)

	screenshot(t, ctx, "log-page.png")
}

// screenshot saves a PNG of the browser's viewport as name, in the folder
// STROM_SCREENSHOTS names (docs/img holds the README's: make screenshots),
// else in a temporary one, and checks that it is not blank.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	dir := os.Getenv("STROM_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), shot, 0o644))
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err, "the screenshot is a PNG")
	requireNotBlank(t, img)
}

// requireNotBlank checks a screenshot of the browser's window: its size
// and more than a few colours (a blank or unstyled page has one or two).
func requireNotBlank(t *testing.T, img image.Image) {
	t.Helper()
	b := img.Bounds()
	require.Equal(t, browserWidth, b.Dx(), "screenshot width")
	require.Equal(t, browserHeight, b.Dy(), "screenshot height")
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	require.Greater(t, len(colours), 16, "colours in the screenshot: a blank page has one or two")
}

// stagesScript reads the pipeline page's stages as rows: Partition holds the
// stage's data-stage index, Fields its figures by data-field.
const stagesScript = `Array.from(document.querySelectorAll('#stages [data-stage]')).map(div => ({
	topic: '', partition: div.dataset.stage, state: '',
	fields: Object.fromEntries(Array.from(div.querySelectorAll('[data-field]')).map(td => [td.dataset.field, td.textContent.trim()]))
}))`

// pipelineRows reads the stages (what "stages") or the source partitions
// (what "partitions") off the pipeline page, with the time of the
// snapshot drawn (body[data-time], the pipeline's clock).
func pipelineRows(ctx context.Context, what string) ([]renderedRow, time.Time, error) {
	script := stagesScript
	if what == "partitions" {
		script = `Array.from(document.querySelectorAll('#partitions tbody tr[data-topic]')).map(tr => ({
	topic: tr.dataset.topic, partition: tr.dataset.partition, state: '',
	fields: Object.fromEntries(Array.from(tr.querySelectorAll('[data-field]')).map(td => [td.dataset.field, td.textContent.trim()]))
}))`
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]renderedRow](script))
	if err != nil {
		return nil, time.Time{}, err
	}
	at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.time || ''`))
	if err != nil || at == "" {
		return rows, time.Time{}, err
	}
	tm, err := time.Parse(time.RFC3339Nano, at)
	return rows, tm, err
}

// number parses a figure as the page formats it (1,234).
func number(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n, err == nil
}

// waitPipeline polls the pipeline page until cond holds of what it shows
// (see pipelineRows), or fails t after a minute, and returns the time of
// the snapshot that satisfied it.
func waitPipeline(t *testing.T, ctx context.Context, what, desc string, cond func([]renderedRow) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last []renderedRow
	for {
		rows, at, err := pipelineRows(ctx, what)
		require.NoError(t, err)
		if cond(rows) {
			return at
		}
		last = rows
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline page never showed %s; last %s: %+v", desc, what, last)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPipelinePageInABrowserShowsStatsAndLagAsTheLogPageDoes
// runs a pipeline over a log partition (source.Partition from a FileStore
// -> Map -> Filter -> a sink) with web.Pipeline and the log page (what
// `strom serve --state` serves) side by side, opens both in headless
// Chromium and reads off the rendered pages: each stage's in and out equal
// Stream.Stats once the records are handled; a lag of the records appended
// while the handler is held appears on the pipeline page in a snapshot
// taken within 2 s of the append, the map holding them reads busy, and the
// lag clears when they are handled; the
// log page shows the pipeline's saved position with the same lag going to
// zero once it checkpoints. It saves docs/img's pipeline-page.png.
func TestPipelinePageInABrowserShowsStatsAndLagAsTheLogPageDoes(t *testing.T) {
	ctx := browser(t)
	dir, stateDir := t.TempDir(), t.TempDir()
	lg, err := log.Open(dir, log.CreateIfMissing())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("orders", 1)
	require.NoError(t, err)
	part, err := tp.Partition(0)
	require.NoError(t, err)
	appendN := func(n int) {
		recs := make([]log.Record, n)
		for i := range recs {
			recs[i] = log.Record{Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte("v"), 100)}
		}
		_, err := part.Append(context.Background(), recs...)
		require.NoError(t, err)
	}
	store, err := checkpoint.NewFileStore(stateDir)
	require.NoError(t, err)

	// The handler holds every record from offset 100 on until released.
	release := make(chan struct{})
	var handled atomic.Int64
	p := stream.From[log.Record](source.Partition(lg, "orders", 0, source.FromStore(store))).
		Map(func(ctx context.Context, r log.Record) (log.Record, error) {
			if r.Offset >= 100 {
				select {
				case <-release:
				case <-ctx.Done():
					return r, ctx.Err()
				}
			}
			return r, nil
		}).
		Filter(func(_ context.Context, r log.Record) (bool, error) { return r.Offset%2 == 0, nil }).
		To(sink.Func(func(_ context.Context, rs []log.Record) error {
			handled.Add(int64(len(rs)))
			return nil
		})).
		Checkpointing(store)

	pipePage := web.Pipeline(p)
	logPage, err := web.NewLogPage(dir, web.WithStateDirs(stateDir), web.WithSampleInterval(200*time.Millisecond))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", pipePage))
	mux.Handle("/log/", http.StripPrefix("/log", logPage))
	srv := httptest.NewServer(mux)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
		_ = pipePage.Close()
		_ = logPage.Close()
		srv.Close()
	}()

	appendN(100)
	_, err = chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/ui/"))
	require.NoError(t, err)

	// The counts, once the first 100 records are handled, equal Stats.
	waitPipeline(t, ctx, "stages", "each stage's in and out equal to Stream.Stats", func(rows []renderedRow) bool {
		stats := p.Stats()
		if len(rows) != len(stats) || stats[0].In != 100 || handled.Load() != 50 {
			return false
		}
		for i, st := range stats {
			in, ok1 := number(rows[i].Fields["in"])
			out, ok2 := number(rows[i].Fields["out"])
			if !ok1 || !ok2 || rows[i].Partition != strconv.Itoa(i) || in != st.In || out != st.Out {
				return false
			}
		}
		return true
	})
	lagIs := func(want int64) func([]renderedRow) bool {
		return func(rows []renderedRow) bool {
			for _, r := range rows {
				if r.Topic == "orders" && r.Partition == "0" {
					lag, ok := number(r.Fields["lag"])
					return ok && lag == want
				}
			}
			return false
		}
	}
	waitPipeline(t, ctx, "partitions", "orders/0 caught up", lagIs(0))

	appended := time.Now()
	appendN(40) // held by the handler
	at := waitPipeline(t, ctx, "partitions", "the lag of the 40 records held", lagIs(40))
	t.Logf("the lag showed in a snapshot taken %v after the append", at.Sub(appended))
	require.LessOrEqual(t, at.Sub(appended), 2*time.Second, "the page showed the lag in a snapshot taken more than 2 s after the append")
	// The map, stuck in its function, reads busy within a sample or two.
	waitPipeline(t, ctx, "stages", "the map busy while it holds the records", func(rows []renderedRow) bool {
		busy, ok := number(rows[0].Fields["busy"])
		return ok && busy >= 900
	})
	screenshot(t, ctx, "pipeline-page.png")

	close(release)
	waitPipeline(t, ctx, "partitions", "the lag cleared once the records are handled", lagIs(0))

	// The log page shows the position the pipeline saved, with its lag.
	_, err = chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/log/"))
	require.NoError(t, err)
	waitRendered(t, ctx, "positions-body", "the pipeline's saved position 140, lag 0", func(rows []renderedRow) bool {
		pos, ok1 := field(rows, stateDir, "orders", 0, "position")
		lag, ok2 := field(rows, stateDir, "orders", 0, "lag")
		return ok1 && ok2 && pos == "140" && lag == "0"
	})
}
