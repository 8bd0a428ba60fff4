package stream

import (
	"context"
	"reflect"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the pipeline's metrics and
// spans: the name of the Meter and Tracer it asks its providers for.
const ScopeName = "github.com/strom-dev/strom/stream"

// The names of the pipeline's metrics (see the package doc, "Metrics and
// traces").
const (
	MetricStageRecordsIn           = "strom.stage.records.in"
	MetricStageRecordsOut          = "strom.stage.records.out"
	MetricStageRecordsSkipped      = "strom.stage.records.skipped"
	MetricStageRecordsDeadLettered = "strom.stage.records.dead_lettered"
	MetricStageFailures            = "strom.stage.failures"
	MetricStageRetries             = "strom.stage.retries"
	MetricStageRecordsLate         = "strom.stage.records.late"
	MetricStageDuration            = "strom.stage.duration"
	MetricConsumedMessages         = "messaging.client.consumed.messages" // messagingconv.ClientConsumedMessages
	MetricProcessDuration          = "messaging.process.duration"         // messagingconv.ProcessDuration
	MetricCheckpointSaves          = "strom.checkpoint.saves"
	MetricCheckpointFailures       = "strom.checkpoint.failures"
	MetricCheckpointDuration       = "strom.checkpoint.duration"
	MetricPartitionPosition        = "strom.partition.position"
	MetricPartitionHighWatermark   = "strom.partition.high_watermark"
	MetricPartitionLag             = "strom.partition.lag"
	// MetricPartitionStalled is 1 while a partition is stalled (behind
	// and no progress for the limit of StallAfter), else 0.
	MetricPartitionStalled = "strom.partition.stalled"
)

// The names of the pipeline's spans.
const (
	// SpanCheckpointSave is the span of one round of saves: every position
	// that moved, to every store.
	SpanCheckpointSave = "strom.checkpoint.save"
)

// The attributes strom adds to the messaging semantic conventions.
const (
	// AttrStage is a stage's name ("map", or what [Name] gave).
	AttrStage = attribute.Key("strom.stage")
	// AttrStageIndex is a stage's place in the pipeline, from 0 at the
	// source, so two stages of one name stay apart.
	AttrStageIndex = attribute.Key("strom.stage.index")
	// AttrOffset is the offset of a batch's first record.
	AttrOffset = attribute.Key("strom.offset")
	// AttrPositions is how many positions a checkpoint save saved.
	AttrPositions = attribute.Key("strom.checkpoint.positions")
)

// telSystem is the messaging.system of everything strom reports.
var telSystem = semconv.MessagingSystemKey.String("strom")

// HighWatermarker is implemented by sources that know the high watermark
// (next offset) of the partitions they read, such as source.Partition and
// source.Topic: the pipeline reports it, and the lag, per partition. It is
// called from the metrics reader's goroutine while Read runs, so it must be
// safe for concurrent use; ok is false for a partition the source does not
// read or has not opened yet.
type HighWatermarker interface {
	HighWatermark(topic string, partition int32) (hwm int64, ok bool)
}

// WithMeterProvider makes the pipeline report its metrics to mp instead of
// the global MeterProvider (otel.GetMeterProvider() as Run finds it: a
// pipeline started before the program installed one with
// otel.SetMeterProvider reports nothing). A nil mp keeps the global one.
// See the package doc, "Metrics and traces".
func WithMeterProvider(mp metric.MeterProvider) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.meterProvider = mp })
}

// WithTracerProvider makes the pipeline start its spans on tp instead of
// the global TracerProvider (otel.GetTracerProvider() as Run finds it: a
// pipeline started before the program installed one with
// otel.SetTracerProvider starts no span). A nil tp keeps the global one.
// See the package doc, "Metrics and traces".
func WithTracerProvider(tp trace.TracerProvider) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.tracerProvider = tp })
}

// WithName names the pipeline in its metrics and spans, as the attribute
// messaging.consumer.group.name: the name of the consumer whose positions
// its checkpoint store keeps, as a Kafka consumer group's. Two pipelines
// of one process should have different names, or their series add up. The
// default, "", leaves the attribute out.
func WithName(name string) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.name = name })
}

