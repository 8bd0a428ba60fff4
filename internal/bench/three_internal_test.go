package bench

import "testing"

// TestThreeStagePipelinesAgree ensures the three pipelines the benchmarks
// compare do the same work: every record passes, and the sink sees the
// same count and sum of lengths.
func TestThreeStagePipelinesAgree(t *testing.T) {
	const n = 5000
	sn, ssum, err := stromThree(newMemSource(n), nil)
	if err != nil {
		t.Fatal(err)
	}
	gn, gsum := goStreamsThree(n)
	rn, rsum, err := rillThree(n)
	if err != nil {
		t.Fatal(err)
	}
	want := n * valueSize
	if sn != n || gn != n || rn != n || ssum != want || gsum != want || rsum != want {
		t.Fatalf("strom %d/%d, go-streams %d/%d, rill %d/%d; want %d/%d", sn, ssum, gn, gsum, rn, rsum, n, want)
	}
}
