package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// Backoff defaults of [ConsumeForever], overridden by [WithBackoff].
const (
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 5 * time.Second
)

// ConsumeOption configures [ConsumeForever].
type ConsumeOption interface {
	applyConsume(*consumeConfig)
}

type consumeOptionFunc func(*consumeConfig)

func (f consumeOptionFunc) applyConsume(c *consumeConfig) { f(c) }

// consumeConfig holds ConsumeForever's settings; newConsumeConfig lists every
// default.
type consumeConfig struct {
	minBackoff, maxBackoff time.Duration
	onSourceError          func(err error, attempt int)
	onCheckpoint           func(topic string, partition int32, position checkpoint.Position)
	pipeline               []Option
	checkpoint             []CheckpointOption
	stage                  []StageOption
	// wait sleeps for d or until ctx is done, returning ctx's error then. Tests
	// replace it to record the backoff without sleeping.
	wait func(ctx context.Context, d time.Duration) error
}

func newConsumeConfig(opts []ConsumeOption) consumeConfig {
	c := consumeConfig{
		minBackoff: defaultMinBackoff,
		maxBackoff: defaultMaxBackoff,
		wait:       sleep,
	}
	for _, o := range opts {
		if o != nil {
			o.applyConsume(&c)
		}
	}
	return c
}

// WithBackoff sets how long [ConsumeForever] waits after a source failure
// before it resumes: minWait after the first failure, doubling with each
// consecutive failure up to maxWait, and back to minWait once a batch has been
// handled and saved. A minWait of zero or less keeps the default (100ms); a
// maxWait below minWait is raised to minWait. Overrides the default of 100ms
// to 5s.
func WithBackoff(minWait, maxWait time.Duration) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) {
		if minWait <= 0 {
			minWait = defaultMinBackoff
		}
		c.minBackoff, c.maxBackoff = minWait, max(minWait, maxWait)
	})
}

// OnSourceError sets a function [ConsumeForever] calls after each source
// failure (a failed Read or Resume), before it backs off and resumes. err is
// a [*SourceError]; attempt counts consecutive failures: 1 for the first
// failure since the start or since the last batch handled and saved, 2 for
// the next, and so on. The function runs on ConsumeForever's goroutine and
// must not block. By default nothing is called.
func OnSourceError(fn func(err error, attempt int)) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.onSourceError = fn })
}

// OnCheckpoint sets a function [ConsumeForever] calls after each position has
// been saved to the store: position is the next offset to read from
// topic-partition, with the epoch of the record below it. The function runs on ConsumeForever's goroutine, between
// batches, and must not block. By default nothing is called.
func OnCheckpoint(fn func(topic string, partition int32, position checkpoint.Position)) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.onCheckpoint = fn })
}

// WithPipeline passes pipeline options ([WithClock], [WithDrainTimeout],
// [WithMaxInFlight]) to every pipeline [ConsumeForever] builds.
func WithPipeline(opts ...Option) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.pipeline = append(c.pipeline, opts...) })
}

// WithStage passes stage options to the handler's stage of
// [ConsumeForever]: a failure policy ([Retry], [Skip], [DeadLetter],
// [OnError], [Recover]), its [Name] (default "tap", as in [*RecordError]
// and the metrics) or its parallelism ([Parallel], [KeyOrdered]; records
// then finish out of order and the position moves past a record only
// once every record below it is handled). [Forever] builds its own
// pipeline and ignores it. By default the handler's first error stops
// ConsumeForever.
//
//	err := stream.ConsumeForever(ctx, src, store, handle,
//		stream.WithStage(stream.Retry(3, 100*time.Millisecond, 2*time.Second), stream.DeadLetter(dlq)))
func WithStage(opts ...StageOption) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.stage = append(c.stage, opts...) })
}

// WithCheckpointPolicy sets when [ConsumeForever] saves positions (see
// [Stream.Checkpointing]); by default every [DefaultCheckpointInterval]
// and when it returns.
func WithCheckpointPolicy(opts ...CheckpointOption) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.checkpoint = append(c.checkpoint, opts...) })
}

