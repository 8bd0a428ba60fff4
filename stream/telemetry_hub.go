package stream

import (
	"context"
	"reflect"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// telInstruments are the pipeline's telInstruments on one meter provider.
type telInstruments struct {
	in, out, skipped, dead, failures, retries metric.Int64ObservableCounter
	late                                      metric.Int64ObservableCounter
	consumed                                  metric.Int64ObservableCounter
	position, hwm, lag, stalled               metric.Int64ObservableGauge

	stageDur, processDur, saveDur metric.Float64Histogram
	saves, saveFailures           metric.Int64Counter
}

func newTelInstruments(m metric.Meter) *telInstruments {
	return &telInstruments{
		in:       newObservable(m, MetricStageRecordsIn, "{record}", "Records that entered the stage."),
		out:      newObservable(m, MetricStageRecordsOut, "{record}", "Records the stage passed on (a filter's kept ones, a flat-map's outputs)."),
		skipped:  newObservable(m, MetricStageRecordsSkipped, "{record}", "Records dropped by Skip after the stage's function failed."),
		dead:     newObservable(m, MetricStageRecordsDeadLettered, "{record}", "Records written to the dead-letter sink after the stage's function failed."),
		failures: newObservable(m, MetricStageFailures, "{call}", "Calls of the stage's function (a sink: Writes) that failed, each retry included."),
		retries:  newObservable(m, MetricStageRetries, "{call}", "Calls of the stage's function that were retries, failed or not."),
		late:     newObservable(m, MetricStageRecordsLate, "{record}", "A window's late records: sent to its late sink, dropped, or the one that stopped the pipeline."),
		consumed: newObservable(m, MetricConsumedMessages, "{message}", "Records with lineage read from the partition by the pipeline, each again when it is read again."),
		position: newGauge(m, MetricPartitionPosition, "{offset}", "The partition's position: its lowest offset not yet finished, which the next checkpoint saves (where the pipeline resumes if it stops now)."),
		hwm:      newGauge(m, MetricPartitionHighWatermark, "{offset}", "The partition's high watermark (next offset), from the source."),
		lag:      newGauge(m, MetricPartitionLag, "{message}", "High watermark minus position: records of the partition not yet finished by the pipeline."),
		stalled:  newGauge(m, MetricPartitionStalled, "{partition}", "1 while the partition is stalled: behind, and its position has not moved for the pipeline's StallAfter limit (30 s by default); else 0."),

		stageDur:     newHistogram(m, MetricStageDuration, "Time a stage spent on one batch: its function over every record of the batch (a sink: its Write), without the stages after it. Not recorded for Parallel and KeyOrdered stages."),
		processDur:   newHistogram(m, MetricProcessDuration, "Time from a source batch entering the pipeline to the first stage with goroutines of its own (Parallel, KeyOrdered, Batch's linger) or the end: in a sequential pipeline, the handling of the whole batch."),
		saveDur:      newHistogram(m, MetricCheckpointDuration, "Time of one round of checkpoint saves: every position that moved, to every store."),
		saves:        newCounter(m, MetricCheckpointSaves, "{save}", "Rounds of checkpoint saves that saved every position that moved to every store."),
		saveFailures: newCounter(m, MetricCheckpointFailures, "{save}", "Rounds of checkpoint saves that failed (the pipeline then stops)."),
	}
}

func (in *telInstruments) observables() []metric.Observable {
	return []metric.Observable{in.in, in.out, in.skipped, in.dead, in.failures, in.retries, in.late,
		in.consumed, in.position, in.hwm, in.lag, in.stalled}
}

// telHub is what the pipelines reporting to one meter provider share: the
// telInstruments, created once, and one callback that reports every running
// pipeline and the final counts of those that returned. Keeping those makes
// the counters of a pipeline name monotonic across runs: Forever and
// ConsumeForever build a new pipeline after each source failure, and a
// batch job's counts are still there for the exporter's last collection
// after Run returned. Memory is one entry per series, not per run.
type telHub struct {
	inst *telInstruments
	reg  metric.Registration

	mu       sync.Mutex
	runs     map[*telemetry]struct{}
	stages   map[attribute.Distinct]*telFinalStage
	consumed map[attribute.Distinct]*telFinalCount
}

// telFinalStage is the sum of a stage's counters over the runs that returned.
type telFinalStage struct {
	set                                             attribute.Set
	in, out, skipped, deadLettered, failed, retried int64
	late                                            int64
}

// telFinalCount is the sum of a partition's consumed records over the runs
// that returned.
type telFinalCount struct {
	set attribute.Set
	n   int64
}

var (
	telHubsMu sync.Mutex
	telHubs   = map[metric.MeterProvider]*telHub{}
)

// telHubFor returns the hub of mp, creating it on first use. The telHubs of
// providers that are comparable (all real ones: the SDK's is a pointer)
// live as long as the process; another gets a hub of its own per call,
// which then reports only the one run.
func telHubFor(mp metric.MeterProvider) *telHub {
	if !reflect.TypeOf(mp).Comparable() {
		return newTelHub(mp)
	}
	telHubsMu.Lock()
	defer telHubsMu.Unlock()
	h := telHubs[mp]
	if h == nil {
		h = newTelHub(mp)
		telHubs[mp] = h
	}
	return h
}

func newTelHub(mp metric.MeterProvider) *telHub {
	m := mp.Meter(ScopeName)
	h := &telHub{inst: newTelInstruments(m), runs: map[*telemetry]struct{}{},
		stages: map[attribute.Distinct]*telFinalStage{}, consumed: map[attribute.Distinct]*telFinalCount{}}
	var err error
	h.reg, err = m.RegisterCallback(h.observe, h.inst.observables()...)
	telHandle(err)
	return h
}

func (h *telHub) add(t *telemetry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs[t] = struct{}{}
}

// remove takes t out of the running pipelines and adds its counts to the
// final ones, in one step under the lock the callback takes, so no
// collection sees them twice or not at all.
func (h *telHub) remove(t *telemetry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.runs, t)
	for i, c := range t.rt.p.stages {
		set := t.stages[i]
		f := h.stages[set.Equivalent()]
		if f == nil {
			f = &telFinalStage{set: set}
			h.stages[set.Equivalent()] = f
		}
		f.in += c.in.Load()
		f.out += c.out.Load()
		f.skipped += c.skipped.Load()
		f.deadLettered += c.deadLettered.Load()
		f.failed += c.failed.Load()
		f.retried += c.retried.Load()
		f.late += c.late.Load()
	}
	for _, pt := range t.rt.tracker.Partitions(nil) {
		_, begun, ok := pt.Progress()
		if !ok {
			continue
		}
		set := t.partitionAttrs(pt.Topic(), pt.ID())
		f := h.consumed[set.Equivalent()]
		if f == nil {
			f = &telFinalCount{set: set}
			h.consumed[set.Equivalent()] = f
		}
		f.n += begun
	}
}

// observe is the hub's callback. Observations of one series from several
// runs (a final count and a running pipeline of the same name, or two
// pipelines without a name) add up: the SDK sums what an asynchronous
// counter observes for one attribute set in one collection.
func (h *telHub) observe(_ context.Context, o metric.Observer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := h.inst
	for _, f := range h.stages {
		a := metric.WithAttributeSet(f.set)
		o.ObserveInt64(in.in, f.in, a)
		o.ObserveInt64(in.out, f.out, a)
		o.ObserveInt64(in.skipped, f.skipped, a)
		o.ObserveInt64(in.dead, f.deadLettered, a)
		o.ObserveInt64(in.failures, f.failed, a)
		o.ObserveInt64(in.retries, f.retried, a)
		o.ObserveInt64(in.late, f.late, a)
	}
	for _, f := range h.consumed {
		o.ObserveInt64(in.consumed, f.n, metric.WithAttributeSet(f.set))
	}
	for t := range h.runs {
		t.observe(o)
	}
	return nil
}
