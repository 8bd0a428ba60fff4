package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	"github.com/strom-dev/strom/metrics"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// A service calls Handler once, before its pipelines run, and mounts the handler at
// GET /metrics. A scrape then shows each stage's records in and out under the pipeline's
// name (the otel_scope_* labels are cut from the lines printed here, and the other
// pipelines of the process left out).
func ExampleHandler() {
	h, err := metrics.Handler("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := httptest.NewServer(mux) // a service: service.Serve, http.ListenAndServe, ...
	defer srv.Close()

	err = stream.From[int](streamtest.Slice([]int{1, 2, 3, 4, 5, 6, 7}), stream.WithName("evens")).
		Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
		Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	scope := regexp.MustCompile(`otel_scope_\w+="[^"]*",`)
	for line := range strings.Lines(string(body)) {
		name, labels, _ := strings.Cut(line, "{")
		if (name == "strom_stage_records_in_total" || name == "strom_stage_records_out_total") &&
			strings.Contains(labels, `messaging_consumer_group_name="evens"`) {
			fmt.Print(scope.ReplaceAllString(line, ""))
		}
	}
	// Output:
	// strom_stage_records_in_total{messaging_consumer_group_name="evens",strom_stage="filter",strom_stage_index="0"} 7
	// strom_stage_records_out_total{messaging_consumer_group_name="evens",strom_stage="filter",strom_stage_index="0"} 3
}

// A program that wires OpenTelemetry itself builds a provider with NewProvider, gives it to
// its pipelines and logs (stream.WithMeterProvider, log.WithMeterProvider), serves the
// handler, and shuts the provider down when done. Nothing global changes.
func ExampleNewProvider() {
	mp, h, err := metrics.NewProvider("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mp.Shutdown(context.Background())

	err = stream.From[string](streamtest.Slice([]string{"a", "b", "c"}), stream.WithName("upper"), stream.WithMeterProvider(mp)).
		Map(func(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil }).
		Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}

	rec := httptest.NewRecorder() // what a scrape of GET /metrics gets
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "messaging_client_consumed_messages_total{") {
			fmt.Print(line)
		}
	}
	// Output:
	// messaging_client_consumed_messages_total{messaging_consumer_group_name="upper",messaging_destination_name="streamtest",messaging_destination_partition_id="0",messaging_system="strom",otel_scope_name="github.com/strom-dev/strom/stream",otel_scope_schema_url="",otel_scope_version=""} 3
}
