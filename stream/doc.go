// Package stream is strom's typed pipeline DSL: read records from a source,
// pass them through stages, write them to sinks, and save the source's
// position in a checkpoint store once they are done.
//
// # Pipelines
//
// A pipeline starts at a [Source] with [From], chains stages that keep the
// value type as methods ([Stream.Map], [Stream.Filter], [Stream.Tap],
// [Stream.To]) and stages that change it as functions ([MapTo]), because Go
// methods cannot take type parameters. [Stream.Checkpointing] names the
// store that keeps the position, and [Stream.Run] runs it:
//
//	err := stream.From(src).
//		Filter(isOrder).
//		Map(enrich).
//		To(sink).
//		Checkpointing(store).
//		Run(ctx)
//
// Run is pull-based, synchronous and batch-at-a-time: it reads one batch from
// the source, passes the whole batch through the first stage, then the
// second, and so on, saves the batch's positions, and reads the next batch.
// Within a batch every stage sees the records in source order, one at a time,
// so all stage functions run on Run's goroutine and need no locking. Every
// [Element] carries its lineage (topic, partition, offset), which each stage
// keeps; a sink receives one Write per batch. Building a pipeline reads
// nothing; Run may be called once per pipeline.
//
// # At-least-once
//
// A position is saved only after every record below it has passed every
// stage. For each topic-partition in a batch, the position is one past the
// highest offset the source returned in it; it is computed before any stage
// runs and saved to every store once the batch has passed every stage of the
// pipeline, those chained after Checkpointing and the sinks included. A
// record dropped by a Filter counts as done, so a batch filtered to nothing
// still advances the checkpoint.
//
// If the process stops at any point, the stored position is at or below the
// first record not completely handled, and a pipeline restarted from the store
// (see [Resumer]) handles again the records of the batch that was in flight:
// records may be delivered twice, never skipped. Handlers and sinks should be
// idempotent, or tolerate the replay of up to one batch.
//
// # Errors
//
// No error is swallowed. A stage function or sink error stops Run, which
// returns a [*RecordError] naming the stage and the record and wrapping the
// function's error (errors.Is works on it); the failed batch's positions are
// not saved, so the records of that batch handled before the failure are
// handled again on the next run. A failed Read is returned as a
// [*SourceError], which tells a source failure (retryable by resuming from
// the store, as [ConsumeForever] does) from a handler failure. A failed Save
// of a store is returned naming the topic, partition and position. If the
// source's Close fails and nothing else did, Run returns that error.
//
// A panic in a stage function or sink is not recovered: it unwinds through
// Run like any panic, the batch in flight is not saved, and the source is
// closed (Run closes it in a deferred call).
//
// # Cancellation
//
// Run returns nil when ctx is cancelled, after saving every completed batch.
// Run checks ctx before each Read and passes it to Read and to every stage
// function; a batch that fails because of the cancellation (the error is, or
// wraps, ctx.Err()) is abandoned unsaved, while a batch that completes despite
// it is saved. Saves use context.WithoutCancel, so a cancellation never keeps
// completed work from being saved. Any other error is returned even when ctx
// has been cancelled.
//
// # ConsumeForever
//
// [ConsumeForever] is the one-call consumer for a service that handles a topic
// until it is told to stop:
//
//	err := stream.ConsumeForever(ctx, src, store, handle,
//		stream.WithBackoff(100*time.Millisecond, 5*time.Second))
//
// It resumes src from store (src should implement [Resumer]), handles every
// record and checkpoints after every batch. When the source fails it backs off
// exponentially, resumes from the last saved position and goes on; a handler
// or store error, or a checkpoint that cannot be read, ends it with that
// error; cancelling ctx ends it with nil. [OnSourceError] and [OnCheckpoint]
// report reconnects and saves.
//
// # Sources and sinks
//
// A [Source] returns batches and io.EOF at a clean end; strom's sources live
// in package source, and package streamtest has a slice source, a collecting
// sink and a recording store for unit-testing operators.
package stream
