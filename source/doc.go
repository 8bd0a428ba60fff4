// Package source holds strom's sources: the readers that feed a pipeline
// built with package stream. Each source implements stream.Source (Read
// returns batches, io.EOF ends a finite source) and stream.Resumer (Resume
// restarts it from a checkpoint store), so it works with stream.From and with
// stream.ConsumeForever.
//
// # Log partitions
//
// [Partition] reads one partition of a topic of a log.Log:
//
//	lg, err := log.Open(dir, log.ReadOnly())
//	...
//	src := source.Partition(lg, "events", 0, source.FromStore(store))
//	err = stream.From(src).Map(handle).Checkpointing(store).Run(ctx)
//
// Every element carries the log.Record as its Value and the record's Topic,
// Partition and Offset as its lineage, which is what the checkpoint saves.
// The source opens lazily, on its first Read; the log stays the caller's and
// is never closed by the source. A consumer opens its log with
// log.ReadOnly(), which can tail a log another process writes.
//
// # Where reading starts
//
// A [Start] picks the first offset when the source opens: [Earliest] (the log
// start offset), [Latest] (the high watermark: only new records), [At] (a given
// offset, which must lie between the two) or [FromStore] (the position a
// checkpoint store saved, else Earliest). A store that fails to load, such as
// a corrupt position file (checkpoint.ErrCorrupt), is an error from Read: a
// broken checkpoint never silently restarts from the beginning, and a saved
// position outside the partition's range is log.ErrOffsetOutOfRange rather
// than a silent jump.
//
// [PartitionSource.Resume] moves the next Read to the store's position (or the
// configured Start when the store has none); stream.ConsumeForever calls it at
// start and after every failure. [PartitionSource.Close] drops the reader; the
// next Read opens again where the source was.
//
// # Replay and follow
//
// By default a partition source follows: Read waits for new records and never
// ends (in-process appends wake it at once; appends from another process are
// seen within the log's polling interval). With [Replay] it ends instead:
// Read returns io.EOF at the high watermark as it was when the source opened,
// and records appended after that are not returned. [MaxBytes] bounds a batch
// (default 1 MiB).
//
// # Lines of a file
//
// [Lines] yields the lines of a file as strings, in batches of up to 500
// ([MaxLines]), then io.EOF. The '\n' and one '\r' before it are stripped (LF
// and CRLF files read the same), every other byte is kept, trailing spaces
// included; a last line without a terminator is a line, and nothing after a
// final '\n' is. There is no limit on a line's length. The lineage is a topic
// named after the file ([LinesTopic] overrides it), partition 0, and the
// 0-based line index as offset, so a checkpointed run over a file resumes at
// the first line not yet handled.
//
// # Errors
//
// io.EOF (the end of a replay or a file) and ctx.Err() (a cancelled Read) are
// returned as they are. Every other error names what failed: a
// [*PartitionError] gives the topic and partition ("source: topic events
// partition 0: ..."), a [*FileError] the file; both wrap the cause for
// errors.Is (log.ErrUnknownTopic, log.ErrOffsetOutOfRange,
// checkpoint.ErrCorrupt, fs.ErrNotExist, ...). An error that arrives together
// with records is returned by the Read after the one that returns them.
//
// # Concurrency
//
// A source is read by one goroutine: Read, Resume and Close must not run
// concurrently. To stop a Read that is waiting, cancel its context.
package source
