package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/strom-dev/strom/internal/metrictest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestKafkaLagUnderBackPressureShowsRecordsProducedMeanwhile ensures that
// while a pipeline is back-pressured (its handler blocked, so Read is not
// called and no fetch reports a high watermark), records produced to the
// Kafka source's partition show in the pipeline's high watermark and lag
// gauges: the source lists the end offsets itself (KafkaLagInterval).
// Before, the gauges froze at what the last Read's fetch said.
func TestKafkaLagUnderBackPressureShowsRecordsProducedMeanwhile(t *testing.T) {
	brokers := startKafka(t, 1, "pressed")
	produceN(t, brokers, "pressed", 20, 0)
	mp, reader := metrictest.Provider(t)
	src := newKafkaSource(t, brokers, "g-pressed", []string{"pressed"}, source.KafkaMaxRecords(5))
	blocked, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, stream.From[log.Record](src, stream.WithMeterProvider(mp)).Tap(func(ctx context.Context, r log.Record) error {
		if r.Offset == 0 {
			close(blocked)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	t.Cleanup(func() { cancel(); require.NoError(t, waitRun(t, done)) }) // before src closes
	select {
	case <-blocked:
	case <-time.After(kafkaWait):
		t.Fatal("the handler never got a record")
	}

	part := []attribute.KeyValue{attribute.String("messaging.destination.name", "pressed"),
		attribute.String("messaging.destination.partition.id", "0")}
	values := func() (hwm, lag int64) {
		m := metrictest.Collect(t, reader)
		hwm, _ = m.Int(stream.MetricPartitionHighWatermark, part...)
		lag, _ = m.Int(stream.MetricPartitionLag, part...)
		return hwm, lag
	}
	require.Eventually(t, func() bool {
		hwm, lag := values()
		return hwm == 20 && lag == 20
	}, 30*time.Second, 10*time.Millisecond, "the high watermark of the first fetch; record 0 unfinished")

	produceN(t, brokers, "pressed", 30, 0)
	produced := time.Now()
	require.Eventually(t, func() bool {
		hwm, lag := values()
		return hwm == 50 && lag == 50
	}, 30*time.Second, 10*time.Millisecond, "the records produced while the pipeline is blocked show in the lag")
	t.Logf("shown in the lag %v after they were produced (KafkaLagInterval %v)", time.Since(produced), source.KafkaLagInterval)
	close(release)
}