// otelGlobalPkg is the package of the stand-ins otel.GetMeterProvider and
// otel.GetTracerProvider return until otel.SetMeterProvider and
// otel.SetTracerProvider install providers (after which they return those
// instead). Judging by the type, not by comparing with what the getters
// returned when this package was initialised, keeps a provider installed
// before that (by an init function that runs first) counted as installed.
const otelGlobalPkg = "go.opentelemetry.io/otel/internal/global"

// isOtelStandIn reports whether v is one of otel's global stand-ins.
func isOtelStandIn(v any) bool {
	t := reflect.TypeOf(v)
	if t == nil {
		return true
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == otelGlobalPkg
}

// meterInstalled and tracerInstalled report whether a provider reports
// somewhere: neither a no-op nor the global stand-in.
func meterInstalled(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return false
	}
	return !isOtelStandIn(mp)
}

func tracerInstalled(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return false
	}
	return !isOtelStandIn(tp)
}

// telemetry is one Run's telemetry. Record and stage counts, positions
// and lag are asynchronous instruments: the callback of the run's [telHub]
// reads the counters and trackers the pipeline keeps anyway, so they cost
// a record nothing. Durations are recorded once per batch (never per
// record), and not even timed while no reader wants them
// (Float64Histogram.Enabled). Spans per batch are started only when a
// tracer provider is installed (tracing): the global stand-in would
// allocate a context per batch.
type telemetry struct {
	*telInstruments
	hub *telHub
	rt  *runtime

	stages    []attribute.Set         // per stage index: its attributes
	stageOpts [][]metric.RecordOption // the same, as the option of a Record
	hws       []HighWatermarker       // the sources that know high watermarks

	saveOpts        []metric.RecordOption
	saveAddOpts     []metric.AddOption
	saveFailOpts    []metric.RecordOption
	saveFailAddOpts []metric.AddOption

	tracer  trace.Tracer
	tracing bool                 // a tracer provider is installed: spans are started
	group   []attribute.KeyValue // messaging.consumer.group.name, when named
}

var telCtx = context.Background()

// newTelemetry returns the telemetry of one Run of rt's pipeline, on the
// providers of its config, and adds it to the hub of its meter provider,
// whose callback reports it until close. With no provider installed (both
// the global stand-ins, or no-ops) it returns nil, and the run measures
// nothing: not even the attribute sets of its stages are built.
func newTelemetry(rt *runtime) *telemetry {
	p := rt.p
	mp := p.cfg.meterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	tp := p.cfg.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tracing := tracerInstalled(tp)
	if !tracing && !meterInstalled(mp) {
		return nil
	}
	h := telHubFor(mp)
	t := &telemetry{telInstruments: h.inst, hub: h, rt: rt, tracer: tp.Tracer(ScopeName), tracing: tracing}
	if p.cfg.name != "" {
		t.group = []attribute.KeyValue{semconv.MessagingConsumerGroupName(p.cfg.name)}
	}
	base := attribute.NewSet(append([]attribute.KeyValue{telSystem}, t.group...)...)
	t.saveOpts = []metric.RecordOption{metric.WithAttributeSet(base)}
	t.saveAddOpts = []metric.AddOption{metric.WithAttributeSet(base)}
	failed := attribute.NewSet(append([]attribute.KeyValue{telSystem, semconv.ErrorTypeOther}, t.group...)...)
	t.saveFailOpts = []metric.RecordOption{metric.WithAttributeSet(failed)}
	t.saveFailAddOpts = []metric.AddOption{metric.WithAttributeSet(failed)}
	if len(p.stores) > 0 {
		// Zero-valued series from the start, so an alert on saves or
		// failures sees 0 rather than no series until the first one.
		t.saves.Add(telCtx, 0, t.saveAddOpts...)
		t.saveFailures.Add(telCtx, 0, t.saveFailAddOpts...)
	}

	t.stages = make([]attribute.Set, len(p.stages))
	t.stageOpts = make([][]metric.RecordOption, len(p.stages))
	for i, c := range p.stages {
		t.stages[i] = attribute.NewSet(append([]attribute.KeyValue{AttrStage.String(c.name), AttrStageIndex.Int(i)}, t.group...)...)
		t.stageOpts[i] = []metric.RecordOption{metric.WithAttributeSet(t.stages[i])}
	}
	for _, src := range p.sources {
		if hw, ok := src.(HighWatermarker); ok {
			t.hws = append(t.hws, hw)
		}
	}
	h.add(t)
	return t
}

