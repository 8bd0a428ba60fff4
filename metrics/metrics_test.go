package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/metrics"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// runs numbers the pipelines of this test binary, so that each test's pipeline has a name
// of its own and its counters start from 0, also under -count=N (the counters of one
// name add up over the runs that report to one provider).
var runs atomic.Int64

func pipelineName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, runs.Add(1)) }

// scrape GETs url as Prometheus would and returns the body of a 200 answer.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// series matches one sample line: name, labels that contain each of labels (in
// Prometheus's order, which is alphabetical), and a value matching value.
func series(name, value string, labels ...string) *regexp.Regexp {
	pat := `(?m)^` + regexp.QuoteMeta(name) + `\{`
	for _, l := range labels {
		pat += `[^}]*` + regexp.QuoteMeta(l)
	}
	return regexp.MustCompile(pat + `[^}]*\} ` + value + `$`)
}

// TestHandlerServesALogOpenedBeforeItAndAPipelineRunAfterIt ensures that the handler
// Handler returns, mounted on a ServeMux and scraped over HTTP, serves in Prometheus's
// names what a log opened before the call (through the global provider's forwarding) and a
// pipeline run after it report, with their values, during and after the run, beside the
// Go runtime, process and target_info series; and that a second call returns the same
// handler, keeping the first call's service name.
func TestHandlerServesALogOpenedBeforeItAndAPipelineRunAfterIt(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("orders", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}, log.Record{Value: []byte("c")})
	require.NoError(t, err)

	h, err := metrics.Handler("test")
	require.NoError(t, err)
	again, err := metrics.Handler("other")
	require.NoError(t, err)
	assert.True(t, h == again, "a second call returns the first call's handler")
	_, err = p.Append(context.Background(), log.Record{Value: []byte("d")})
	require.NoError(t, err)
	require.NoError(t, p.Sync()) // timed: the log's histogram forwards to the provider now installed

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	url := srv.URL + "/metrics"

	name := pipelineName("billing")
	group := `messaging_consumer_group_name="` + name + `"`
	var store checkpoint.MemoryStore
	scraped := make(chan string, 1)
	err = stream.From(source.Partition(lg, "orders", 0, source.Earliest, source.Replay()), stream.WithName(name)).
		Tap(func(_ context.Context, r log.Record) error {
			if r.Offset == 3 {
				scraped <- scrape(t, url) // while the pipeline runs: its partition gauges too
			}
			return nil
		}).
		Checkpointing(&store).
		Run(context.Background())
	require.NoError(t, err)
	during, after := <-scraped, scrape(t, url)

	orders := []string{`messaging_destination_name="orders"`, `messaging_destination_partition_id="0"`}
	for _, want := range []*regexp.Regexp{
		series("messaging_client_sent_messages_total", "4", orders...),
		series("strom_log_bytes_total", "[1-9][0-9]*", orders...),
		series("strom_log_syncs_total", "[1-9][0-9]*", orders...),
		series("strom_log_sync_duration_seconds_count", "[1-9][0-9]*", orders...),
		series("strom_stage_records_in_total", "4", group, `strom_stage="tap"`, `strom_stage_index="0"`),
		series("strom_stage_records_out_total", "4", group, `strom_stage="tap"`),
		series("strom_stage_failures_total", "0", group, `strom_stage="tap"`),
		series("messaging_client_consumed_messages_total", "4", group, orders[0], orders[1]),
		series("messaging_process_duration_seconds_count", "[1-9][0-9]*", group, orders[0]),
		series("strom_stage_duration_seconds_count", "[1-9][0-9]*", group, `strom_stage="tap"`),
		series("strom_checkpoint_saves_total", "[1-9][0-9]*", group),
		series("strom_checkpoint_failures_total", "0", `error_type="_OTHER"`, group),
		series("strom_checkpoint_duration_seconds_count", "[1-9][0-9]*", group),
		series("target_info", "1", `service_name="test"`),
		regexp.MustCompile(`(?m)^go_goroutines [0-9]+$`),
		regexp.MustCompile(`(?m)^process_start_time_seconds [0-9.e+]+$`),
	} {
		assert.Regexp(t, want, after)
	}
	assert.Regexp(t, series("strom_partition_high_watermark", "4", group, orders[0], orders[1]), during)
	assert.Regexp(t, series("strom_partition_position", "[0-3]", group, orders[0]), during,
		"offset 3 is being handled: the position is below it")
	assert.Regexp(t, series("strom_partition_lag", "[1-4]", group, orders[0]), during)
	assert.NotRegexp(t, series("strom_partition_lag", ".*", group), after,
		"a pipeline's partition gauges are served only while it runs")
}

