// Package stream is strom's typed pipeline DSL: read records from sources,
// pass them through stages, write them to sinks, and save the sources'
// positions in a checkpoint store once the records are done.
//
// # Pipelines
//
// A pipeline starts at a [Source] with [From] (several with [Merge]),
// chains stages that keep the value type as methods ([Stream.Map],
// [Stream.Filter], [Stream.Tap], [Stream.To]) and stages that change it as
// functions ([MapTo], [FlatMap], [Batch]), because Go methods cannot take
// type parameters. [Stream.Checkpointing] names the store that keeps the
// positions, and [Stream.Run] runs it:
//
//	err := stream.From(source.Topic(lg, "orders", source.FromStore(store))).
//		Filter(isOrder).
//		Map(enrich, stream.Parallel(8), stream.Retry(3, 100*time.Millisecond, time.Second)).
//		To(sink.Log(out), stream.DeadLetter(sink.DeadLetter(dlq))).
//		Checkpointing(store).
//		Run(ctx)
//
// Building reads nothing; Run may be called once per pipeline.
//
// # How records move
//
// Each source is read on a goroutine of its own, a batch at a time, as the
// source hands batches out. Sequential stages run on the goroutine that
// feeds them, one batch at a time, in place: a Map or Filter rewrites the
// batch's slice instead of copying it, and MapTo and sinks reuse one buffer
// per stage, so the steady state allocates nothing per record between
// source and sink. A stage with [Parallel] (n goroutines, any order) or
// [KeyOrdered] (n goroutines, one key at a time in source order) hands
// records to its workers and collects what completes, in completion order,
// into batches for the stages after it, which again run on one goroutine.
// Every stage function gets the stage's context.
//
// # At-least-once
//
// Every element carries its lineage (topic, partition, offset), and Run
// registers each element with lineage in a completion tracker
// ([checkpoint.Tracker]) as it is read. An element is finished when it has
// passed every stage and sink, or was dropped (a Filter, a Skip, a dead
// letter); a record that [FlatMap] split is finished when all its parts
// are; a record in a [Batch] when the batch is. A partition's position,
// what the stores save, is the lowest offset not yet finished: records may
// finish out of order, but a position never passes a record that has not.
// If the process dies at any point, a pipeline restarted from the store
// delivers again the records above the saved position: records may be
// delivered twice, never skipped. Handlers and sinks should be idempotent.
//
// The tracker is bounded: at most [WithMaxInFlight] records of a partition
// (65,536 by default, 8 bytes each) may be read and not finished; past that
// the source waits. Channels between stages are bounded too, so a slow
// stage slows the source instead of growing memory.
//
// # When positions are saved
//
// By default every [DefaultCheckpointInterval] (200ms) while records
// finish, and once more when Run returns, so a consumer at the tail of a
// busy partition saves a few times a second, not once per record: the
// replay after a crash is at most the records finished in the last 200ms
// plus those in flight. [CheckpointRecords] adds a count trigger,
// [CheckpointEachBatch] saves after every batch (the smallest replay, a
// save per batch), and [Stream.Checkpoint] forces a save.
//
// # Errors
//
// No error is swallowed. What a stage does when its function fails is its
// failure policy, set with stage options: by default it stops the pipeline
// and Run returns a [*RecordError] naming the stage and the record and
// wrapping the function's error; [Retry] calls it again with exponential
// backoff and a cap; [Skip] drops the record and counts it; [DeadLetter]
// writes it, with the error, stage and lineage, to a dead-letter sink
// (sink.DeadLetter puts it in a log topic with the original key and value)
// and goes on, or stops with a [*DeadLetterError] when that write fails.
// [OnError] hooks see every failure, a failed dead-letter write too. The
// failed record's position is never saved under stop; records before it
// that finished are. [Stream.Stats] counts records in, out, skipped,
// dead-lettered, failed and retried per stage.
//
// A failed Read is returned as a [*SourceError], which tells a source
// failure (retryable by resuming from the store, as [ConsumeForever] and
// [Forever] do) from a handler failure. A failed Save of a store is
// returned naming topic, partition and position.
//
// A panic in a stage function stays a panic: Run stops the pipeline and
// panics again on its caller's goroutine with a [*PanicError] holding the
// value and the stack of the goroutine that panicked (its Error prints
// both, so the crash names the function). [Recover] turns it into the
// record's error instead (the same [*PanicError]), which then follows the
// failure policy.
//
// # Progress within a batch
//
// Sources hand out batches (256 KiB of a log partition, 500 lines of a
// file), and sequential stages take a batch at a time. A stage that has
// worked on one batch for 10 to 20 ms hands on the records it finished and
// goes on with the rest, so with a handler of a few milliseconds per record
// positions still move every 20 ms and every checkpoint saves them; a
// pipeline that handles a batch in under 10 ms keeps whole batches. A sink
// after a slow stage then gets smaller Writes: put [Batch] before a sink
// that needs big ones.
//
// # Cancellation and drain
//
// Cancelling Run's context stops reading at once, and the stages stop
// calling their functions at the next record once they have learnt of it,
// within microseconds (a call in progress finishes). Records in flight then either finish, with a live stage
// context for [WithDrainTimeout] (none by default), or are abandoned
// unsaved; the positions of what finished are saved, and Run returns nil
// once no goroutine it started is left. A deadline (context.WithTimeout)
// drains the same way but Run returns an error wrapping [ErrDeadline]: a
// deadline is not a shutdown, and a test whose timeout expires must not
// pass.
//
// # Forever
//
// [ConsumeForever] is the one-call consumer for a service that handles a
// topic until it is told to stop, and [Forever] does the same for a whole
// pipeline: on a source failure they back off exponentially, resume from
// the last saved positions and go on; a stage, sink or store error, or a
// checkpoint that cannot be read, ends them with that error; cancelling
// ctx ends them with nil.
//
// # Metrics and traces
//
// A pipeline reports to OpenTelemetry (go.opentelemetry.io/otel): metrics
// to the MeterProvider given with [WithMeterProvider], else the global one
// as Run finds it (otel.GetMeterProvider()), and spans to the
// TracerProvider of [WithTracerProvider], else the global one. Until a
// program installs providers (otel.SetMeterProvider,
// otel.SetTracerProvider) everything is a no-op: a Run that starts with
// neither (or with no-op providers) builds no telemetry at all, so install
// them before Run. [WithName] names the
// pipeline: the attribute messaging.consumer.group.name on every series
// and span below, left out when unnamed. The meter and tracer are named
// [ScopeName]. Names and attributes follow OpenTelemetry's messaging
// semantic conventions where they have one (messaging.system is "strom").
//
// Per stage, with the attributes strom.stage (its name, as in [StageStats])
// and strom.stage.index (its place from the source, 0 first):
//
//	name                               instrument        unit      meaning
//	strom.stage.records.in             counter (async)   {record}  records that entered the stage ([StageStats].In)
//	strom.stage.records.out            counter (async)   {record}  records it passed on (Out)
//	strom.stage.records.skipped        counter (async)   {record}  records dropped by [Skip] (Skipped)
//	strom.stage.records.dead_lettered  counter (async)   {record}  records written to the [DeadLetter] sink (DeadLettered)
//	strom.stage.failures               counter (async)   {call}    calls of the function, or Writes, that failed, retries included (Failed)
//	strom.stage.retries                counter (async)   {call}    calls that were retries (Retried)
//	strom.stage.records.late           counter (async)   {record}  a [Window]'s late records (Late)
//	strom.stage.duration               histogram         s         one value per batch: the stage's function over the batch, or the sink's Write; not for Parallel and KeyOrdered stages
//
// Per partition read, with messaging.destination.name (the topic) and
// messaging.destination.partition.id (the partition, as a string):
//
//	messaging.client.consumed.messages counter (async)   {message} records read with lineage, again when read again after a restart
//	messaging.process.duration         histogram         s         one value per source batch: from the batch entering the first stage until it has been through every stage or reached one with goroutines of its own (Parallel, KeyOrdered, Batch); also messaging.operation.name="process" and messaging.operation.type="process"
//	strom.partition.position           gauge (async)     {offset}  the lowest offset not yet finished: what the next checkpoint saves, where a restart resumes
//	strom.partition.high_watermark     gauge (async)     {offset}  the partition's next offset, from a source that is a [HighWatermarker] (source.Partition, source.Topic, source.Kafka)
//	strom.partition.lag                gauge (async)     {message} high watermark minus position: records not yet finished
//	strom.partition.stalled            gauge (async)     {partition} 1 while the partition is stalled ([StallAfter]: behind, no progress for 30 s by default), else 0
//
// Per pipeline:
//
//	strom.checkpoint.saves             counter           {save}    rounds of saves (every position that moved, to every store) that succeeded
//	strom.checkpoint.failures          counter           {save}    rounds that failed (which stops the pipeline), with error.type="_OTHER"
//	strom.checkpoint.duration          histogram         s         one value per round; error.type="_OTHER" on failed ones
//
// The asynchronous instruments cost a record nothing: their callback reads
// the counters behind [Stream.Stats] and the completion tracker when a
// reader collects. Durations are taken per batch, never per record, and
// only while a reader wants them (Float64Histogram.Enabled); without a
// provider a batch pays a nil check per stage. Counters are summed
// over the runs of one name: after Run returns its final counts stay
// reported, and the next run's add to them (as [Forever] and
// [ConsumeForever] rebuild a pipeline after each source failure), while
// its positions, high watermarks and lags are reported only while it runs.
// Two pipelines of one name and provider running at once add up as well.
//
// Spans, when a tracer provider was given or installed before Run: one
// [SpanCheckpointSave] span per round of saves (status Error when it
// fails), its context the one the stores' Save gets; and one span
// of kind consumer per source batch, "process <topic>", with
// messaging.batch.message_count, the partition and strom.offset (the
// batch's first offset), whose context the stage functions of sequential
// stages get, so their own spans are its children. Sample them with the
// provider's sampler.
//
// # Observing a running pipeline
//
// [Stream.Observe] returns a [Snapshot] of what the pipeline is doing, at
// any time, from any goroutine: every stage's counts (those of Stats) with
// records per second, its records in flight, Flink's busy, back-pressured
// and idle milliseconds per second, measured once per batch where records
// are handed on, and for an event-time stage ([Window], [JoinWindow]) its
// watermark; every source partition's position, high watermark, lag,
// records in flight, rate and watermark in each event-time stage (marked
// when the stage counts it idle); the last 10 checkpoints (when, how long, the positions and state
// bytes saved, the error of a failed one); and the last 10 failed calls
// of stage functions and sinks with their records' lineage. A [Monitor]
// given with [ObservedBy] follows the pipelines [ConsumeForever] and
// [Forever] rebuild. Run samples once a second; a partition that is behind
// and whose position has not moved for [StallAfter] (30 s) is marked
// stalled, counted in strom.partition.stalled and logged once per episode
// ([WithLogger], slog.Default by default). Package web serves a Snapshot
// as a live page (web.Pipeline); its JSON names every field in camelCase.
//
// # go-streams
//
// strom and github.com/reugn/go-streams work together both ways. [GoSource]
// makes any [Source] a go-streams streams.Source and [GoSink] any [Sink] a
// streams.Sink, so a plain go-streams pipeline reads from and writes to the
// log; go-streams has no acknowledgements, so they save no positions.
// [Via] puts a go-streams streams.Flow inside a strom pipeline and keeps
// at-least-once for flows that emit at most one value per input, in input
// order (flow.Map, flow.Filter, ...): the k-th value out finishes the k-th
// value in. A flow that drops values holds positions back by what it has
// dropped so far, and once that reaches [WithMaxInFlight] records (65,536
// by default) Run fails with [ErrFlowStalled]: filter with [Stream.Filter]
// before the flow instead. Its doc gives the rule and the flows it refuses.
//
// # Keys, windows and state
//
// [KeyBy] groups a stream by key for the stateful operators: [Aggregate]
// and [Reduce] keep an accumulator per key and emit its new value per
// record (Kafka Streams' aggregate and reduce); [Window] keeps one per key
// and window of event time, [Tumbling], [Sliding] or [Session], and emits
// a window's result once the watermark passes its end (Flink's and Kafka
// Streams' windows):
//
//	attempts := stream.KeyBy(failed, func(a Attempt) string { return a.IP })
//	perMinute := stream.Window(attempts, stream.Tumbling(time.Minute), stream.Count[Attempt](),
//		stream.EventTime(func(a Attempt) time.Time { return a.Time }),
//		stream.OutOfOrderness(30*time.Second), stream.LateTo(lateSink))
//
// Event time is the record's Timestamp unless [EventTime] reads it from the
// value. The watermark of a source partition is the greatest event time it
// has delivered minus the [OutOfOrderness]; the stage's watermark is the
// least over the partitions, and never goes back. A window fires when the
// watermark reaches its end and is dropped [AllowedLateness] later; windows
// that fire together (a watermark that jumps past several, or the end of
// the input) come out in the order of their ends across keys, so a stage
// after the window that reads a result's end as its event time (a second
// Window) sees time go forward. A record whose every window was dropped is
// late, and goes to [LateTo]'s sink, or is counted and dropped
// ([DropLate]), or stops Run ([ErrLateRecord], the default): a late record
// is never dropped unseen. A partition its source lists ([PartitionLister],
// as source.Topic does) holds the watermark back until one of its event
// times arrives, so the first batch of one partition cannot make the
// others' records late; one that delivers nothing holds it until the input
// ends, or for [Idleness]: silent that long on the pipeline's [Clock]
// (checked on a timer, so the windows it held back fire with no further
// record) and caught up with its source ([CaughtUpReporter]: a partition
// with records still to read is never idle). When every partition is idle
// the watermark advances to the greatest of their event times, so windows
// any of them has passed fire however close together they went quiet. The
// end of the input emits every open window.
//
// [JoinWindow], [LeftJoinWindow] and [OuterJoinWindow] join two keyed
// streams by event time (Kafka Streams' windowed KStream-KStream joins,
// Flink's interval join): a record of each whose keys are equal and whose
// event times are at most a bound apart make a pair, emitted as soon as
// the second arrives. The watermark is the least over the partitions of
// both inputs; a record is held until it passes the record's time plus the
// bound plus the allowed lateness, and the left and outer joins then emit
// a record that found no partner (never earlier, so no result without a
// partner is followed by a pair); a record further behind the watermark
// than the allowed lateness is late ([LateLeftTo], [LateRightTo],
// [DropLate]). [JoinTimes] reads the event times from the values:
//
//	orders := stream.KeyBy(stream.From(orderSrc), func(o Order) string { return o.ID })
//	paid := stream.KeyBy(stream.From(paymentSrc), func(p Payment) string { return p.OrderID })
//	unpaid := stream.LeftJoinWindow(orders, paid, 10*time.Minute,
//		func(o Order, p Payment, found bool) Check { return Check{Order: o, Paid: found} },
//		stream.JoinTimes(func(o Order) time.Time { return o.At }, func(p Payment) time.Time { return p.At }))
//
// # State
//
// The state of a stateful stage (its accumulators, open windows, a join's
// held records, and the watermark) is saved with the positions, so that after a crash the
// results equal those of an uninterrupted run although records are
// delivered again. How:
//
//   - Every stateful stage keeps, per source partition, the next offset it
//     has seen, its mark. The records of a partition reach it in offset
//     order (Window, Aggregate and the joins panic at build after a stage
//     that may reorder them: Parallel, KeyOrdered, Batch, Via), so every record
//     below the mark has had its effect on the state.
//   - Each checkpoint reads the positions it will save (every record below
//     them has finished, so its effect on the state is in), then takes and
//     saves a snapshot of the stateful stages (when one changed), each
//     one's state and marks together, encoded with encoding/gob, to the
//     pipeline's [checkpoint.StateStore] under the stage's [Name] (a
//     FileStore writes <dir>/<name>.state with the atomic replace of its
//     position files; see below for several stages), and only then saves
//     the positions. A saved position therefore never
//     passes a record whose effect on the state is not saved: the state
//     is the done-ness of the records that went into it.
//   - After a restart the stage restores its snapshot; a record delivered
//     again below the restored mark (absorbed after the positions were
//     read, or before positions that failed to save) is recognised as
//     counted and is not added twice (an Aggregate emits the key's current
//     value for it instead).
//   - A Window's results are kept in the state from the moment they are
//     emitted until they have finished every stage after it, and a
//     restored state emits those again: results are at-least-once, each
//     with the value it had, and a (key, window) emitted twice has the
//     same value both times unless a record within the allowed lateness
//     changed it. A windowed join's results likewise: after restarts its
//     results without duplicates are an uninterrupted run's.
//
// Exactly-once state needs the same records, with the same keys and event
// times, and the same decisions about lateness, on a replay: with several
// partitions, records later than the OutOfOrderness may be late in one run
// and not in another (see [Window]); key and event-time functions must be deterministic,
// as must the stages before the stateful one (a Filter on the wall clock
// would break it). Processing-time windows are not exact across a restart.
//
// The cost: a snapshot holds the whole state of the stage (no changelog:
// state is bounded by memory, and its size is what internal/bench
// measures per key), is encoded and written on every checkpoint in which
// the state changed, and with a FileStore costs one more temporary file,
// fsync and rename per stateful stage per checkpoint. (A first design held
// each record unfinished until a snapshot holding it was saved; at
// millions of records a second the source then waited at
// [WithMaxInFlight] and forced a save every 65,536 records, about 100 a
// second, in internal/bench's BenchmarkWindow; reading the positions
// before the snapshot keeps the same rule at the checkpoint policy's
// pace.) Without Checkpointing, state lives in memory for the run.
// Keys and accumulators are saved with encoding/gob: Run refuses a type
// gob would not save whole ([ErrUnsavableState]), and a state holding
// interface values must gob.Register their types.
//
// The state of a pipeline is one snapshot of all its stateful stages,
// taken at one cut (every stateful stage locked at once, so that no record
// or result is between two of them) and saved in one piece under the
// stages' names joined by ".". Adding, removing or renaming a stateful
// stage of a pipeline that already saved positions therefore changes that
// name: every stateful stage then finds no state and starts empty at the
// saved positions (a Window's first windows hold only what follows), except
// a [Table], which would miss every key written before and which Run
// refuses instead ([ErrStateMismatch]).
//
// # Scaling out
//
// On a source whose partitions are assigned to the process and taken from
// it while it runs ([Assignable]: source.Kafka, a member of a consumer
// group), the same pipeline runs on N processes, and the partition is the
// unit of state as it is of parallelism (the partition count caps the
// number of processes that share the work):
//
//   - Every stateful stage keeps its state per source partition, in a
//     table of its own: the keys of the partition's records, its marks, and
//     for a Window its own watermark (Kafka Streams keeps stream time per
//     task the same way), so a window's result does not depend on which
//     other partitions share its process.
//   - The state is saved to a [checkpoint.ChangelogStore] (a KafkaSource
//     is one: a compacted changelog topic per stage, Kafka Streams' design)
//     at every checkpoint, as the keys that changed since the last one,
//     then the partition's marks, before the positions are committed: the
//     cost of a checkpoint grows with the keys that changed, not with the
//     state.
//   - When the group assigns a partition, its state is restored before
//     any of its records is read ([RebalanceHooks].Assigned); a state that
//     reflects fewer records than the group's commit makes the partition
//     start at the state's own offset instead, and one that reflects more
//     counts the records between as replays, as after a crash.
//   - When the group revokes a partition, the records of it that have not
//     started in a stage (queued in Parallel and KeyOrdered stages) are
//     dropped, those started finish, and its state is saved and dropped
//     before its position is committed. When the member lost it (its
//     session expired), its state is dropped unsaved.
//   - A windowed join is refused there ([ErrNotCopartitioned]): its state
//     is not yet kept per partition; run it on one process.
//   - A key must follow the source's partitioning, or its records would be
//     counted in part by several processes: Run refuses a stateful stage
//     keyed with [KeyBy] ([ErrKeyNotPartitioned]) unless the key comes from
//     [Repartition] (through a topic partitioned by it) or is declared with
//     [Keyed.FollowsPartitioning].
//
// A save cut short by a crash leaves changes of some keys without the
// marks that close them: a restore drops them and rewrites those keys at
// the next save. Several stateful stages are each saved per partition;
// their saves are not one atomic piece as a snapshot's are (a crash
// between two of them restores them from two cuts).
//
// # Sources and sinks
//
// A [Source] returns batches and io.EOF at a clean end; strom's sources
// (a log partition or a whole topic, lines of a file) live in package
// source, its sinks in package sink, and package streamtest has fakes for
// unit-testing operators: a slice source, a collecting sink, a recording
// store, fault injection and a fake [Clock].
package stream
