package stream

import (
	"context"
	"errors"

	"github.com/strom-dev/strom/checkpoint"
)

// Runner is a pipeline ready to run: any *Stream[T].
type Runner interface {
	Run(ctx context.Context) error
}

// hooked is implemented by *Stream[T]: Forever sets its save hooks.
type hooked interface {
	setHooks(onSave func(), onCheckpoint func(topic string, partition int32, position checkpoint.Position))
}

func (s *Stream[T]) isNil() bool { return s == nil }

func (s *Stream[T]) setHooks(onSave func(), onCheckpoint func(string, int32, checkpoint.Position)) {
	s.p.onSave, s.p.onCheckpoint = onSave, onCheckpoint
}

// Forever gives a whole pipeline what [ConsumeForever] gives a handler: it
// calls build for a new pipeline, runs it, and when it fails with a
// retryable source failure (a [*SourceError] not marked [Permanent]) or
// with [ErrTransactionAborted] (an [ExactlyOnce] transactor that cannot
// rewind while it runs: the next run starts from its committed state) backs
// off ([WithBackoff]), builds a new one and runs that, for as long as ctx
// lives. build must make sources that resume from the pipeline's
// checkpoint store (for example source.Partition or source.Topic with
// source.FromStore(store)), so each attempt starts at the last saved
// positions: records handled after them are delivered again
// (at-least-once), none is skipped.
//
// It returns nil when ctx is cancelled or a pipeline ends (its sources
// ended), at once the error of a stage, sink or store (restarting cannot
// cure those) or of a permanent source failure, and an error when build
// returns nil. [OnSourceError] and [OnCheckpoint] hooks apply; the backoff
// resets once an attempt saved a position.
func Forever(ctx context.Context, build func() Runner, opts ...ConsumeOption) error {
	if build == nil {
		return errors.New("stream: Forever: nil build function")
	}
	cfg := newConsumeConfig(opts)
	return retryLoop(ctx, &cfg, func(progressed *bool) (error, bool) {
		r := build()
		if n, ok := r.(interface{ isNil() bool }); r == nil || (ok && n.isNil()) {
			return errors.New("stream: Forever: build returned a nil pipeline"), true
		}
		if h, ok := r.(hooked); ok {
			h.setHooks(func() { *progressed = true }, cfg.onCheckpoint)
		}
		return r.Run(ctx), false
	})
}