// TestNewProviderLeavesTheGlobalProviderAlone ensures that NewProvider installs nothing:
// the global provider is the one before the call, and a pipeline given one provider
// reports to its handler only, whose target_info names that provider's service.
func TestNewProviderLeavesTheGlobalProviderAlone(t *testing.T) {
	before := otel.GetMeterProvider()
	mp1, h1, err := metrics.NewProvider("one")
	require.NoError(t, err)
	defer mp1.Shutdown(context.Background())
	mp2, h2, err := metrics.NewProvider("two")
	require.NoError(t, err)
	defer mp2.Shutdown(context.Background())
	assert.Same(t, before, otel.GetMeterProvider())

	name := pipelineName("evens")
	err = stream.From[int](streamtest.Slice([]int{1, 2, 3, 4, 5}), stream.WithName(name), stream.WithMeterProvider(mp1)).
		Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
		Run(context.Background())
	require.NoError(t, err)

	group := `messaging_consumer_group_name="` + name + `"`
	srv1, srv2 := httptest.NewServer(h1), httptest.NewServer(h2)
	defer srv1.Close()
	defer srv2.Close()
	one, two := scrape(t, srv1.URL), scrape(t, srv2.URL)
	assert.Regexp(t, series("strom_stage_records_in_total", "5", group, `strom_stage="filter"`), one)
	assert.Regexp(t, series("strom_stage_records_out_total", "2", group, `strom_stage="filter"`), one)
	assert.Regexp(t, series("target_info", "1", `service_name="one"`), one)
	assert.NotContains(t, two, name)
	assert.Regexp(t, series("target_info", "1", `service_name="two"`), two)
}

// TestNewProviderAddsTheReadersOfItsOptions ensures that the sdkmetric options given to
// NewProvider apply to the provider it builds: a second reader collects what the
// Prometheus handler serves.
func TestNewProviderAddsTheReadersOfItsOptions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp, h, err := metrics.NewProvider("readers", sdkmetric.WithReader(reader))
	require.NoError(t, err)
	defer mp.Shutdown(context.Background())

	name := pipelineName("twice")
	err = stream.From[int](streamtest.Slice([]int{1, 2, 3}), stream.WithName(name), stream.WithMeterProvider(mp)).
		Tap(func(context.Context, int) error { return nil }).
		Run(context.Background())
	require.NoError(t, err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var in int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == stream.MetricStageRecordsIn {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					in += dp.Value
				}
			}
		}
	}
	assert.Equal(t, int64(3), in, "the reader given as an option collects the pipeline's records")
	srv := httptest.NewServer(h)
	defer srv.Close()
	assert.Regexp(t, series("strom_stage_records_in_total", "3", `messaging_consumer_group_name="`+name+`"`), scrape(t, srv.URL))
}

// TestNewProviderWithoutAServiceKeepsTheDefaultServiceName ensures that an empty service
// leaves OpenTelemetry's default service.name (OTEL_SERVICE_NAME, else
// "unknown_service:" and the executable's name) rather than serving an empty one.
func TestNewProviderWithoutAServiceKeepsTheDefaultServiceName(t *testing.T) {
	mp, h, err := metrics.NewProvider("")
	require.NoError(t, err)
	defer mp.Shutdown(context.Background())
	srv := httptest.NewServer(h)
	defer srv.Close()
	assert.Regexp(t, series("target_info", "1", `service_name="`+defaultServiceName()), scrape(t, srv.URL))
}

// defaultServiceName is the start of OpenTelemetry's default service.name here.
func defaultServiceName() string {
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		return name + `"`
	}
	return "unknown_service:"
}

// TestNewProviderAfterShutdownServesOnlyGoAndProcess ensures that the handler of a
// provider that was shut down still answers, with the Go runtime and process series and
// none of strom's.
func TestNewProviderAfterShutdownServesOnlyGoAndProcess(t *testing.T) {
	mp, h, err := metrics.NewProvider("shut")
	require.NoError(t, err)
	name := pipelineName("shut")
	err = stream.From[int](streamtest.Slice([]int{1}), stream.WithName(name), stream.WithMeterProvider(mp)).
		Tap(func(context.Context, int) error { return nil }).
		Run(context.Background())
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	require.Contains(t, scrape(t, srv.URL), name)

	require.NoError(t, mp.Shutdown(context.Background()))
	body := scrape(t, srv.URL)
	assert.NotContains(t, body, "strom_")
	assert.NotContains(t, body, "target_info")
	assert.Regexp(t, regexp.MustCompile(`(?m)^go_goroutines [0-9]+$`), body)
}
