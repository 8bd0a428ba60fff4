package stream

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/strom-dev/strom/checkpoint"
)

// Option configures a pipeline; pass options to [From] (or [Merge]).
type Option interface{ applyPipeline(*pipelineConfig) }

type pipelineOptionFunc func(*pipelineConfig)

func (f pipelineOptionFunc) applyPipeline(c *pipelineConfig) { f(c) }

// pipelineConfig holds a pipeline's settings; defaultPipelineConfig lists
// every default.
type pipelineConfig struct {
	clock        Clock
	drainTimeout time.Duration
	maxInFlight  int

	// Telemetry (telemetry.go): nil providers mean the global ones.
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	name           string

	eos eosConfig // ExactlyOnce

	observe observeConfig // StallAfter, WithLogger (observe.go)
}

func defaultPipelineConfig() pipelineConfig {
	return pipelineConfig{clock: WallClock{}, drainTimeout: 0, maxInFlight: checkpoint.DefaultMaxInFlight}
}

// WithClock makes the pipeline wait on c (Batch linger, retry backoff, the
// checkpoint interval) instead of the wall clock. A nil c keeps the wall
// clock.
func WithClock(c Clock) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) {
		if c != nil {
			pc.clock = c
		}
	})
}

// WithDrainTimeout sets how long in-flight records may go on after the
// context of Run is cancelled: reading stops at once, stages keep a live
// context for d, then their context is cancelled and whatever is still in
// flight is abandoned, unsaved (it is read again after a restart). The
// default, 0, cancels the stages' context together with Run's: a handler
// blocked on its context returns at once. Run always waits for the
// functions it called to return (no goroutine outlives it), so a handler
// that ignores its context holds Run until it returns; its record is then
// abandoned all the same.
func WithDrainTimeout(d time.Duration) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.drainTimeout = max(d, 0) })
}

// WithMaxInFlight bounds how many records of one partition may be read and
// not yet finished at once (default checkpoint.DefaultMaxInFlight, 65,536).
// Past it the source waits (back-pressure): the completion tracker's memory
// is bounded by 8 bytes times this, per partition. n <= 0 keeps the
// default.
func WithMaxInFlight(n int) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) {
		if n > 0 {
			pc.maxInFlight = n
		}
	})
}

// CheckpointOption configures when [Stream.Checkpointing] saves positions.
type CheckpointOption interface{ applyCheckpoint(*checkpointConfig) }

type checkpointOptionFunc func(*checkpointConfig)

func (f checkpointOptionFunc) applyCheckpoint(c *checkpointConfig) { f(c) }

// DefaultCheckpointInterval is how often a pipeline saves positions by
// default: 200ms, so a consumer at the tail saves at most 5 times a second
// per partition whatever the arrival rate (saving after every batch cost 718
// saves a second, 1.4 fsyncs per record, at 1,000 records/s). The price is
// the replay window: after a crash, the records finished in the last 200ms
// before it, plus those in flight, are delivered again.
const DefaultCheckpointInterval = 200 * time.Millisecond

// checkpointConfig holds the checkpoint policy.
type checkpointConfig struct {
	interval  time.Duration // 0: no timer
	records   int64         // 0: no count
	eachBatch bool
}

func defaultCheckpointConfig() checkpointConfig {
	return checkpointConfig{interval: DefaultCheckpointInterval}
}

// CheckpointInterval saves positions every d while records finish
// (overriding the default of [DefaultCheckpointInterval]); d <= 0 turns the
// timer off, leaving the other triggers and the final save.
func CheckpointInterval(d time.Duration) CheckpointOption {
	return checkpointOptionFunc(func(c *checkpointConfig) { c.interval = max(d, 0) })
}

// CheckpointRecords also saves positions as soon as n records have finished
// since the last save. n <= 0 turns the count off (the default).
func CheckpointRecords(n int) CheckpointOption {
	return checkpointOptionFunc(func(c *checkpointConfig) { c.records = int64(max(n, 0)) })
}

// CheckpointEachBatch saves positions as soon as any record has finished,
// one save at a time: with a sequential pipeline that is after every batch
// the source returned, the behaviour before the checkpoint policy existed,
// and the smallest replay window, at the cost of a save (two fsyncs for a
// FileStore) per batch.
func CheckpointEachBatch() CheckpointOption {
	return checkpointOptionFunc(func(c *checkpointConfig) { c.eachBatch = true })
}

// StageOption configures one stage: how many records it works on at once
// ([Parallel], [KeyOrdered]), what a failure does ([Retry], [Skip],
// [DeadLetter], the default stop), [OnError] hooks, [Recover] and [Name].
type StageOption interface{ applyStage(*stageConfig) }

type stageOptionFunc func(*stageConfig)

func (f stageOptionFunc) applyStage(c *stageConfig) { f(c) }

// onFailure is what a stage does with a record it gave up on.
type onFailure uint8

const (
	failStop onFailure = iota // the default: Run returns a *RecordError
	failSkip
	failDeadLetter
)

// stageConfig holds a stage's settings.
type stageConfig struct {
	name     string
	parallel int // 0: sequential, on the upstream goroutine
	keyed    any // func() keyRouter[T], from KeyOrdered

	attempts         int // 1 + retries
	minWait, maxWait time.Duration
	onFail           onFailure
	deadLetter       Sink[Failure]
	hooks            []func(Failure)
	recoverPanics    bool
	queuePerWorker   int
}

func newStageConfig(name string, opts []StageOption) *stageConfig {
	c := &stageConfig{name: name, attempts: 1, queuePerWorker: 16}
	for _, o := range opts {
		if o != nil {
			o.applyStage(c)
		}
	}
	return c
}

