package bench

import (
	"testing"

	"github.com/strom-dev/strom/checkpoint"
)

// trackerInFlight is how many offsets BenchmarkTrackerMemory holds begun
// and unfinished.
const trackerInFlight = 1_000_000

// BenchmarkTrackerMemory is issue 6's sixth figure: a
// checkpoint.NewTracker(1<<20) partition with 1,000,000 offsets begun and
// none finished reports its ring's bytes per record in flight and MiB
// (PartitionTracker.MemoryBytes). The timed op is one Begin (TryBegin of
// one offset) and its Done on a second partition of the same tracker, in
// the steady state: 0 allocs/op.
func BenchmarkTrackerMemory(b *testing.B) {
	tr := checkpoint.NewTracker(1 << 20)
	full := tr.Partition("t", 0)
	offs := make([]int64, 1024)
	epochs := make([]int32, 1024)
	for base := int64(0); base < trackerInFlight; base += int64(len(offs)) {
		k := min(len(offs), int(trackerInFlight-base))
		for i := range k {
			offs[i] = base + int64(i)
		}
		if n := full.TryBegin(offs[:k], epochs[:k]); n != k {
			b.Fatalf("TryBegin registered %d of %d at %d", n, k, base)
		}
	}
	if got := full.InFlight(); got != trackerInFlight {
		b.Fatalf("in flight %d, want %d", got, trackerInFlight)
	}
	mem := full.MemoryBytes()

	pt := tr.Partition("t", 1)
	one, ep := make([]int64, 1), make([]int32, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		one[0] = int64(i)
		if pt.TryBegin(one, ep) != 1 {
			b.Fatal("TryBegin registered nothing")
		}
		pt.Done(one[0])
	}
	b.StopTimer()
	b.ReportMetric(float64(mem)/trackerInFlight, "bytes/record")
	b.ReportMetric(float64(mem)/(1<<20), "MiB")
}
