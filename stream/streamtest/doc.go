// Package streamtest has fakes for unit-testing pipelines and operators built
// with package stream, with fault injection:
//
//   - [Slice] is a source of a slice's values, with lineage topic [Topic],
//     partition [Partition] and offset = index, read in batches of a chosen
//     size, resumable from a checkpoint store, and able to fail a chosen Read.
//   - [Collect] returns a sink that keeps every value written to it, and can
//     fail a chosen Write.
//   - [RecordingStore] is a checkpoint store that records every Save in order
//     and can fail a chosen Save or every Load.
//
// Every fake is safe for concurrent use, so a test may inspect it while a
// pipeline runs.
package streamtest
