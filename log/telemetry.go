package log

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ScopeName is the instrumentation scope of the log's metrics: the name of
// the Meter it asks its MeterProvider for.
const ScopeName = "github.com/strom-dev/strom/log"

// The names of the log's metrics (see the package doc, "Metrics").
const (
	MetricSentMessages = "messaging.client.sent.messages" // messagingconv.ClientSentMessages

	MetricBytes        = "strom.log.bytes"
	MetricSyncs        = "strom.log.syncs"
	MetricSyncDuration = "strom.log.sync.duration"
)

// telSystem is the messaging.system of everything strom reports.
var telSystem = semconv.MessagingSystemKey.String("strom")

// WithMeterProvider makes the log report its metrics (records and bytes
// appended, syncs and their duration, per partition; see the package doc,
// "Metrics") to mp instead of the global MeterProvider
// (otel.GetMeterProvider() when Open runs), which reports nothing until a
// program installs one with otel.SetMeterProvider. A nil mp keeps the
// global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meterProvider = mp })
}

// logTelemetry is a Log's instruments. The counters are asynchronous: their
// callback reads the counters the writer keeps anyway (groupWriter), once
// per collection, so an append costs nothing more with metrics on. Only the
// sync duration is recorded as it happens, once per sync, and skipped when
// no reader wants it.
type logTelemetry struct {
	syncDuration metric.Float64Histogram
	reg          metric.Registration // nil when the callback failed to register
}

// newLogTelemetry creates l's instruments on the meter provider of its
// config and registers the callback that reports the partitions of l's
// open topics. Instruments that fail to be created are reported to
// otel.Handle and replaced by no-ops: telemetry never fails an Open.
func newLogTelemetry(l *Log) *logTelemetry {
	mp := l.cfg.meterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	t := &logTelemetry{}
	sent, err := m.Int64ObservableCounter(MetricSentMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Records appended to the partition by this process (written to the page cache), since the log was opened."))
	sent = telOrNoop(sent, err, metric.Int64ObservableCounter(noop.Int64ObservableCounter{}))
	bytes, err := m.Int64ObservableCounter(MetricBytes, metric.WithUnit("By"),
		metric.WithDescription("Bytes of record frames (header, body, padding) appended to the partition by this process."))
	bytes = telOrNoop(bytes, err, metric.Int64ObservableCounter(noop.Int64ObservableCounter{}))
	syncs, err := m.Int64ObservableCounter(MetricSyncs, metric.WithUnit("{sync}"),
		metric.WithDescription("Syncs of the partition's active segment to stable storage (AckSynced, Sync, the flush policy, Close; not the sync of a segment sealed by a roll)."))
	syncs = telOrNoop(syncs, err, metric.Int64ObservableCounter(noop.Int64ObservableCounter{}))
	h, err := m.Float64Histogram(MetricSyncDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of one sync of the partition's active segment (fdatasync or msync)."),
		metric.WithExplicitBucketBoundaries(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1))
	t.syncDuration = telOrNoop(h, err, metric.Float64Histogram(noop.Float64Histogram{}))
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, tp := range l.topics {
			for _, p := range tp.partitions {
				if p == nil || p.ro.Load() {
					continue // never written by this process
				}
				attrs := metric.WithAttributeSet(p.telAttrs)
				records, size, syncCalls := p.w.counts()
				o.ObserveInt64(sent, records, attrs)
				o.ObserveInt64(bytes, size, attrs)
				o.ObserveInt64(syncs, syncCalls, attrs)
			}
		}
		return nil
	}, sent, bytes, syncs)
	telHandle(err)
	return t
}

// close unregisters the callback: a closed log reports nothing.
func (t *logTelemetry) close() {
	if t != nil && t.reg != nil {
		telHandle(t.reg.Unregister())
	}
}

// telPartitionAttrs are the attributes of a partition's measurements.
func telPartitionAttrs(topic string, id int32) attribute.Set {
	return attribute.NewSet(telSystem,
		semconv.MessagingOperationName("append"),
		semconv.MessagingDestinationName(topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(id))))
}

// writeStats is what a partition's group writer counts and times: the
// syncs and writes its tests and benchmarks read (export_test.go), and the
// records and bytes written and the sync durations its metrics report. Its
// counters are atomic: the metrics callback reads them without the
// writer's lock.
type writeStats struct {
	// syncs run by the writer (not those of rolls), their total duration
	// in ns, and writes of frames.
	syncCalls, syncNanos, writeCalls atomic.Int64
	// records and bytes of frames written.
	appended, appendedBytes atomic.Int64

	tel    *logTelemetry         // nil without WithMeterProvider
	record []metric.RecordOption // the partition's attributes, for the sync duration
}

// counts returns what the writer counted for the metrics: records and
// bytes of frames written, and syncs of the active segment.
func (st *writeStats) counts() (records, bytes, syncs int64) {
	return st.appended.Load(), st.appendedBytes.Load(), st.syncCalls.Load()
}

// countWrite counts a write of n frames of size bytes, for the metrics:
// one add per write, not per record.
func (st *writeStats) countWrite(n, size int) {
	st.appended.Add(int64(n))
	st.appendedBytes.Add(int64(size))
}

// syncStart returns the time a sync starts when its duration is wanted, and
// the zero time otherwise.
func (st *writeStats) syncStart() time.Time {
	if st.tel != nil && st.tel.syncDuration.Enabled(context.Background()) {
		return time.Now()
	}
	return time.Time{}
}

// syncEnd records the duration of the sync that began at start (a zero
// start records nothing).
func (st *writeStats) syncEnd(start time.Time) {
	if start.IsZero() {
		return
	}
	st.tel.syncDuration.Record(context.Background(), time.Since(start).Seconds(), st.record...)
}

// telHandle reports a telemetry error to the OpenTelemetry error handler.
func telHandle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// telOrNoop returns inst, or fallback when creating inst failed without
// giving one.
func telOrNoop[I comparable](inst I, err error, fallback I) I {
	telHandle(err)
	var zero I
	if inst == zero {
		return fallback
	}
	return inst
}