// ConsumeForever is the one-call consumer: it resumes src from store, calls
// handle with every value in order, saves positions to store as records are
// handled (every [DefaultCheckpointInterval] by default, see
// [WithCheckpointPolicy]), and on a source failure backs off and resumes from the
// last saved position. Records handled after that position are delivered
// again (at-least-once); none is skipped.
//
// It runs From(src).Tap(handle, stageOpts...).Checkpointing(store).Run(ctx),
// building a new pipeline for each attempt ([WithStage] gives the stage
// options: a retry or dead-letter policy), and when src implements
// [Resumer] it calls src.Resume(ctx, store) before each attempt. What it
// returns:
//
//   - nil when ctx is cancelled, after saving the positions of every
//     record handled; handle is not called again after the cancel (the
//     call in progress finishes), see [Stream.Run];
//   - an error wrapping [ErrDeadline] and context.DeadlineExceeded when
//     ctx's deadline expired, with the same saving;
//   - nil when the source ends (io.EOF), as a replay does; a follow source
//     never ends;
//   - at once, the error of handle (a [*RecordError] wrapping it, Stage
//     "tap"), of the store's Save, or of the source's Close after the source
//     ended: restarting cannot cure those;
//   - at once, a Resume error wrapping [checkpoint.ErrCorrupt],
//     [checkpoint.ErrInvalidTopic] or [checkpoint.ErrInvalidPosition]: a
//     checkpoint that cannot be read must not turn into a replay from the
//     beginning, and retrying cannot repair it;
//   - the [*SourceError] of the first failure when src does not implement
//     [Resumer], since such a source cannot restart where the store says;
//   - at once, a source failure marked [Permanent] (a closed log, a
//     partition that does not exist, corrupt data, a saved position beyond
//     the log end).
//
// Any other failure of Read or Resume is retried, among them a topic that
// does not exist yet (its publisher may not have created it): a misspelt
// topic name retries forever, reported to [OnSourceError] each time. For
// each, ConsumeForever calls the [OnSourceError] hook, closes the source if
// Run has not, waits (see [WithBackoff]) and resumes. A panic in handle is
// not recovered unless [WithStage] gives [Recover]: it is raised again as
// a [*PanicError] holding the stack where it happened.
func ConsumeForever[T any](ctx context.Context, src Source[T], store checkpoint.Store,
	handle func(context.Context, T) error, opts ...ConsumeOption) error {
	switch {
	case src == nil:
		return errors.New("stream: ConsumeForever: nil source")
	case store == nil:
		return errors.New("stream: ConsumeForever: nil store")
	case handle == nil:
		return errors.New("stream: ConsumeForever: nil handle function")
	}
	cfg := newConsumeConfig(opts)
	resumer, canResume := src.(Resumer)
	return retryLoop(ctx, &cfg, func(progressed *bool) (error, bool) {
		err := consumeOnce(ctx, src, resumer, store, handle, &cfg, progressed)
		var srcErr *SourceError
		if err != nil && !canResume && errors.As(err, &srcErr) && !errors.Is(err, ErrPermanent) && ctx.Err() == nil {
			return fmt.Errorf("stream: ConsumeForever: the source does not implement Resumer and cannot restart: %w", err), true
		}
		return err, false
	})
}

// retryLoop runs attempt until it returns nil, a failure that is not a
// retryable *SourceError, or ctx ends; between attempts it calls the
// OnSourceError hook and backs off. attempt sets *progressed when it saved
// a position, which resets the backoff, and reports final for an error
// that must be returned as it is.
func retryLoop(ctx context.Context, cfg *consumeConfig, attempt func(progressed *bool) (err error, final bool)) error {
	failures := 0
	for {
		if ctx.Err() != nil {
			return ended(ctx)
		}
		progressed := false
		err, final := attempt(&progressed)
		if err == nil || errors.Is(err, ErrDeadline) {
			return err
		}
		if final {
			return err
		}
		var srcErr *SourceError
		// An aborted transaction (ExactlyOnce) is cured by a new run,
		// which starts from the committed state.
		if (!errors.As(err, &srcErr) && !errors.Is(err, ErrTransactionAborted)) || errors.Is(err, ErrPermanent) {
			return err
		}
		if ctx.Err() != nil {
			return ended(ctx)
		}
		if progressed {
			failures = 0
		}
		failures++
		if cfg.onSourceError != nil {
			cfg.onSourceError(err, failures)
		}
		if cfg.wait(ctx, backoff(cfg.minBackoff, cfg.maxBackoff, failures)) != nil {
			return ended(ctx)
		}
	}
}

// ended is what ConsumeForever and Forever return once ctx is done: nil
// for a cancel (the shutdown), an error wrapping [ErrDeadline] for a
// deadline (work cut short).
func ended(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return deadlineError(ctx)
	}
	return nil
}

// consumeOnce is one attempt of ConsumeForever: resume, then run a new
// pipeline until it ends. It sets *progressed when a batch was handled and
// saved. A Resume failure that retrying can cure comes back as a
// *SourceError, with the source closed.
func consumeOnce[T any](ctx context.Context, src Source[T], resumer Resumer, store checkpoint.Store,
	handle func(context.Context, T) error, cfg *consumeConfig, progressed *bool) error {
	if resumer != nil {
		if err := resumer.Resume(ctx, store); err != nil {
			closeErr := src.Close()
			if cancelled(ctx, err) {
				return ended(ctx)
			}
			err = fmt.Errorf("resume from checkpoint: %w", err)
			if closeErr != nil {
				err = errors.Join(err, fmt.Errorf("close source: %w", closeErr))
			}
			if errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrInvalidTopic) ||
				errors.Is(err, checkpoint.ErrInvalidPosition) {
				return fmt.Errorf("stream: ConsumeForever: %w", err)
			}
			return &SourceError{Err: err}
		}
	}
	s := From(src, cfg.pipeline...).Tap(handle, cfg.stage...).Checkpointing(store, cfg.checkpoint...)
	s.p.onCheckpoint = cfg.onCheckpoint
	s.p.onSave = func() { *progressed = true }
	return s.Run(ctx)
}

// backoff returns the wait after the given number of consecutive failures
// (from 1): lo, 2*lo, 4*lo, ... capped at hi.
func backoff(lo, hi time.Duration, failures int) time.Duration {
	d := lo
	for i := 1; i < failures; i++ {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return min(d, hi)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