// observe reports the run's counters and, per partition, its position,
// high watermark and lag.
func (t *telemetry) observe(o metric.Observer) {
	in := t.telInstruments
	for i, c := range t.rt.p.stages {
		a := metric.WithAttributeSet(t.stages[i])
		o.ObserveInt64(in.in, c.in.Load(), a)
		o.ObserveInt64(in.out, c.out.Load(), a)
		o.ObserveInt64(in.skipped, c.skipped.Load(), a)
		o.ObserveInt64(in.dead, c.deadLettered.Load(), a)
		o.ObserveInt64(in.failures, c.failed.Load(), a)
		o.ObserveInt64(in.retries, c.retried.Load(), a)
		o.ObserveInt64(in.late, c.late.Load(), a)
	}
	for _, pt := range t.rt.tracker.Partitions(nil) {
		low, begun, ok := pt.Progress()
		if !ok {
			continue
		}
		a := metric.WithAttributeSet(t.partitionAttrs(pt.Topic(), pt.ID()))
		o.ObserveInt64(in.consumed, begun, a)
		o.ObserveInt64(in.position, low, a)
		stalled := int64(0)
		if t.rt.p.obs.stalled(pt.Topic(), pt.ID()) {
			stalled = 1
		}
		o.ObserveInt64(in.stalled, stalled, a)
		for _, h := range t.hws {
			if hw, ok := h.HighWatermark(pt.Topic(), pt.ID()); ok {
				o.ObserveInt64(in.hwm, hw, a)
				o.ObserveInt64(in.lag, max(hw-low, 0), a)
				break
			}
		}
	}
}

// close takes the run out of its hub, which from then on reports its final
// counts (not its positions) with those of the runs that returned before.
func (t *telemetry) close() {
	if t != nil {
		t.hub.remove(t)
	}
}

// partitionAttrs are the attributes of a partition's measurements.
func (t *telemetry) partitionAttrs(topic string, partition int32) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{telSystem,
		semconv.MessagingDestinationName(topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(partition)))}, t.group...)...)
}

// stageStart returns the time a stage starts on a batch when stage
// durations are wanted, the zero time otherwise.
func (t *telemetry) stageStart() time.Time {
	if t != nil && t.stageDur.Enabled(telCtx) {
		return time.Now()
	}
	return time.Time{}
}

// stageEnd records the duration of the batch stage idx began at start.
func (t *telemetry) stageEnd(idx int, start time.Time) {
	if !start.IsZero() {
		t.stageDur.Record(telCtx, time.Since(start).Seconds(), t.stageOpts[idx]...)
	}
}

// telSourceState is what a source goroutine keeps for its batches: the
// attributes of the partitions it saw, so a batch allocates none.
type telSourceState struct {
	last      telPartition
	lastOpts  []metric.RecordOption
	byPart    map[telPartition][]metric.RecordOption
	partAttrs attribute.Set
}

type telPartition struct {
	topic     string
	partition int32
}

// telBatch is one source batch in flight: the context its stages get, its
// span, when it began (zero when not timed) and the attributes of its
// partition.
type telBatch struct {
	ctx   context.Context
	span  trace.Span
	start time.Time
	opts  []metric.RecordOption
}

// The methods of a telemetry are no-ops on a nil one: a runtime built
// without Run's telemetry measures nothing.

