package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/metrictest"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// hwmSource is a streamtest.Slice that also tells the pipeline its
// partition's high watermark: the length of the slice.
type hwmSource struct {
	*streamtest.SliceSource[int]
	hwm int64
}

func (s hwmSource) HighWatermark(topic string, partition int32) (int64, bool) {
	return s.hwm, topic == streamtest.Topic && partition == streamtest.Partition
}

var (
	stageAttr = func(name string, idx int) []attribute.KeyValue {
		return []attribute.KeyValue{stream.AttrStage.String(name), stream.AttrStageIndex.Int(idx)}
	}
	partitionAttrs = []attribute.KeyValue{
		attribute.String("messaging.system", "strom"),
		attribute.String("messaging.destination.name", streamtest.Topic),
		attribute.String("messaging.destination.partition.id", "0"),
		attribute.String("messaging.consumer.group.name", "billing"),
	}
)

// waitFor collects reader until cond holds of what it collected, and
// returns that collection.
func waitFor(t *testing.T, collect func() metrictest.Metrics, cond func(m metrictest.Metrics) bool) metrictest.Metrics {
	t.Helper()
	var m metrictest.Metrics
	require.Eventually(t, func() bool {
		m = collect()
		return cond(m)
	}, 5*time.Second, time.Millisecond)
	return m
}

