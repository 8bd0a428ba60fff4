package service

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestMetricsServesStromMetricsInPrometheusFormat ensures the handler Metrics returns serves,
// in Prometheus's text format, what a log and a pipeline of the process report through the
// global provider it installs, with their values, and that a second call returns the same
// handler.
func TestMetricsServesStromMetricsInPrometheusFormat(t *testing.T) {
	h, err := Metrics("test")
	require.NoError(t, err)
	again, err := Metrics("other")
	require.NoError(t, err)
	assert.Same(t, h.(*promHandler), again.(*promHandler))

	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("orders", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}, log.Record{Value: []byte("c")})
	require.NoError(t, err)

	srv := httptest.NewServer(h)
	defer srv.Close()
	scrape := func() string {
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scraped := make(chan string, 1)
	err = stream.From(source.Partition(lg, "orders", 0, source.Earliest, source.Replay()), stream.WithName("billing")).
		Tap(func(_ context.Context, r log.Record) error {
			if r.Offset == 2 {
				scraped <- scrape() // while the pipeline runs: its positions too
			}
			return nil
		}).
		Run(ctx)
	require.NoError(t, err)
	during, after := <-scraped, scrape()

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^messaging_client_sent_messages_total\{[^}]*messaging_destination_name="orders"[^}]*\} 3$`),
		regexp.MustCompile(`(?m)^strom_log_bytes_total\{[^}]*messaging_destination_name="orders"[^}]*\} [1-9][0-9]*$`),
		regexp.MustCompile(`(?m)^strom_stage_records_in_total\{[^}]*messaging_consumer_group_name="billing"[^}]*strom_stage="tap"[^}]*\} 3$`),
		regexp.MustCompile(`(?m)^messaging_client_consumed_messages_total\{[^}]*messaging_consumer_group_name="billing"[^}]*\} 3$`),
		regexp.MustCompile(`(?m)^target_info\{[^}]*service_name="test"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^go_goroutines [0-9]+$`),
	} {
		assert.Regexp(t, want, after)
	}
	assert.Regexp(t, regexp.MustCompile(`(?m)^strom_partition_high_watermark\{[^}]*messaging_destination_name="orders"[^}]*\} 3$`), during)
	assert.Regexp(t, regexp.MustCompile(`(?m)^strom_partition_lag\{[^}]*messaging_destination_name="orders"[^}]*\} 3$`), during,
		"the batch of offsets 0 to 2 is being handled: none of it finished")
}
