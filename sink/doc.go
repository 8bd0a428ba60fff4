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
