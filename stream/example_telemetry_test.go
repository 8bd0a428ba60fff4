package stream_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// Example_metrics gives a pipeline an OpenTelemetry MeterProvider and reads
// what it reported. A service installs its provider once for every
// pipeline and log instead, with otel.SetMeterProvider(mp) (see
// go.opentelemetry.io/otel/exporters/prometheus for a /metrics endpoint);
// without one, everything is a no-op.
func Example_metrics() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	err := stream.From[int](streamtest.Slice([]int{1, 2, 3, 4, 5, 6, 7}),
		stream.WithMeterProvider(mp), stream.WithName("evens")).
		Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
		Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case stream.MetricStageRecordsIn, stream.MetricStageRecordsOut, stream.MetricConsumedMessages:
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					group, _ := p.Attributes.Value("messaging.consumer.group.name")
					stage, ok := p.Attributes.Value(stream.AttrStage)
					if !ok {
						topic, _ := p.Attributes.Value("messaging.destination.name")
						stage = topic
					}
					fmt.Printf("%s{%s %s} %d\n", m.Name, group.AsString(), stage.AsString(), p.Value)
				}
			}
		}
	}
	// Output:
	// strom.stage.records.in{evens filter} 7
	// strom.stage.records.out{evens filter} 3
	// messaging.client.consumed.messages{evens streamtest} 7
}
