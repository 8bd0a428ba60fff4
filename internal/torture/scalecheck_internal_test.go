package torture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckWindowsSortsMissingWrongDuplicateUnknown ensures the stateful
// check tells each failure apart: a (window, key) never emitted is
// missing, a result below or above its count is wrong (by its worker), a
// second copy is a duplicate and no failure, a window no record belongs
// to is unknown, and the sentinels' results are ignored.
func TestCheckWindowsSortsMissingWrongDuplicateUnknown(t *testing.T) {
	const w = 60_000
	expected := map[windowKey]int64{
		{start: 0, key: "a"}: 3,
		{start: 0, key: "b"}: 2,
		{start: w, key: "a"}: 1,
		{start: w, key: "c"}: 4,
	}
	results := []scaleResult{
		{Start: 0, End: w, Key: "a", Count: 3, Worker: "w0.0"},
		{Start: 0, End: w, Key: "a", Count: 3, Worker: "w1.0"},         // duplicate, right
		{Start: 0, End: w, Key: "b", Count: 1, Worker: "w1.0"},         // wrong, low
		{Start: w, End: 2 * w, Key: "a", Count: 2, Worker: "w0.1"},     // wrong, high
		{Start: w, End: 2 * w, Key: "a", Count: 1, Worker: "w0.1"},     // duplicate, right
		{Start: 2 * w, End: 3 * w, Key: "a", Count: 1, Worker: "w0.1"}, // unknown window
		{Start: 0, End: w / 2, Key: "b", Count: 2, Worker: "w0.1"},     // unknown: wrong size
		{Start: 9 * w, End: 10 * w, Key: "sentinel-03", Count: 1, Worker: "w0.1"},
	}
	c := checkWindows(expected, results, w)
	assert.Equal(t, 4, c.Expected)
	assert.Equal(t, 7, c.Results)
	assert.Equal(t, 3, c.Distinct)
	assert.Equal(t, 1, c.Missing, "c's window was never emitted")
	assert.Equal(t, map[int64]int{w: 1}, c.MissingByWindow)
	assert.Equal(t, 2, c.Wrong)
	assert.Equal(t, 1, c.WrongLow)
	assert.Equal(t, 1, c.WrongHigh)
	assert.Equal(t, 2, c.WrongPairs)
	assert.Equal(t, map[string]int{"w1.0": 1, "w0.1": 1}, c.WrongBy)
	assert.Equal(t, 2, c.Duplicates)
	assert.Equal(t, 2, c.Unknown)
	assert.Equal(t, 1, c.Sentinels)
	require.Len(t, c.missingEx, 1)
	assert.Contains(t, c.missingEx[0], "c [")
}

// TestCheckWindowsPassesExactResults ensures a run that emitted every
// (window, key) once with its count passes with nothing to report.
func TestCheckWindowsPassesExactResults(t *testing.T) {
	d := genScaleData(17, 5000, 50)
	expected := d.expected()
	var results []scaleResult
	for k, n := range expected {
		results = append(results, scaleResult{Start: k.start, End: k.start + scaleWindow.Milliseconds(), Key: k.key, Count: n, Worker: "w0.0"})
	}
	c := checkWindows(expected, results, scaleWindow.Milliseconds())
	assert.Equal(t, WindowCheck{Expected: len(expected), Results: len(expected), Distinct: len(expected),
		WrongBy: map[string]int{}, MissingByWindow: map[int64]int{}}, c)
}

// TestCheckRelayedSortsMissingDuplicatePhantom ensures the stateless
// check finds an input record never relayed, counts a second copy as a
// duplicate, and calls a relayed record that names no input record (or
// another key) a phantom.
func TestCheckRelayedSortsMissingDuplicatePhantom(t *testing.T) {
	input := map[[2]int64]relayInput{
		{0, 0}: {key: "a", ts: 10},
		{0, 1}: {key: "b", ts: 11},
		{1, 0}: {key: "c", ts: 12},
	}
	results := []scaleRelayed{
		{Partition: 0, Offset: 0, Key: "a", Timestamp: 10, Worker: "w0.0"},
		{Partition: 0, Offset: 0, Key: "a", Timestamp: 10, Worker: "w1.0"},
		{Partition: 1, Offset: 0, Key: "c", Timestamp: 12, Worker: "w1.0"},
		{Partition: 1, Offset: 1, Key: "c", Timestamp: 13, Worker: "w1.0"}, // no such record
		{Partition: 0, Offset: 1, Key: "x", Timestamp: 11, Worker: "w1.0"}, // another key
	}
	c := checkRelayed(input, results)
	assert.Equal(t, 3, c.Input)
	assert.Equal(t, 5, c.Results)
	assert.Equal(t, 2, c.Distinct)
	assert.Equal(t, 1, c.Missing)
	assert.Equal(t, 1, c.Duplicates)
	assert.Equal(t, 2, c.Phantoms)
	require.Len(t, c.missingEx, 1)
	assert.Contains(t, c.missingEx[0], "partition 0 offset 1")
}

// TestGenScaleDataReplaysItsSeedWithinTheDisorderBound ensures the input
// is the seed's: the same seed gives the same records, each event time
// at most scaleDisorder behind its place (so below the window's
// OutOfOrderness), and the expected counts add up to the records.
func TestGenScaleDataReplaysItsSeedWithinTheDisorderBound(t *testing.T) {
	a, b := genScaleData(17, 12_000, 100), genScaleData(17, 12_000, 100)
	require.Equal(t, a.recs, b.recs)
	require.NotEqual(t, a.recs, genScaleData(18, 12_000, 100).recs)
	require.Less(t, scaleDisorder, scaleOutOfOrderness)
	newest := int64(0)
	for i, r := range a.recs {
		place := scaleBase + int64(i)*a.step
		require.LessOrEqual(t, r.ts, place, "record %d", i)
		require.GreaterOrEqual(t, r.ts, place-scaleDisorder.Milliseconds(), "record %d", i)
		require.Greater(t, r.ts, newest-scaleOutOfOrderness.Milliseconds(), "record %d would be late even in order", i)
		newest = max(newest, r.ts)
	}
	require.Greater(t, a.sentinel, newest+scaleOutOfOrderness.Milliseconds()+scaleWindow.Milliseconds())
	var total int64
	for _, n := range a.expected() {
		total += n
	}
	require.Equal(t, int64(len(a.recs)), total)
}
