// Package sink holds strom's sinks: where a pipeline built with package
// stream writes its output. Each implements stream.Sink (Write receives one
// batch and returns an error that stops the pipeline).
//
// # The log
//
// [Log] appends records to a topic of a log.Log. The topic's partitioner picks
// the partition from each record's Key: Kafka's murmur2 for a key (the same
// partition number as Kafka would choose, see log.KafkaPartition), round-robin
// for a nil key. With [Synced], Write forces every partition it wrote to disk
// before it returns, so a checkpoint the pipeline saves afterwards is backed
// by durable output; without it, output is as durable as the log's flush
// policy makes it.
//
//	out, err := lg.CreateTopic("alerts", 4)
//	...
//	err = stream.From(src).Filter(isAlert).To(sink.Log(out, sink.Synced())).Checkpointing(store).Run(ctx)
//
// # Exactly once into the log
//
// A [LogSink] is also the checkpoint store, and the transactor, of a
// pipeline under stream.ExactlyOnce that writes into its topic: from the
// log or from Kafka, each result is then in the topic once across
// crashes, kill -9 included.
//
//	out := sink.Log(outTopic)
//	err := stream.From(source.Topic(lg, "in", source.FromStore(out)), stream.ExactlyOnce()).
//		Map(handle).To(out).Checkpointing(out).Run(ctx)
//
// One process writes a topic (its writer lock), so the positions can live
// beside the topic instead of in it. Each transaction (every
// stream.TransactionInterval, 100 ms by default) the pipeline is drained
// and EndTransaction commits: with [Synced] it syncs every partition the
// transaction wrote, then it replaces the topic's [TransactionFile] (in
// log.Topic.Dir: temporary file, fsync, rename, folder fsync) with one
// holding a sequence number, every partition's next offset as its
// committed end, the input positions (topic, partition, offset, epoch),
// and the state snapshots of the pipeline's windows and aggregates (a
// LogSink is a checkpoint.StateStore). The rename is the commit: records,
// positions and state become the committed ones together. When a
// transaction aborts (a record abandoned, a failure), and when the next
// BeginTransactions finds records past the committed ends (the process
// was killed mid-transaction), the partitions are truncated back to their
// committed ends (log.Partition.Truncate), and the pipeline starts again
// from the committed positions and state: what the lost transaction wrote
// is written again, once. An abort makes Run fail with
// stream.ErrTransactionAborted; a new Run goes on.
//
// The cost, per transaction that wrote or moved anything (an idle one
// costs nothing): the file's rewrite, with two fsyncs (the file, the
// folder), plus with Synced one fsync per partition written. The file
// holds the state snapshot whole, rewritten at every transaction that
// changed it, as checkpoint.FileStore.SaveState rewrites it at every
// checkpoint: measured (BenchmarkLogSinkCommit, 100 records of 100 B a
// transaction, 3 partitions, 2-core shared machine, 2026-12) about 1.3 to
// 1.9 ms a commit without state and 4 to 13 ms with 1 MiB, so at the
// default interval a few percent of the time; a large state wants a
// longer interval. Without Synced a kill -9 loses nothing (the records
// are in the page cache), but a power loss can drop committed records:
// BeginTransactions then fails with [ErrCommittedLost] rather than
// guess.
//
// Readers of the topic see records as they are appended, before their
// transaction commits (Kafka's read_uncommitted): records of an aborted
// or killed transaction may be read and then truncated, and their
// offsets written again with other records (a new epoch: a reader that
// checkpoints with epochs, source.FromStore, does not skip the new
// records, but what it made of the vanished ones stays made). A reader
// that must see only committed records, such as another exactly-once
// pipeline, reads with source.ReadCommitted, which stops each partition
// at the end [CommittedEnds] gives and waits there for the next commit.
//
// Limits: one LogSink per exactly-once pipeline (JoinTransaction refuses
// a second: one file, one topic); the topic must be written by nothing
// else while the sink uses it, since records past the committed ends are
// truncated at the next start; a LogSink keeps positions only in
// transactions (Save fails with [ErrNoTransaction]; an at-least-once
// pipeline checkpoints to a checkpoint.FileStore). From a Kafka consumer
// group (source.Kafka), the runtime starts each assigned partition at the
// position the LogSink committed, not at the group's commit (a partition
// it holds no position of starts where the group says); a stateful
// stage on a group needs a changelog store, which a LogSink is not, so
// Kafka to the log is exactly once for stateless pipelines.
//
// # Kafka
//
// [Kafka] produces to a Kafka topic with franz-go. It is a
// stream.AsyncSink: under stream.Stream.To its writes are pipelined (the
// next batch is read while Kafka acknowledges the last), and a record
// counts as finished, so its source position may be saved, only once Kafka
// acknowledged it; Run returns only after every record written was
// acknowledged. That is "flush Kafka before saving the position" without
// the stall.
//
//	out, err := sink.Kafka([]string{"kafka-1:9092"}, "alerts")
//	...
//	defer out.Close()
//	err = stream.From(src).Filter(isAlert).To(out).Checkpointing(store).Run(ctx)
//
// The producer is idempotent with acks=all; keys pick partitions with
// Kafka's murmur2 (kgo.StickyKeyPartitioner(nil)), so a key lands in the
// same partition number as in the log; records without a key are sticky
// (one partition per batch), not round-robin. Key, Value, Headers and
// Timestamp are sent; the record's Topic, Partition and Offset (where it
// was read) are not, but name it in errors. A record Kafka refuses, or
// that is not acknowledged within [KafkaDeliveryTimeout] (30 s by default:
// an unreachable broker, a topic that does not exist, as topics are not
// auto-created), fails its write with a [*ProduceError] naming the Kafka
// topic and partition (the seed brokers when no partition was picked), the
// record's source, and the cause; it goes through the stage's failure
// policy (stop by default, Skip, DeadLetter; Retry does not apply:
// franz-go retries what can be retried). franz-go fails the records
// buffered behind a failed one in its partition, and a stopping pipeline
// withdraws what was not yet sent; on restart it produces again from the
// saved position, never past the failed record (at-least-once: records
// acknowledged but not yet saved are produced twice; a record already in
// flight behind the failed one may reach Kafka before it, and again after).
//
// A record that can never be sent is not retried either: one larger, as
// a record batch of its own ([KafkaRecordBytes]), than the producer's
// limit (1,000,012 bytes by default, franz-go's; raise it
// with [KafkaMaxRecordBytes], up to what the topic allows) fails its write
// at once with [ErrRecordTooLarge] (a [*RecordTooLargeError] with both
// sizes, in the *ProduceError naming the record's source topic, partition
// and offset), and so does one the broker refuses as too large. By default
// the pipeline stops there. To skip or dead-letter such records one by one
// and go on, check them before the sink with the policy they should get:
//
//	s.Tap(out.CheckSize, stream.Name("too-large"), stream.DeadLetter(sink.DeadLetter(dlq))).To(out)
//
// [KafkaClientOpts] passes franz-go options (linger, compression,
// TLS, SASL); [KafkaClient] brings a client of your own. Package kafkatest
// starts an in-process Kafka for tests.
//
// # Exactly once into Kafka
//
// With [KafkaTransactionalID] the sink is a transactional producer and a
// stream.Transactor: the checkpoint store of a stream.ExactlyOnce
// pipeline from the log (or any source a checkpoint.Store positions).
// Each transaction holds the records produced since the last one and the
// source positions past them, in the compacted topic
// [KafkaPositionsTopic] (the id + "-positions"), so a read_committed
// reader sees both or neither, and a restart starts from the committed
// positions: each record's output is visible once.
//
//	out, err := sink.Kafka(brokers, "orders-out", sink.KafkaTransactionalID("orders-relay"))
//	...
//	err = stream.From(source.Topic(lg, "orders", source.FromStore(out)), stream.ExactlyOnce()).
//		To(out).Checkpointing(out).Run(ctx)
//
// The id must stay the same across restarts and belong to one running
// sink: beginning its transactions fences the previous producer of the id
// ([ErrFenced]). An aborted transaction ends the Run with
// stream.ErrTransactionAborted; a new Run goes on from the committed
// positions. Other KafkaSinks of the pipeline (a dead-letter sink) join
// the sink's transactions; in a pipeline whose store is source.Kafka,
// plain KafkaSinks join that source's transactions instead.
//
// # Dead letters
//
// A record a stage cannot handle (a line that does not parse, a value a
// service rejects for good) need not stop the pipeline. stream.Skip drops
// it, counted in Stats; stream.DeadLetter hands it, as a stream.Failure, to
// a dead-letter sink and goes on. [DeadLetter] is that sink over a topic of
// the log:
//
//	dlq, err := lg.CreateTopic("orders.dlq", 1)
//	...
//	parsed := stream.MapTo(stream.From(src), parse,
//		stream.Retry(3, 100*time.Millisecond, time.Second),
//		stream.DeadLetter(sink.DeadLetter(dlq, sink.Synced())))
//
// Each dead letter is one record. A failure of a stage over log.Record keeps
// the original Key (so it lands in the partition Kafka's partitioner picks
// for it, as with [Log]), Value, Timestamp and headers; a []byte or string
// value is written as it is; anything else as JSON, or with fmt's %+v when
// JSON cannot encode it ([HeaderEncoding] says which). After the record's
// own headers come [HeaderError] (the error text), [HeaderStage],
// [HeaderTopic], [HeaderPartition], [HeaderOffset] (where the record was
// read) and [HeaderAttempt] (which call failed last), numbers in decimal. A
// dead-letter topic can thus be inspected with any reader of the log, and
// replayed into the source topic once the cause is fixed: the values are
// the original bytes. [DeadLetterRecord] builds the same record for a
// dead-letter sink of your own (Kafka, a file).
//
// A dead letter is written before the record's position may be saved: if
// the write fails, the pipeline stops with both the stage's and the
// dead-letter topic's errors (a [*TopicError]), and the record is read again
// on restart. On a sink stage (stream.Stream.To), a failed Write gives one
// dead letter per record of the batch. Without Synced, dead letters are as
// durable as the log's flush policy makes them, while the position saved
// past them may be on disk first: use Synced when a lost dead letter
// matters.
//
// # Functions and writers
//
// [Func] turns a function of a batch into a sink. [Lines] writes strings to an
// io.Writer, one per line, with one Write per batch.
//
// # Errors and delivery
//
// A sink's error is never swallowed: it stops the pipeline, and the position
// of the batch is not saved. Records of a failed batch that were written
// before the failure stay written, so a restart writes them again: delivery
// into a sink is at-least-once. [*TopicError] names the topic (and the
// partition, when one failed) of a failed log write and wraps the cause for
// errors.Is (log.ErrRecordTooLarge, log.ErrReadOnly, log.ErrClosed, ...).
package sink
