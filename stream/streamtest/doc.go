// Package streamtest has fakes for unit-testing pipelines and operators built
// with package stream:
//
//   - [Slice] is a source of a slice's values, with lineage topic [Topic],
//     partition [Partition] and offset = index, read in batches of a chosen
//     size, resumable from a checkpoint store, able to fail a chosen Read,
//     and with [Follow] able to wait at its end as a following source does.
//   - [Collect] returns a sink that keeps every value written to it, and can
//     fail a chosen Write.
//   - [RecordingStore] is a checkpoint store (with state snapshots) that
//     records every Save and SaveState in one order and can fail a chosen
//     Save, a chosen SaveState or every Load.
//   - [Faults] wraps a stage's function or sink to fail or panic at a chosen
//     record, or fail its first attempts to test stream.Retry.
//   - [Clock] is a fake stream.Clock, stepped by hand, for Batch's linger and
//     retry backoff without sleeps.
//   - [RunPipeline] runs a pipeline over a Slice to its end and returns its
//     outputs, saves, final position, error and stage counters.
//
// A complete operator test, the record at index 2 failing and skipped:
//
//	func TestUpperSkipsBadRecord(t *testing.T) {
//		faults := streamtest.NewFaults[string]().FailAt(2, errBad)
//		res := streamtest.RunPipeline(t.Context(), []string{"a", "b", "c", "d"},
//			func(s *stream.Stream[string]) *stream.Stream[string] {
//				return s.Map(faults.Map(upper), stream.Skip())
//			})
//		require.NoError(t, res.Err)
//		assert.Equal(t, []string{"A", "B", "D"}, res.Out)
//		assert.Equal(t, int64(1), res.Stage(stream.StageMap).Skipped)
//		assert.Equal(t, int64(4), res.Position) // saved past the skipped record
//	}
//
// Every fake is safe for concurrent use, so a test may inspect it while a
// pipeline runs.
package streamtest
