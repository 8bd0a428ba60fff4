package bench

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// BenchmarkThreeTelemetry is BenchmarkThree's strom pipeline (three stages
// from memory, 64 B records in batches of 1,024; one op is one record) with
// OpenTelemetry on: "metrics" reports to an sdk/metric MeterProvider whose
// ManualReader is never collected (the durations of every batch and stage
// are recorded), "metrics+traces" adds an sdk/trace TracerProvider that
// records a span per batch. BenchmarkThree/strom is the same pipeline with
// no provider installed.
func BenchmarkThreeTelemetry(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	for _, c := range []struct {
		name string
		opts []stream.Option
	}{
		{"metrics", []stream.Option{stream.WithMeterProvider(mp)}},
		{"metrics+traces", []stream.Option{stream.WithMeterProvider(mp), stream.WithTracerProvider(tp)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			s := stream.From(newMemSource(b.N), c.opts...).Map(identity).Filter(nonEmpty)
			out := stream.MapTo(s, length).To(sink.Func(func(_ context.Context, vs []int) error {
				n += len(vs)
				return nil
			}))
			start := time.Now()
			if err := out.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			check(b, n, b.N)
			reportRate(b, b.N, elapsed)
		})
	}
}
