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
// is never closed by the source. Reading takes no writer lock: a process
// opens its log directory once, read-write if it also writes some topic
// (log.ReadOnly() otherwise), and follows topics another process writes.
//
// # Where reading starts
//
// A [Start] picks the first offset when the source opens: [Earliest] (the log
// start offset), [Latest] (the high watermark: only new records), [At] (a given
// offset, normally between the two) or [FromStore] (the position a
// checkpoint store saved, else Earliest). A store that fails to load, such as
// a corrupt position file (checkpoint.ErrCorrupt), is an error from Read: a
// broken checkpoint never silently restarts from the beginning, and a saved
// position above the high watermark is log.ErrOffsetOutOfRange rather than a
// silent jump (one below the log start offset follows the reset policy, see
// below).
//
// [PartitionSource.Resume] moves the next Read to the store's position (or the
// configured Start when the store has none); stream.ConsumeForever calls it at
// start and after every failure. [PartitionSource.Close] drops the reader; the
// next Read opens again where the source was.
//
// # When retention passes the position
//
// Retention (see the log package) deletes a partition's oldest segments, so
// the position a source is to read can fall below the log start offset: a
// checkpoint saved before the consumer went away, an [At] offset, or a
// follower that fell behind while it ran. Kafka's auto.offset.reset decides
// what happens, and so does [OnOutOfRange] here: [ResetEarliest] (the
// default) continues at the log start offset, [ResetLatest] at the high
// watermark, and [ResetError] makes Read fail with a [*PartitionError]
// wrapping the *log.OffsetOutOfRangeError, whose StartOffset tells where the
// log now starts. A reset is never silent: [PartitionSource.Resets] counts
// them and the [OnReset] hook receives each one, with the position lost, the
// position taken and how many offsets were skipped.
//
// The policy applies only below the log start offset, and to a position of
// a topic created again (below). A saved position
// whose epoch a later epoch followed (a truncation or a crash recovery
// reused offsets the consumer had passed) resumes where that later epoch
// began (log.Partition.ResumeOffset, KIP-320), which skips nothing. Any
// other position above the high watermark (a checkpoint of another log, a
// writer not yet reopened after a crash) is not moved by any policy: Read
// fails with an error wrapping log.ErrOffsetOutOfRange.
//
// # When the topic was deleted and created again
//
// A topic deleted and created again under the same name counts offsets from
// 0 again, so a position saved against the old topic would read as a
// valid one of the new as soon as it holds more records, skipping its
// first records. Each topic has an ID (log.Topic.ID, Kafka's topic ID),
// which [PartitionSource] and [TopicSource] report to the pipeline
// (stream.TopicIdentifier) and the pipeline saves with every position
// (checkpoint.Position.TopicID). A source resuming ([FromStore], Resume)
// from a position whose topic ID is not the topic's trusts no part of it:
// the [OnOutOfRange] policy applies as below the log start offset
// ([ResetEarliest]: the new topic's log start offset, reported to [OnReset]
// with [Reset.Recreated] naming both IDs), and [ResetError] fails with a
// [*TopicRecreatedError] ([ErrTopicRecreated]), permanent. A position
// without an ID (saved before topic IDs) or a topic without one (created
// before them, not written since) is trusted as before.
//
// # Replay and follow
//
// By default a partition source follows: Read waits for new records and never
// ends (in-process appends wake it at once; appends from another process
// wake it through inotify, see package log, "Readers"). With [Replay] it ends instead:
// Read returns io.EOF at the high watermark as it was when the source opened,
// and records appended after that are not returned. [MaxBytes] bounds a batch
// (default 256 KiB).
//
// # Read committed
//
// A topic written exactly once by a sink.LogSink holds, past each
// partition's committed end, the records of the transaction still open,
// or of one whose process was killed (truncated by its next start, and
// their offsets written again with other records). By default a source
// returns them as they are appended, like Kafka's read_uncommitted; with
// [ReadCommitted] it stops at the committed end and waits for the next
// commit, like read_committed. A pipeline reading such a topic to write
// it on exactly once needs it.
//
// # Topics
//
// [Topic] reads every partition of a topic (or those chosen with
// [Partitions]) as one source:
//
//	src := source.Topic(lg, "events", source.FromStore(store))
//	err = stream.ConsumeForever(ctx, src, store, handle)
//
// It is built on one [PartitionSource] per partition, so its elements carry
// the same lineage (topic, partition, offset, epoch) and a checkpointing
// pipeline saves a position per partition. The Start applies to each
// partition: [Earliest] and [Latest] are each partition's own ends,
// [FromStore] loads each partition's own position, and [At] gives every
// partition the same offset. [Replay], [MaxBytes], [OnOutOfRange] and
// [OnReset] are options of both Partition and Topic (they are [Option]s)
// and apply per partition; a topic replay ends with io.EOF once every
// partition has reached the high watermark it had at open, and a topic
// follow wakes as soon as any partition has records.
//
// Each batch holds the records of one partition. Partitions take turns: one
// goroutine per partition reads up to two batches ahead, and Read returns
// the next ready batch round-robin across partitions, so a partition with a
// large backlog never starves the others. The bytes read ahead, all
// partitions together, are bounded by [ReadAheadBytes] (64 MiB by default)
// whatever the number of partitions, and by two batches (2 x MaxBytes, 512
// KiB by default) per partition; a partition waiting for records holds
// none of it. Positions count only what Read returned:
// Close and Resume drop the read-ahead, which is read again later, so the
// guarantee stays at-least-once and Close then Read returns nothing twice.
// Close stops and waits for every goroutine the source started.
//
// A failure of the whole topic (a nil log, an unknown topic, an empty
// subset) is a [*PartitionError] whose Partition is [AllPartitions]; a
// failure of one partition (an id out of range, a start out of range, a
// failed read) names that partition and ends the Read that meets it, while
// the batches of other partitions already returned stay returned.
//
// # Kafka
//
// [Kafka] reads topics of a Kafka cluster as a member of a consumer group.
// Its elements are log.Records (key, value, headers, timestamp in
// milliseconds, topic, partition, offset, and the record's leader epoch as
// Epoch), so the handlers written for the log work on Kafka unchanged.
//
// Auto-commit is off: the source is its group's checkpoint.Store, and the
// pipeline's checkpoints are the group's commits:
//
//	src, err := source.Kafka(brokers, "billing", []string{"orders"})
//	...
//	err = stream.From(src).Map(handle).Checkpointing(src).Run(ctx)
//	// or: stream.ConsumeForever(ctx, src, src, handle)
//
// A commit is therefore the completion tracker's position, the lowest
// offset not yet finished per partition: with parallel stages, filters and
// batches no commit passes a record not yet handled, exactly as with the
// log. A save for a partition no longer assigned to the member, or one that
// would move the group's commit backwards, is dropped (counted in
// [KafkaStats]).
//
// On a rebalance the finished positions of the revoked partitions are
// committed before they are given up (the source is a
// stream.PositionsAware: Run hands it those positions), and no record of a
// revoked partition is handed on after the revocation; lost partitions
// (an expired session) are given up without a commit. Records of a revoked
// partition already in the pipeline finish, and the new owner may handle
// some of them again: at-least-once.
//
// The source offers the group the balancers cooperative-sticky, then range
// ([DefaultKafkaBalancers]; [KafkaBalancers] to choose), so that members of
// other clients on their defaults (librdkafka's range,roundrobin, the Java
// client's range,cooperative-sticky) can share its group, where franz-go's
// default, cooperative-sticky alone, is refused by them. A group with a
// member that does not offer cooperative-sticky runs range, an eager
// protocol: every rebalance revokes every partition of every member, with
// the commits above, before assigning them again.
//
// A partition the group never committed starts at [Earliest] (the default)
// or [Latest] ([KafkaStart]). The source opens on its first Read or Resume
// and checks, within [KafkaTimeout] (10 s by default), that a broker
// answers and that every topic exists: an unreachable broker is a
// [*KafkaError] naming the brokers, a missing topic a [*PartitionError]
// naming it and wrapping log.ErrUnknownTopic, both retryable, so
// ConsumeForever backs off and tries again. Resume reopens a closed source;
// positions always come from the group's commits, never from the store
// passed to Resume. [KafkaClientOpts] passes franz-go options (TLS, SASL,
// timings) through; [KafkaMaxRecords] bounds a batch, and
// [KafkaReadAheadBytes] (64 MiB by default) the bytes the client fetches
// ahead of Read, over all partitions and brokers.
//
// A stateful stage keyed by anything but the topic's Kafka key needs the
// records of a key in one partition first: [KafkaSource.Through] is the
// stream.Through that stream.Repartition sends them through, a repartition
// topic GROUP-NAME-repartition written by key and read back by another
// member of the same group:
//
//	via, err := src.Through("by-ip")
//	...
//	counts := stream.Window(stream.Repartition(attempts, ip, via), stream.Tumbling(time.Minute), ...)
//
// # Lines of a file
//
// [Lines] yields the lines of a file as strings, in batches of up to 500
// ([MaxLines]), then io.EOF. The '\n' and one '\r' before it are stripped (LF
// and CRLF files read the same, and strom produce strips the same), every
// other byte is kept, trailing spaces included ([KeepCR] keeps the '\r', as
// strom produce --keep-cr does); a last line without a terminator is a line, and nothing after a
// final '\n' is. There is no limit on a line's length. The lineage is a topic
// named after the file ([LinesTopic] overrides it), partition 0, the line's
// offset (its 0-based index in the file, plus the file's base offset, 0 for
// the first file read) and the file's generation as epoch, so a checkpointed
// run over a file resumes at the first line not yet handled:
//
//	src := source.Lines("/var/log/app.log", source.LinesFromStore(store))
//	err := stream.From(src).Map(handle).Checkpointing(store).Run(ctx)
//	// or: stream.ConsumeForever(ctx, source.Lines(path), store, handle)
//
// A file lives: it is rewritten, truncated, replaced. The rule is that a
// position is only ever applied to the file it counts lines of. The source
// keeps each file's identity (device, inode and a CRC32C of its first
// [FingerprintBytes] = 1 KiB, [FileIdentity]) in the checkpoint store, as
// the state snapshot "lines-identity.<topic>" of a checkpoint.StateStore,
// under a generation number that its lines carry as their epoch: the
// position the pipeline saves (offset, epoch) names the file it was counted
// in, and since the identity is saved before any line of the file is
// returned, and generations are never reused, a saved position never pairs
// with another file's identity. The source needs the store for that:
// [LinesSource.Resume] gives it (ConsumeForever calls it), and so does
// [LinesFromStore] for a first run.
//
// On opening, a file that is not the one of the position ([FileReplaced],
// [FileRewritten], [FileTruncated], [FileIdentityLost]) is never skipped
// silently: by default it is read from its first line, with offsets going on
// above the saved position, and [OnFileChanged] hears of it; with
// [OnFileChange]([FileChangeFail]) Read fails with a [*FileChangedError]
// (errors.Is [ErrFileChanged]) naming the file, the saved identity and what
// changed. A position saved without a generation (by hand, or through a
// store that is not a StateStore) is an unchecked line index, except that a
// file with fewer lines than it is [FileTruncated].
//
// [Follow] tails the file as tail -F does: Read waits for new lines (woken by
// inotify on the file's directory, and looking at least every
// [FollowInterval], 1 s by default), holds an unterminated last line
// back until its '\n' arrives, finishes the old file and goes on with the
// new one from its first line after a rename-and-create rotation, and starts
// the file again after a copy-truncate. Cancelling the context ends a
// waiting Read.
//
// # Errors
//
// io.EOF (the end of a replay or a file) and ctx.Err() (a cancelled Read) are
// returned as they are. Every other error names what failed: a
// [*PartitionError] gives the topic and partition ("source: topic events
// partition 0: ..."), a [*FileError] the file; both wrap the cause for
// errors.Is (log.ErrUnknownTopic, log.ErrOffsetOutOfRange,
// checkpoint.ErrCorrupt, fs.ErrNotExist, [ErrFileChanged], ...). An error
// that arrives together with records is returned by the Read after the one
// that returns them.
//
// # Concurrency
//
// A source is read by one goroutine: Read, Resume and Close must not run
// concurrently. To stop a Read that is waiting, cancel its context.
package source
