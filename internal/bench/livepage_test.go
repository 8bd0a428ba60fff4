package bench

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strom-dev/strom/web"
)

// BenchmarkThreeLivePage is issue 23's figure: what a live page costs the
// pipeline it shows (goal: at most 1%). Both sides run the three stages
// from memory of BenchmarkThree/strom (64 B records, one op is one
// record). "off" runs them plain; "open" mounts web.Pipeline on them (which
// turns on the stages' timing and samples the pipeline every second, the
// defaults) behind an httptest server, with a client reading its /events
// stream from before Run starts to after it returns, as a browser with the
// page open would. It reports records/s, and for "open" the events the
// client read during the run (events/s: about 1 at the default sample
// interval).
func BenchmarkThreeLivePage(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		var c counts
		p := threeStages(newMemSource(b.N), nil, &c)
		start := time.Now()
		err := p.Run(context.Background())
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		check(b, c.n, b.N)
		reportRate(b, b.N, elapsed)
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		var c counts
		p := threeStages(newMemSource(b.N), nil, &c)
		page := web.Pipeline(p)
		srv := httptest.NewServer(page)
		defer func() {
			srv.Close()
			_ = page.Close()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		events, stopped := readEvents(b, ctx, srv.URL+"/events")
		select { // the page's first sample: the client is connected
		case <-events:
		case <-stopped:
			b.Fatal("the event stream ended before its first event")
		}
		start := time.Now()
		err := p.Run(context.Background())
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		cancel()
		n := <-stopped
		check(b, c.n, b.N)
		reportRate(b, b.N, elapsed)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	})
}

// readEvents reads the event stream at url until ctx is cancelled: events
// receives a value at the first event, and stopped, once the stream has
// ended, how many events followed that first one.
func readEvents(b *testing.B, ctx context.Context, url string) (events, stopped <-chan int) {
	b.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		b.Fatalf("GET %s: %s", url, resp.Status)
	}
	first, done := make(chan int), make(chan int, 1)
	go func() {
		defer resp.Body.Close()
		n := -1
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "data: ") {
				continue
			}
			if n++; n == 0 {
				close(first)
			}
		}
		done <- max(n, 0)
	}()
	return first, done
}