// Name names the stage in errors, dead letters and [Stream.Stats] (default:
// the operator, "map", "filter", ...). For a stateful stage ([Aggregate],
// [Reduce], [Window]) it is also the name its state is saved under, unique
// in the pipeline: it is both a [StageOption] and a [StateOption]. An empty
// name keeps the default.
func Name(name string) NameOption { return NameOption{name: name} }

// NameOption is what [Name] returns: a [StageOption] and a [StateOption].
type NameOption struct{ name string }

func (o NameOption) applyStage(c *stageConfig) {
	if o.name != "" {
		c.name = o.name
	}
}

func (o NameOption) applyState(c *stateConfig) {
	if o.name != "" {
		c.name = o.name
	}
}

// Parallel runs the stage's function on n goroutines at once; records
// finish, and go on downstream, in the order they complete, not the order
// they were read. The checkpoint is not affected by the order: a position
// is saved only below the lowest record not yet finished, per partition.
// Stages after this one still run one batch at a time on one goroutine.
// n <= 1 means sequential (the default).
func Parallel(n int) StageOption {
	return stageOptionFunc(func(c *stageConfig) { c.parallel, c.keyed = max(n, 0), nil })
}

// KeyOrdered runs the stage's function on n goroutines at once, with the
// records of one key (key(value)) handled one after another in source
// order and different keys at the same time, as Confluent's Parallel
// Consumer does per key: a key is sent to the goroutine already working on
// it, else to the least loaded one. Records still leave the stage in
// completion order. n <= 1 means sequential.
func KeyOrdered[T any, K comparable](n int, key func(T) K) StageOption {
	if key == nil {
		panic("stream: KeyOrdered called with a nil key function")
	}
	var factory func() keyRouter[T] = func() keyRouter[T] {
		return &keyTable[T, K]{key: key, busy: make(map[K]keyState)}
	}
	return stageOptionFunc(func(c *stageConfig) { c.parallel, c.keyed = max(n, 0), factory })
}

// Retry calls the stage's function again when it fails, up to attempts
// calls in all, waiting minWait after the first failure and doubling up to
// maxWait (on the pipeline's [Clock]). When the last attempt fails the
// stage's failure policy applies ([Skip], [DeadLetter], or stop). A
// cancellation of the stage's context ends the waiting. attempts <= 1
// means no retry (the default); minWait <= 0 means 100ms.
func Retry(attempts int, minWait, maxWait time.Duration) StageOption {
	return stageOptionFunc(func(c *stageConfig) {
		if minWait <= 0 {
			minWait = 100 * time.Millisecond
		}
		c.attempts, c.minWait, c.maxWait = max(attempts, 1), minWait, max(minWait, maxWait)
	})
}

// Skip drops a record whose function failed (after any [Retry]) and goes
// on: the record counts as finished, so its position is saved, and as
// skipped in [Stream.Stats]. The error is seen by [OnError] hooks only.
// Of Skip and [DeadLetter], the last given to a stage applies.
func Skip() StageOption {
	return stageOptionFunc(func(c *stageConfig) { c.onFail, c.deadLetter = failSkip, nil })
}

// DeadLetter writes a record whose function failed (after any [Retry]) to
// sink as a [Failure], then drops it, counted as dead-lettered in
// [Stream.Stats]; it is finished once sink.Write returned nil. On a sink
// ([Stream.To]) a failed Write of a batch gives sink one Failure per
// record of the batch, each with its own value and lineage. A failing
// dead-letter write stops the pipeline with a [*DeadLetterError] carrying
// both errors, which [OnError] hooks see too. sink.DeadLetter
// builds one over a log topic: the original key and value, with the error,
// stage and source topic, partition and offset in headers. A nil sink
// panics.
func DeadLetter(sink Sink[Failure]) StageOption {
	if sink == nil {
		panic("stream: DeadLetter called with a nil sink")
	}
	return stageOptionFunc(func(c *stageConfig) { c.onFail, c.deadLetter = failDeadLetter, sink })
}

// OnError calls fn with every failure of the stage's function, each retry
// included, before the failure policy applies, and once more when a
// [DeadLetter] write then fails, with the same Stage, lineage, Attempt and
// Value and a [*DeadLetterError] as Err (wrapping the dead-letter sink's
// error and the function's), before the pipeline stops: errors.As tells
// that call from the others. fn may run on several
// goroutines at once in a parallel stage and must not block. For a sink
// ([Stream.To]) fn is called once per failed Write, with the lineage of the
// batch's first record and the batch, a []T, as Value: the pipeline reuses
// that slice, so fn must copy what it keeps of it.
func OnError(fn func(Failure)) StageOption {
	return stageOptionFunc(func(c *stageConfig) {
		if fn != nil {
			c.hooks = append(c.hooks, fn)
		}
	})
}

// Recover turns a panic in the stage's function into that record's error,
// a [*PanicError] carrying the value and the stack, which then goes
// through the stage's failure policy. Without it a panic stays a panic: Run
// stops the pipeline and panics again on its own goroutine with the same
// value.
func Recover() StageOption {
	return stageOptionFunc(func(c *stageConfig) { c.recoverPanics = true })
}

// Failure describes a record a stage's function failed on, as [OnError]
// hooks and [DeadLetter] sinks see it.
type Failure struct {
	Stage     string // the stage's name ("map", or what Name gave)
	Topic     string // the record's lineage; "" when it has none
	Partition int32
	Offset    int64
	Attempt   int   // 1 for the first call, 2 for the first retry, ...
	Err       error // what the function returned (or a *PanicError)
	// Value is the stage's input value: for a stage over log.Record, the
	// record as it was read.
	Value any
}
