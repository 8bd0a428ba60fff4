package service

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// metrics is the process's one MeterProvider and its /metrics handler.
var metrics struct {
	once    sync.Once
	handler http.Handler
	err     error
}

// Metrics installs, on its first call, the process's one OpenTelemetry MeterProvider as the
// global provider (otel.SetMeterProvider), read by a Prometheus exporter
// (go.opentelemetry.io/otel/exporters/prometheus) into a registry of its own that also holds
// the Go runtime and process collectors, and returns the handler that serves that registry
// in Prometheus's text format: what a service mounts at GET /metrics. Every strom log and
// pipeline of the process reports there, also those opened before the call (the global
// provider forwards to the one installed later). service names the process in the
// target_info series (service.name). Later calls return the same handler and ignore
// service.
//
// OpenTelemetry names become Prometheus names by the exporter's rules: dots become
// underscores, the unit is appended ("s" as _seconds, "By" as _bytes; units in braces
// such as {record} are dropped) and counters end in _total, so
// strom.stage.records.in is strom_stage_records_in_total and strom.checkpoint.duration is
// strom_checkpoint_duration_seconds.
func Metrics(service string) (http.Handler, error) {
	metrics.once.Do(func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			metrics.err = fmt.Errorf("metrics: prometheus exporter: %w", err)
			return
		}
		res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
		if err != nil {
			metrics.err = fmt.Errorf("metrics: resource: %w", err)
			return
		}
		otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res)))
		metrics.handler = &promHandler{promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	})
	return metrics.handler, metrics.err
}

// promHandler is the handler Metrics returns.
type promHandler struct{ http.Handler }
