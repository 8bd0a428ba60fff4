// Package bench holds the pipeline benchmarks of issue 6: strom's stream
// core against go-streams v0.13.0 and rill v0.7.0 on the same three-stage
// pipeline, the same pipeline over a log partition with a FileStore, a
// read-only follower's replay against the writer's, a tail follower's
// checkpoint rate and latency, KeyOrdered scaling and the completion
// tracker's memory; and issue 7's Kafka relay in both directions against
// kfake, beside a plain franz-go loop; and issue 17's time to the first
// checkpoint with a slow handler. Everything is in _test.go files, so
// go-streams and rill stay test dependencies of this internal package only
// and never reach the public packages.
//
// `make bench` runs them with the log's benchmarks and prints one table
// (internal/cmd/benchtable) in which each strom figure is divided by its
// baseline measured in the same run:
//
//	go test -run '^$' -bench . -benchmem ./internal/bench/
//
// The baseline of the log replay (BenchmarkThreeFromLog/rw) is go-streams
// from memory (BenchmarkThree/gostreams): the faster of the two ways to
// feed go-streams, so the stricter ratio; the table's row says so.
//
// What one op is, per benchmark:
//
//   - BenchmarkThree/{strom,gostreams,rill}: one record (b.N records through
//     one pipeline), so ns/op and allocs/op are per record.
//   - BenchmarkThreeFromLog/*: one replay of the whole fixture partition
//     (1,048,576 records of 64 B); allocs/record is reported beside
//     allocs/op.
//   - BenchmarkTailFollow: one 3 s run whatever b.N (an op takes longer
//     than -benchtime=1s, so the framework stops at b.N = 1).
//   - BenchmarkKeyOrdered/n=*: 1,024 records through a 1 ms handler.
//   - BenchmarkTrackerMemory: one Begin+Done of one offset, beside a
//     tracker holding 1,000,000 offsets in flight.
//   - BenchmarkRelayLogToKafka/{100B,1KiB}/{strom,franz} (issue 7): one
//     relay of a whole 3-partition log topic (100,000 records of 100 B, or
//     20,000 of 1 KiB) to a fresh kfake topic; strom is source.Topic ->
//     sink.Kafka checkpointing to a FileStore, franz a plain franz-go
//     produce loop (acks=all, idempotent) over log.Reader replays.
//   - BenchmarkRelayKafkaToLog/{100B,1KiB}/{strom,franz} (issue 7): one
//     relay of a whole 3-partition kfake topic (same sizes) into a fresh
//     log topic as a fresh consumer group; strom is source.Kafka ->
//     sink.Log checkpointing to the group, franz a plain consumer group
//     loop (PollFetches, Topic.AppendBatch, CommitUncommittedOffsets).
//     Both relay benchmarks report records/s; strom/franz is the cost of
//     strom's guarantees (target >= 0.8x).
//   - BenchmarkWindow/{stateless,tumbling/*} and BenchmarkAggregate/count/*
//     (issue 9, window_test.go): one record (b.N records through one
//     pipeline): a tumbling 1-minute count and an Aggregate count over
//     1,000 keys beside the stateless three stages over the same records,
//     without a store and with a MemoryStore or FileStore (default policy
//     or CheckpointEachBatch); allocs/record is allocs/op unrounded, and
//     state-B/key the last snapshot's size over the 1,000 keys in it.
//   - BenchmarkJoin/{stateless,table/*} (issue 21, join_test.go): one op
//     is one stream record: a stream-table join of 64 B records with a
//     table of 100,000 rows read in the same pipeline (every record finds
//     its row), without a store and with a MemoryStore, beside the
//     stateless three stages over the same kind of source; state-B/key is
//     the table's snapshot over its 100,000 keys. BenchmarkJoin/window/*:
//     an inner JoinWindow within 10 s of two inputs of b.N/2 records each
//     (one record per ms of event time, 20,000 keys: one partner per
//     record), state-B/key the snapshot of the last 10 s held over its
//     10,000 keys.
//   - BenchmarkFirstCheckpoint (issue 17, firstcheckpoint_test.go): one
//     stream.ConsumeForever with default options from an empty FileStore
//     over a partition of 2,000 records of 100 B (about one 256 KiB source
//     batch), a 2 ms handler, until its first Save of a position above 0:
//     ms-to-first-checkpoint is the mean time from the first handler call
//     to that Save (target below 500 ms; a pipeline that saves whole
//     batches only takes about 4 s), first-position the position saved.
//     make torture's scenario slow times the same across processes.
package bench
