package stream

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestTelemetryIsNilWithoutProviders ensures a run with no provider
// installed (the global stand-ins, or no-op providers) builds no telemetry
// at all, and one with a meter or a tracer provider does.
func TestTelemetryIsNilWithoutProviders(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	for _, c := range []struct {
		name string
		opts []Option
		want bool
	}{
		{"globals", nil, false},
		{"no-ops", []Option{WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider())}, false},
		{"meter", []Option{WithMeterProvider(mp)}, true},
		{"tracer", []Option{WithTracerProvider(tp)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := From[int](funcSrc{}, c.opts...)
			rt := newRuntime(context.Background(), s.p)
			tel := newTelemetry(rt)
			assert.Equal(t, c.want, tel != nil)
			tel.close()
		})
	}
}

type funcSrc struct{}

func (funcSrc) Read(context.Context) ([]Element[int], error) { return nil, nil }
func (funcSrc) Close() error                                 { return nil }