// beginBatch starts the measurement of a source batch of n records whose
// first record is topic, partition, offset. It starts a span only when
// tracing is installed, and times it only when its duration is wanted;
// otherwise it returns ctx untouched at the cost of one Enabled call.
func (t *telemetry) beginBatch(ctx context.Context, bt *telSourceState, topic string, partition int32, offset int64, n int) telBatch {
	b := telBatch{ctx: ctx}
	if t == nil {
		return b
	}
	timed := t.processDur.Enabled(telCtx)
	if !timed && !t.tracing {
		return b
	}
	key := telPartition{topic, partition}
	if bt.lastOpts == nil || bt.last != key {
		if bt.byPart == nil {
			bt.byPart = make(map[telPartition][]metric.RecordOption)
		}
		opts, ok := bt.byPart[key]
		if !ok {
			kv := append([]attribute.KeyValue{telSystem, semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process")}, t.group...)
			if topic != "" {
				kv = append(kv, semconv.MessagingDestinationName(topic),
					semconv.MessagingDestinationPartitionID(strconv.Itoa(int(partition))))
			}
			opts = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
			bt.byPart[key] = opts
		}
		bt.last, bt.lastOpts = key, opts
	}
	b.opts = bt.lastOpts
	if t.tracing {
		name := "process"
		if topic != "" {
			name = "process " + topic
		}
		kv := append([]attribute.KeyValue{telSystem, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"), semconv.MessagingBatchMessageCount(n)}, t.group...)
		if topic != "" {
			kv = append(kv, semconv.MessagingDestinationName(topic),
				semconv.MessagingDestinationPartitionID(strconv.Itoa(int(partition))), AttrOffset.Int64(offset))
		}
		b.ctx, b.span = t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(kv...))
	}
	if timed {
		b.start = time.Now()
	}
	return b
}

// endBatch ends what beginBatch started; err is what pushing the batch
// returned.
func (t *telemetry) endBatch(b telBatch, err error) {
	if !b.start.IsZero() {
		t.processDur.Record(telCtx, time.Since(b.start).Seconds(), b.opts...)
	}
	if b.span != nil {
		if err != nil {
			b.span.RecordError(err)
			b.span.SetStatus(codes.Error, err.Error())
		}
		b.span.End()
	}
}

// beginSave starts the span of a round of checkpoint saves of n positions.
func (t *telemetry) beginSave(ctx context.Context, n int) (context.Context, trace.Span, time.Time) {
	if t == nil {
		return ctx, nil, time.Time{}
	}
	if !t.tracing {
		return ctx, nil, time.Now()
	}
	ctx, span := t.tracer.Start(ctx, SpanCheckpointSave, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append([]attribute.KeyValue{telSystem, AttrPositions.Int(n)}, t.group...)...))
	return ctx, span, time.Now()
}

// endSave counts a round of saves and ends its span.
func (t *telemetry) endSave(span trace.Span, start time.Time, err error) {
	if t == nil {
		return
	}
	// The duration before the count: a collection between the two then
	// never shows a save without its duration (TestMetricsCountRecordsPerStage
	// caught one under two CPU hogs, the count 1 and no histogram yet).
	d := time.Since(start).Seconds()
	if err != nil {
		t.saveDur.Record(telCtx, d, t.saveFailOpts...)
		t.saveFailures.Add(telCtx, 1, t.saveFailAddOpts...)
	} else {
		t.saveDur.Record(telCtx, d, t.saveOpts...)
		t.saves.Add(telCtx, 1, t.saveAddOpts...)
	}
	if span != nil {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// telDurationBuckets are the bucket bounds of the duration histograms, in
// seconds: 10 µs to 10 s, for batches of one record to slow sinks.
var telDurationBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newHistogram(m metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(telDurationBuckets...))
	telHandle(err)
	if h == nil {
		return metricnoop.Float64Histogram{}
	}
	return h
}

func newCounter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	telHandle(err)
	if c == nil {
		return metricnoop.Int64Counter{}
	}
	return c
}

func newObservable(m metric.Meter, name, unit, desc string) metric.Int64ObservableCounter {
	c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	telHandle(err)
	if c == nil {
		return metricnoop.Int64ObservableCounter{}
	}
	return c
}

func newGauge(m metric.Meter, name, unit, desc string) metric.Int64ObservableGauge {
	g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	telHandle(err)
	if g == nil {
		return metricnoop.Int64ObservableGauge{}
	}
	return g
}

// telHandle reports a telemetry error to the OpenTelemetry error handler.
func telHandle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// timeBatch returns the time the stage starts on a batch, zero when stage
// durations are not wanted; doneBatch records the duration.
func (sr *stageRun) timeBatch() time.Time { return sr.rt.tel.stageStart() }

func (sr *stageRun) doneBatch(start time.Time) { sr.rt.tel.stageEnd(sr.ctr.idx, start) }
