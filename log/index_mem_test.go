package log

import (
	"runtime"
	"testing"
	"unsafe"
)

// indexMemory returns the bytes the in-memory indexes of a partition of
// totalBytes of frames of frameBytes each take, in DefaultSegmentBytes
// segments at DefaultIndexIntervalBytes, for each way an index is built,
// measured as the heap they occupy (runtime.MemStats.HeapAlloc before and
// after allocating them all) and as entries × 16 bytes.
//
// Every full segment of such a partition is identical, so one full
// segment's index is built by feeding the index builder the real frame
// positions (no file is written) and then held once per segment: the
// figure is what a partition of that size holds, not an extrapolation of
// a sample.
func indexMemory(totalBytes, frameBytes int64) map[string][2]int64 {
	perSeg := int64(DefaultSegmentBytes) / frameBytes
	frames := totalBytes / frameBytes
	full, rest := frames/perSeg, frames%perSeg
	build := func(how string, n int64) []indexEntry {
		s := &segment{indexedAt: -1}
		if how == "first read of a trusted segment" {
			s.index = newIndex(n*frameBytes, DefaultIndexIntervalBytes)
		}
		for i := range n {
			s.maybeIndex(i, i*frameBytes, DefaultIndexIntervalBytes)
		}
		if how == "appended, then sealed" || how == "walked at open" {
			s.trimIndex()
		}
		return s.index
	}
	out := map[string][2]int64{}
	for _, how := range []string{"appended, then sealed", "walked at open", "first read of a trusted segment"} {
		one, last := build(how, perSeg), build(how, rest)
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		held := make([][]indexEntry, 0, full+1)
		entries := int64(0)
		for range full {
			held = append(held, append(make([]indexEntry, 0, cap(one)), one...))
			entries += int64(len(one))
		}
		held = append(held, append(make([]indexEntry, 0, cap(last)), last...))
		entries += int64(len(last))
		runtime.GC()
		runtime.ReadMemStats(&ms)
		out[how] = [2]int64{int64(ms.HeapAlloc - before), entries * int64(unsafe.Sizeof(indexEntry{}))}
		runtime.KeepAlive(held)
	}
	return out
}

// TestIndexOf10GiBOf64ByteRecordsStaysUnder64MiB ensures the sparse index
// of a partition holding 10 GiB of 64-byte records (104-byte frames), fully
// indexed (every sealed segment read at least once), stays under 64 MiB of
// memory however it was built, and prints the measured figures.
func TestIndexOf10GiBOf64ByteRecordsStaysUnder64MiB(t *testing.T) {
	frame := int64(frameSize(&Record{Value: make([]byte, 64)}))
	for how, m := range indexMemory(10<<30, frame) {
		t.Logf("index of 10 GiB of 64 B records (%s): %.1f MiB of heap, %.1f MiB of entries",
			how, float64(m[0])/(1<<20), float64(m[1])/(1<<20))
		if m[0] >= 64<<20 || m[1] >= 64<<20 {
			t.Errorf("%s: index takes %d bytes of heap (%d of entries), want under 64 MiB", how, m[0], m[1])
		}
	}
}

// BenchmarkIndexMemory reports, as index-MiB, the heap the sparse index of
// a partition of 10 GiB of 64 B records takes when every segment is
// indexed (the largest of the ways an index is built; see indexMemory).
func BenchmarkIndexMemory(b *testing.B) {
	frame := int64(frameSize(&Record{Value: make([]byte, 64)}))
	var worst int64
	for range b.N {
		for _, m := range indexMemory(10<<30, frame) {
			worst = max(worst, m[0])
		}
	}
	b.ReportMetric(float64(worst)/(1<<20), "index-MiB")
}
