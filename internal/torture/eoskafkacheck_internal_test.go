package torture

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckExactlyOnceCountsLostDuplicatedOutOfOrder ensures scenario
// eos-kafka's check tells each failure apart, in the output's order: a (window,
// key) never committed is lost, a second copy is duplicated (and not also
// out of order), a window committed after a later one of its key is out
// of order, a count that differs is wrong, a window no record belongs to
// is unknown, and the sentinels' results are ignored.
func TestCheckExactlyOnceCountsLostDuplicatedOutOfOrder(t *testing.T) {
	const w = 60_000
	expected := map[windowKey]int64{
		{start: 0, key: "a"}:     3,
		{start: w, key: "a"}:     1,
		{start: 2 * w, key: "a"}: 2,
		{start: 0, key: "b"}:     2,
		{start: w, key: "b"}:     5,
		{start: 0, key: "c"}:     4,
	}
	results := []scaleResult{
		{Start: 0, End: w, Key: "a", Count: 3, Worker: "w0.0"},
		{Start: 2 * w, End: 3 * w, Key: "a", Count: 2, Worker: "w0.0"},
		{Start: w, End: 2 * w, Key: "a", Count: 1, Worker: "w0.1"},     // out of order: after a's 2w
		{Start: 0, End: w, Key: "a", Count: 3, Worker: "w0.1"},         // duplicated (also behind, counted once)
		{Start: 0, End: w, Key: "b", Count: 1, Worker: "w1.0"},         // wrong
		{Start: 3 * w, End: 4 * w, Key: "b", Count: 1, Worker: "w1.0"}, // unknown window
		{Start: 9 * w, End: 10 * w, Key: "sentinel-03", Count: 1, Worker: "w1.0"},
		// b's w and c's 0 never committed: lost
	}
	c := checkExactlyOnce(expected, committedAt(results), w)
	assert.Equal(t, 6, c.Expected)
	assert.Equal(t, 6, c.Results)
	assert.Equal(t, 2, c.Lost)
	assert.Equal(t, 1, c.Duplicated)
	assert.Equal(t, 1, c.OutOfOrder)
	assert.Equal(t, 1, c.Wrong)
	assert.Equal(t, 1, c.Unknown)
	assert.Equal(t, 1, c.Sentinels)
	assert.Equal(t, 6, c.Failures())
	require.Len(t, c.lostEx, 2)
	assert.Contains(t, c.lostEx[0], "c ")
	assert.Contains(t, c.lostEx[1], "b ")
	require.Len(t, c.dupEx, 1)
	assert.Contains(t, c.dupEx[0], "by w0.1 at p0@3, first count 3 by w0.0 at p0@0")
}

// committedAt places results in one output partition, in order.
func committedAt(results []scaleResult) []eosResult {
	out := make([]eosResult, len(results))
	for i, r := range results {
		out[i] = eosResult{scaleResult: r, offset: int64(i)}
	}
	return out
}

// TestCheckExactlyOnceFindsNothingInTheUninterruptedRun ensures the check
// passes the output an uninterrupted run commits: every expected result
// once, each key's in the order of its windows, whatever the keys'
// interleaving.
func TestCheckExactlyOnceFindsNothingInTheUninterruptedRun(t *testing.T) {
	d := genScaleData(7, 400, 16)
	expected := d.expected()
	w := scaleWindow.Milliseconds()
	var results []scaleResult
	for k, n := range expected {
		results = append(results, scaleResult{Start: k.start, End: k.start + w, Key: k.key, Count: n, Worker: "w0.0"})
	}
	// Any interleaving of keys, each key's windows in order.
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
	byKey := make(map[string][]int)
	for i, r := range results {
		byKey[r.Key] = append(byKey[r.Key], i)
	}
	for _, idx := range byKey {
		starts := make([]scaleResult, len(idx))
		for j, i := range idx {
			starts[j] = results[i]
		}
		slices.SortFunc(starts, func(a, b scaleResult) int { return cmp.Compare(a.Start, b.Start) })
		for j, i := range idx {
			results[i] = starts[j]
		}
	}
	c := checkExactlyOnce(expected, committedAt(results), w)
	assert.Zero(t, c.Failures())
	assert.Equal(t, len(expected), c.Results)
}
