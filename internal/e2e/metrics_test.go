package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/service"
)

// scrape returns the body of the service's GET /metrics.
func (p *proc) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: GET /metrics", p.name)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// metricValue returns the value of the first series of name whose labels match labels (a
// regular expression over the text between the braces), and whether there is one.
func metricValue(body, name, labels string) (int64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + labels + `[^}]*\} ([0-9.e+]+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return int64(v), true
}

// TestServicesServeMetrics ensures the publisher and a consumer, as processes, serve GET
// /metrics in Prometheus's text format with strom's metrics and values that agree with
// their /stats: the publisher's appends per partition, the consumer's records, position,
// high watermark, lag 0 once caught up, and checkpoint saves.
func TestServicesServeMetrics(t *testing.T) {
	work := t.TempDir()
	logDir := filepath.Join(work, "log")
	require.NoError(t, os.Mkdir(logDir, 0o755))
	pub := startProc(t, "publisher", bin.publisher, "--dir", logDir, "--partitions", "2", "--count", "300", "--rate", "0")
	var ps service.PublisherStats
	waitFor(t, 20*time.Second, func() bool {
		pub.stats(t, &ps)
		return ps.Stopped
	}, func() string { return fmt.Sprintf("publisher not done: %+v", ps) })
	con := startProc(t, "consumer", bin.consumer, "--dir", logDir, "--partition", "1",
		"--state", filepath.Join(work, "state-1"), "--delay", "0", "--name", "billing")

	body := pub.scrape(t)
	for p := range 2 {
		sent, ok := metricValue(body, "messaging_client_sent_messages_total",
			fmt.Sprintf(`messaging_destination_partition_id="%d"`, p))
		require.True(t, ok, "publisher: messaging_client_sent_messages_total of partition %d in:\n%s", p, body)
		require.Equal(t, ps.PerPartition[p], sent, "partition %d", p)
		bytes, ok := metricValue(body, "strom_log_bytes_total", fmt.Sprintf(`messaging_destination_partition_id="%d"`, p))
		require.True(t, ok)
		require.Positive(t, bytes)
	}

	written := ps.PerPartition[1]
	var cs service.ConsumerStats
	waitFor(t, 20*time.Second, func() bool {
		con.stats(t, &cs)
		return cs.Position != nil && *cs.Position == written
	}, func() string { return fmt.Sprintf("consumer did not catch up with %d: %+v", written, cs) })
	group := `messaging_consumer_group_name="billing"`
	for _, c := range []struct {
		name string
		want int64
	}{
		{"strom_stage_records_in_total", written},
		{"strom_stage_records_out_total", written},
		{"messaging_client_consumed_messages_total", written},
		{"strom_partition_position", written},
		{"strom_partition_high_watermark", written},
		{"strom_partition_lag", 0},
	} {
		body := con.scrape(t)
		got, ok := metricValue(body, c.name, group)
		require.True(t, ok, "consumer: %s in:\n%s", c.name, body)
		require.Equal(t, c.want, got, c.name)
	}
	saves, ok := metricValue(con.scrape(t), "strom_checkpoint_saves_total", group)
	require.True(t, ok)
	require.Positive(t, saves)
}
