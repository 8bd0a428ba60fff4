package streamtest

import (
	"context"

	"github.com/strom-dev/strom/stream"
)

// Result is what [RunPipeline] observed of one run.
type Result[U any] struct {
	// Out is every value the pipeline's end wrote to the collecting sink,
	// in write order.
	Out []U
	// Saves is every position saved during this run, in order (a store
	// given with WithStore may hold earlier ones; they are not repeated).
	Saves []Save
	// Position is the store's position for ([Topic], [Partition]) after the
	// run, the next offset to read, or -1 when none was ever saved.
	Position int64
	// Err is exactly what Run returned.
	Err error
	// Stats are Stream.Stats after the run: every stage in pipeline order,
	// the last being the collecting sink RunPipeline appends ("sink").
	Stats []stream.StageStats
}

// Stage returns the counters of the first stage named name (a stream.Stage*
// constant, or what stream.Name gave), or zero counters with that name when
// there is none.
func (r Result[U]) Stage(name string) stream.StageStats {
	for _, s := range r.Stats {
		if s.Name == name {
			return s
		}
	}
	return stream.StageStats{Name: name}
}

// RunOption configures [RunPipeline].
type RunOption func(*runConfig)

type runConfig struct {
	slice    []Option
	collect  []Option
	pipeline []stream.Option
	store    *RecordingStore
}

// WithClock runs the pipeline on c (stream.WithClock), typically a [Clock].
// Something must advance a fake clock while RunPipeline runs, for example a
// goroutine that calls [Clock.WaitForTimers] then [Clock.Advance].
func WithClock(c stream.Clock) RunOption {
	return func(rc *runConfig) { rc.pipeline = append(rc.pipeline, stream.WithClock(c)) }
}

// WithStore checkpoints to s instead of a new [RecordingStore], and resumes
// the source from it: a second RunPipeline with the same store continues
// where the first stopped, as a restarted consumer does. Use it also to
// inject store faults (FailSaveAt, FailLoad).
func WithStore(s *RecordingStore) RunOption {
	return func(rc *runConfig) { rc.store = s }
}

// WithSliceOptions passes opts ([BatchSize], [FailAt], [Follow]) to the
// [Slice] source. With Follow the pipeline ends only when ctx is cancelled.
func WithSliceOptions(opts ...Option) RunOption {
	return func(rc *runConfig) { rc.slice = append(rc.slice, opts...) }
}

// WithCollectOptions passes opts ([FailAt]) to the [Collect] sink.
func WithCollectOptions(opts ...Option) RunOption {
	return func(rc *runConfig) { rc.collect = append(rc.collect, opts...) }
}

// WithPipelineOptions passes opts to stream.From (WithDrainTimeout,
// WithMaxInFlight, ...).
func WithPipelineOptions(opts ...stream.Option) RunOption {
	return func(rc *runConfig) { rc.pipeline = append(rc.pipeline, opts...) }
}

// RunPipeline runs the pipeline build makes of a [Slice] source of values to
// completion and returns what came out of it. It builds
//
//	build(stream.From(Slice(values), ...)).
//		To(Collect[U]()).
//		Checkpointing(store, stream.CheckpointEachBatch(), stream.CheckpointInterval(0)).
//		Run(ctx)
//
// after resuming the source from store (a new [RecordingStore] unless
// [WithStore] gives one), so the result is deterministic: a position is
// saved after every batch the source returns (and, with asynchronous
// stages, whenever records finish), never on a timer, and the only timers
// on a fake clock are the pipeline's own stages'. These checkpoint options
// override any that build passes to Checkpointing.
//
// A failing Resume is returned in Err without running. A panic of the
// pipeline (a stage without stream.Recover) is not recovered: it reaches
// the caller, as from Run.
func RunPipeline[T, U any](ctx context.Context, values []T, build func(*stream.Stream[T]) *stream.Stream[U], opts ...RunOption) Result[U] {
	var rc runConfig
	for _, o := range opts {
		if o != nil {
			o(&rc)
		}
	}
	store := rc.store
	if store == nil {
		store = new(RecordingStore)
	}
	before := len(store.Saves())
	src := Slice(values, rc.slice...)
	out := Collect[U](rc.collect...)

	var res Result[U]
	if err := src.Resume(ctx, store); err != nil {
		res.Err = err
	} else {
		s := build(stream.From[T](src, rc.pipeline...)).
			To(out).
			Checkpointing(store, stream.CheckpointEachBatch(), stream.CheckpointInterval(0))
		res.Err = s.Run(ctx)
		res.Stats = s.Stats()
	}
	res.Out = out.Values()
	res.Saves = store.Saves()[before:]
	res.Position = -1
	if pos, ok := store.Position(Topic, Partition); ok {
		res.Position = pos
	}
	return res
}
