package metrics

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// global is the process's one provider installed by Handler, and its handler.
var global struct {
	once    sync.Once
	handler http.Handler
	err     error
}

// Handler installs, on its first call, the process's one OpenTelemetry MeterProvider (built
// by [NewProvider]) as the global provider (otel.SetMeterProvider), and returns the handler
// that serves it in Prometheus's text format: what a service mounts at GET /metrics. Every
// strom log and pipeline that reports to the global provider reports there: a log opened
// before the call too (the global provider forwards to the one installed later), but a
// pipeline only when its Run starts after the call (see the package doc, "When to call
// Handler").
//
// service names the process: the resource attribute service.name, served as the
// target_info series' service_name label; "" keeps OpenTelemetry's default
// (OTEL_SERVICE_NAME, else "unknown_service:" and the executable's name). Later calls return
// the same handler, or the same error, and ignore service.
//
// Handler replaces a global MeterProvider the program installed before it; the provider it
// installs is never shut down, which a pull exporter does not need. A program that wires
// OpenTelemetry itself, or wants several providers in one process (a test), uses
// [NewProvider] instead. The error, from building the exporter or the resource, wraps the
// cause and leaves the global provider untouched.
func Handler(service string) (http.Handler, error) {
	global.once.Do(func() {
		mp, h, err := NewProvider(service)
		if err != nil {
			global.err = err
			return
		}
		otel.SetMeterProvider(mp)
		global.handler = h
	})
	return global.handler, global.err
}

// NewProvider returns a new OpenTelemetry MeterProvider read by a Prometheus exporter into a
// registry of its own, which also holds the Go runtime and process collectors (go_* and
// process_* series), and the handler that serves that registry in Prometheus's text format.
// It does not touch the global provider: give mp to the logs and pipelines that should
// report to it (log.WithMeterProvider, stream.WithMeterProvider), or install it yourself
// with otel.SetMeterProvider. Each call builds a separate provider, registry and handler.
//
// service is the resource attribute service.name, as for [Handler]. opts are applied after
// NewProvider's own reader and resource, so they can add readers (an OTLP exporter beside
// the Prometheus one, sdkmetric.WithReader) and views (other histogram buckets,
// sdkmetric.WithView); a sdkmetric.WithResource among them replaces the resource built from
// service.
//
// The caller owns mp: mp.Shutdown stops its readers, after which the handler serves only the
// Go and process series. The error, from building the exporter or the resource, wraps the
// cause.
func NewProvider(service string, opts ...sdkmetric.Option) (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The strategy is the exporter's default today; naming it keeps the names the package
	// doc promises if the default changes (the exporter's doc says it may).
	exp, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: prometheus exporter for service %q: %w", service, err)
	}
	res := resource.Default()
	if service != "" {
		res, err = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName(service)))
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: resource for service %q: %w", service, err)
		}
	}
	all := append([]sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithResource(res)}, opts...)
	mp := sdkmetric.NewMeterProvider(all...)
	return mp, &promHandler{promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

// promHandler is the handler NewProvider returns: a pointer, so that the handlers of two
// calls of Handler compare equal (promhttp's is a func, which does not compare).
type promHandler struct{ http.Handler }