// TestMetricsCountRecordsPerStage ensures the stage counters reach the
// meter provider with their exact values: 100 records, a filter that drops
// 30, a map that fails on 10 of the rest under Skip, a sink that gets 60;
// and that the checkpoint saves are counted and timed.
func TestMetricsCountRecordsPerStage(t *testing.T) {
	mp, reader := metrictest.Provider(t)
	store := &streamtest.RecordingStore{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := streamtest.Collect[int]()
	p := stream.From[int](streamtest.Slice(ints(100), streamtest.Follow()),
		stream.WithMeterProvider(mp), stream.WithName("billing")).
		Filter(func(_ context.Context, v int) (bool, error) { return v%10 >= 3, nil }).
		Map(func(_ context.Context, v int) (int, error) {
			if v%10 == 5 {
				return 0, errBoom
			}
			return v, nil
		}, stream.Skip(), stream.Name("price")).
		To(sink).
		Checkpointing(store, stream.CheckpointEachBatch())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	group := attribute.String("messaging.consumer.group.name", "billing")
	m := waitFor(t, func() metrictest.Metrics { return metrictest.Collect(t, reader) }, func(m metrictest.Metrics) bool {
		out, _ := m.Int(stream.MetricStageRecordsOut, stageAttr("sink", 2)...)
		pos, _ := m.Int(stream.MetricPartitionPosition, partitionAttrs...)
		saves, _ := m.Int(stream.MetricCheckpointSaves, group)
		// The earlier stages' counts too: under load a collection once
		// showed the sink's 60 with the filter's and price's counts at 0
		// (make test, twice on 2026-12-01; not reproduced alone). Waiting
		// for them keeps the test about the values; a count that never
		// arrives still fails it.
		fin, _ := m.Int(stream.MetricStageRecordsIn, append(stageAttr("filter", 0), group)...)
		fout, _ := m.Int(stream.MetricStageRecordsOut, append(stageAttr("filter", 0), group)...)
		pout, _ := m.Int(stream.MetricStageRecordsOut, append(stageAttr("price", 1), group)...)
		return out == 60 && pos == 100 && saves > 0 && fin == 100 && fout == 70 && pout == 60
	})
	for _, c := range []struct {
		metric string
		stage  []attribute.KeyValue
		want   int64
	}{
		{stream.MetricStageRecordsIn, stageAttr("filter", 0), 100},
		{stream.MetricStageRecordsOut, stageAttr("filter", 0), 70},
		{stream.MetricStageRecordsIn, stageAttr("price", 1), 70},
		{stream.MetricStageRecordsOut, stageAttr("price", 1), 60},
		{stream.MetricStageRecordsSkipped, stageAttr("price", 1), 10},
		{stream.MetricStageFailures, stageAttr("price", 1), 10},
		{stream.MetricStageRecordsDeadLettered, stageAttr("price", 1), 0},
		{stream.MetricStageRetries, stageAttr("price", 1), 0},
		{stream.MetricStageRecordsIn, stageAttr("sink", 2), 60},
		{stream.MetricStageRecordsSkipped, stageAttr("sink", 2), 0},
	} {
		got, ok := m.Int(c.metric, append(c.stage, group)...)
		if assert.True(t, ok, "%s %v reported", c.metric, c.stage) {
			assert.Equal(t, c.want, got, "%s %v", c.metric, c.stage)
		}
	}
	consumed, ok := m.Int(stream.MetricConsumedMessages, partitionAttrs...)
	require.True(t, ok)
	assert.Equal(t, int64(100), consumed)
	assert.Len(t, sink.Values(), 60)

	saves, _ := m.Int(stream.MetricCheckpointSaves, group)
	h, ok := m.Histogram(stream.MetricCheckpointDuration, group)
	require.True(t, ok, "checkpoint durations reported")
	assert.GreaterOrEqual(t, h.Count, uint64(saves), "one duration per save (the last ones may land between two collections)")
	failures, ok := m.Int(stream.MetricCheckpointFailures, attribute.String("error.type", "_OTHER"), group)
	assert.True(t, ok, "the failures series exists (at 0) before any failure, for alerts")
	assert.Zero(t, failures)

	batches, ok := m.Histogram(stream.MetricProcessDuration, partitionAttrs...)
	require.True(t, ok, "messaging.process.duration reported")
	assert.Equal(t, uint64(1), batches.Count, "one source batch of 100 records")
	for i, name := range []string{"filter", "price", "sink"} {
		d, ok := m.Histogram(stream.MetricStageDuration, stageAttr(name, i)...)
		require.True(t, ok, "strom.stage.duration of %s", name)
		assert.Equal(t, uint64(1), d.Count, "one batch through %s", name)
	}

	cancel()
	require.NoError(t, <-done)
	m = metrictest.Collect(t, reader)
	in, _ := m.Int(stream.MetricStageRecordsIn, append(stageAttr("filter", 0), group)...)
	assert.Equal(t, int64(100), in, "a pipeline that returned still reports its final counts")
	assert.Zero(t, m.Points(stream.MetricPartitionPosition), "but not its positions")
}

// TestMetricsCountersAddUpAcrossRuns ensures the counters of a pipeline
// name keep growing over runs, as Forever's restarts make them, instead of
// starting again at zero.
func TestMetricsCountersAddUpAcrossRuns(t *testing.T) {
	mp, reader := metrictest.Provider(t)
	for range 3 {
		err := stream.From[int](streamtest.Slice(ints(40)), stream.WithMeterProvider(mp), stream.WithName("billing")).
			Tap(func(context.Context, int) error { return nil }).
			Run(context.Background())
		require.NoError(t, err)
	}
	m := metrictest.Collect(t, reader)
	in, ok := m.Int(stream.MetricStageRecordsIn, stageAttr("tap", 0)...)
	require.True(t, ok)
	assert.Equal(t, int64(120), in)
	consumed, ok := m.Int(stream.MetricConsumedMessages, partitionAttrs...)
	require.True(t, ok)
	assert.Equal(t, int64(120), consumed)
	assert.Equal(t, 1, m.Points(stream.MetricStageRecordsIn), "one series, not one per run")
}

// TestMetricsLagIsHighWatermarkMinusPosition ensures a partition's lag is
// its high watermark minus its position, the lowest offset not finished,
// while a record holds the position back, and 0 once everything finished.
func TestMetricsLagIsHighWatermarkMinusPosition(t *testing.T) {
	mp, reader := metrictest.Provider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	src := hwmSource{streamtest.Slice(ints(100), streamtest.Follow(), streamtest.BatchSize(100)), 120}
	p := stream.From[int](src, stream.WithMeterProvider(mp), stream.WithName("billing")).
		Map(func(ctx context.Context, v int) (int, error) {
			if v == 60 {
				select {
				case <-release:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			return v, nil
		}, stream.Parallel(4))
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	collect := func() metrictest.Metrics { return metrictest.Collect(t, reader) }
	m := waitFor(t, collect, func(m metrictest.Metrics) bool {
		out, _ := m.Int(stream.MetricStageRecordsOut, stageAttr("map", 0)...)
		return out == 99
	})
	pos, ok := m.Int(stream.MetricPartitionPosition, partitionAttrs...)
	require.True(t, ok)
	assert.Equal(t, int64(60), pos, "record 60 is not finished")
	hwm, ok := m.Int(stream.MetricPartitionHighWatermark, partitionAttrs...)
	require.True(t, ok)
	assert.Equal(t, int64(120), hwm)
	lag, ok := m.Int(stream.MetricPartitionLag, partitionAttrs...)
	require.True(t, ok)
	assert.Equal(t, hwm-pos, lag)

	close(release)
	m = waitFor(t, collect, func(m metrictest.Metrics) bool {
		pos, _ := m.Int(stream.MetricPartitionPosition, partitionAttrs...)
		return pos == 100
	})
	lag, _ = m.Int(stream.MetricPartitionLag, partitionAttrs...)
	assert.Equal(t, int64(20), lag, "120 - 100")
	cancel()
	require.NoError(t, <-done)
}

// TestMetricsCountFailedCheckpointSaves ensures a save that fails is
// counted as a failure with its duration, and not as a save.
func TestMetricsCountFailedCheckpointSaves(t *testing.T) {
	mp, reader := metrictest.Provider(t)
	store := &streamtest.RecordingStore{}
	store.FailSaveAt(1, errDisk)
	err := stream.From[int](streamtest.Slice(ints(10)), stream.WithMeterProvider(mp)).
		Checkpointing(store, stream.CheckpointEachBatch()).
		Run(context.Background())
	require.ErrorIs(t, err, errDisk)
	m := metrictest.Collect(t, reader)
	failures, ok := m.Int(stream.MetricCheckpointFailures, attribute.String("error.type", "_OTHER"))
	require.True(t, ok)
	assert.Equal(t, int64(1), failures)
	saves, _ := m.Int(stream.MetricCheckpointSaves)
	assert.Zero(t, saves)
	h, ok := m.Histogram(stream.MetricCheckpointDuration, attribute.String("error.type", "_OTHER"))
	require.True(t, ok)
	assert.Equal(t, uint64(1), h.Count)
}

// TestTracesSpanEachBatchAndCheckpointSave ensures a traced pipeline starts
// one consumer span per source batch, parent of what the stage functions
// start, and one span per checkpoint save; a failed save's span carries
// the error.
func TestTracesSpanEachBatchAndCheckpointSave(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	store := &streamtest.RecordingStore{}
	tracer := tp.Tracer("handler")
	err := stream.From[int](streamtest.Slice(ints(25), streamtest.BatchSize(10)), stream.WithTracerProvider(tp), stream.WithName("billing")).
		Tap(func(ctx context.Context, v int) error {
			if v%10 == 0 {
				_, span := tracer.Start(ctx, "handle")
				span.End()
			}
			return nil
		}).
		Checkpointing(store, stream.CheckpointEachBatch()).
		Run(context.Background())
	require.NoError(t, err)

	var batches, saves []sdktrace.ReadOnlySpan
	handles := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "process " + streamtest.Topic:
			batches = append(batches, s)
		case stream.SpanCheckpointSave:
			saves = append(saves, s)
		case "handle":
			handles[s.Parent().SpanID()] = s
		}
	}
	require.Len(t, batches, 3, "batches of 10, 10 and 5")
	var total int64
	for _, b := range batches {
		assert.Equal(t, trace.SpanKindConsumer, b.SpanKind())
		attrs := attribute.NewSet(b.Attributes()...)
		n, _ := attrs.Value("messaging.batch.message_count")
		total += n.AsInt64()
		g, _ := attrs.Value("messaging.consumer.group.name")
		assert.Equal(t, "billing", g.AsString())
		_, ok := handles[b.SpanContext().SpanID()]
		assert.True(t, ok, "the handler's span is a child of its batch's span")
	}
	assert.Equal(t, int64(25), total)
	assert.Len(t, saves, 3, "a save after each batch")

	rec2 := tracetest.NewSpanRecorder()
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec2))
	defer tp2.Shutdown(context.Background())
	failing := &streamtest.RecordingStore{}
	failing.FailSaveAt(1, errDisk)
	err = stream.From[int](streamtest.Slice(ints(5)), stream.WithTracerProvider(tp2)).
		Checkpointing(failing, stream.CheckpointEachBatch()).
		Run(context.Background())
	require.True(t, errors.Is(err, errDisk))
	var failed bool
	for _, s := range rec2.Ended() {
		if s.Name() == stream.SpanCheckpointSave {
			failed = failed || s.Status().Code.String() == "Error"
		}
	}
	assert.True(t, failed, "the failed save's span has status Error")
}

// TestMetricNamesFollowSemconv ensures the metrics the messaging semantic
// conventions name are called as they say.
func TestMetricNamesFollowSemconv(t *testing.T) {
	assert.Equal(t, messagingconv.ClientConsumedMessages{}.Name(), stream.MetricConsumedMessages)
	assert.Equal(t, messagingconv.ProcessDuration{}.Name(), stream.MetricProcessDuration)
}

// TestTelemetryOffCostsNoAllocation ensures a pipeline without providers
// (the global stand-ins) allocates nothing per record: 10,000 records
// allocate no more than 100 do.
func TestTelemetryOffCostsNoAllocation(t *testing.T) {
	run := func(n int) float64 {
		values := ints(n)
		return testing.AllocsPerRun(5, func() {
			err := stream.From[int](streamtest.Slice(values, streamtest.BatchSize(1))).
				Map(func(_ context.Context, v int) (int, error) { return v, nil }).
				Checkpointing(&checkpoint.MemoryStore{}, stream.CheckpointInterval(0)).
				Run(context.Background())
			require.NoError(t, err)
		})
	}
	small, large := run(100), run(10_000)
	assert.LessOrEqual(t, large, small+50, "allocations grow with records: %v for 100, %v for 10,000", small, large)
}
