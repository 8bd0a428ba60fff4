// Package metrictest reads the values of OpenTelemetry metrics out of an
// sdk/metric ManualReader, for tests that assert on what strom reports.
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Provider returns a MeterProvider that reports to the ManualReader it also
// returns; the provider is shut down when the test ends.
func Provider(t testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, r
}

// Metrics is one collection of a reader.
type Metrics struct {
	rm metricdata.ResourceMetrics
}

// Collect collects r once.
func Collect(t testing.TB, r *sdkmetric.ManualReader) Metrics {
	t.Helper()
	var m Metrics
	if err := r.Collect(context.Background(), &m.rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return m
}

// Find returns the metric called name, and whether there is one.
func (m Metrics) Find(name string) (metricdata.Metrics, bool) {
	for _, sm := range m.rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == name {
				return mt, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// Names returns the names of every metric collected.
func (m Metrics) Names() []string {
	var out []string
	for _, sm := range m.rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			out = append(out, mt.Name)
		}
	}
	return out
}

// Int returns the value of the int64 sum or gauge called name at the data
// point whose attributes include attrs, and whether there is one. With
// several such points it returns the first.
func (m Metrics) Int(name string, attrs ...attribute.KeyValue) (int64, bool) {
	mt, ok := m.Find(name)
	if !ok {
		return 0, false
	}
	var pts []metricdata.DataPoint[int64]
	switch d := mt.Data.(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	}
	for _, p := range pts {
		if has(p.Attributes, attrs) {
			return p.Value, true
		}
	}
	return 0, false
}

// Histogram returns the float64 histogram point of the metric called name
// whose attributes include attrs, and whether there is one.
func (m Metrics) Histogram(name string, attrs ...attribute.KeyValue) (metricdata.HistogramDataPoint[float64], bool) {
	mt, ok := m.Find(name)
	if !ok {
		return metricdata.HistogramDataPoint[float64]{}, false
	}
	if d, ok := mt.Data.(metricdata.Histogram[float64]); ok {
		for _, p := range d.DataPoints {
			if has(p.Attributes, attrs) {
				return p, true
			}
		}
	}
	return metricdata.HistogramDataPoint[float64]{}, false
}

// Points returns how many data points the metric called name has.
func (m Metrics) Points(name string) int {
	mt, ok := m.Find(name)
	if !ok {
		return 0
	}
	switch d := mt.Data.(type) {
	case metricdata.Sum[int64]:
		return len(d.DataPoints)
	case metricdata.Gauge[int64]:
		return len(d.DataPoints)
	case metricdata.Histogram[float64]:
		return len(d.DataPoints)
	}
	return 0
}

func has(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}
