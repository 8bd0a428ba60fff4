// Package bench holds the pipeline benchmarks of issue 6: strom's stream
// core against go-streams v0.13.0 and rill v0.7.0 on the same three-stage
// pipeline, the same pipeline over a log partition with a FileStore, a
// read-only follower's replay against the writer's, a tail follower's
// checkpoint rate and latency, KeyOrdered scaling and the completion
// tracker's memory. Everything is in _test.go files, so go-streams and rill
// stay test dependencies of this internal package only and never reach the
// public packages.
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
package bench
