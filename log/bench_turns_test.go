package log_test

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// appendTurnCycles is how many cycles of turns BenchmarkAppendTurns takes
// after its warm-up cycle.
const appendTurnCycles = 8

// appendTurnSide is one side of BenchmarkAppendTurns: what its metrics are
// named after, and a turn of n records in a fresh directory.
type appendTurnSide struct {
	name string
	n    int
	run  func(b *testing.B, dir string, n int) time.Duration
}

// BenchmarkAppendTurns is make bench's appends family, per value size: the
// appends of BenchmarkSegmentAppend (each write path, 1, 64 and 1,024
// records a call) and the three baselines (BenchmarkBaselineDurablePwrite,
// which they are judged against, BenchmarkBaselineMappedStore and
// BenchmarkBaselineFramedPwrite) take turns in one process: a warm-up
// cycle, then appendTurnCycles cycles of one turn of every side, in order
// in the even cycles and in reverse in the odd ones, each turn in a fresh
// directory removed after it, the machine synced and the heap collected
// before it. A turn writes the same records on every side, about 200 ms of
// the durable loop: 2,000,000 of 64 B (500,000 for the one-a-call appends
// and the mapped store loop, which the CPU bounds, as make bench's
// oneACall64B) and 250,000 of 1 KiB. One op is the whole run (make bench
// runs it with -benchtime 1x).
//
// It reports, per side, <side>-records/s, its median rate over the
// cycles; and per ratio the table shows, the median over the cycles of
// the ratio of two sides' rates in the same cycle: <side>-x-durable for
// every append, mmap-1-x-mapped and <mode>-1024-x-framed.
//
// Why (issue 24): with one process a side, a round at a time, the sides of
// a round were 10 to 20 s apart and the VM disk's rate moved in between: a
// round's ratio scattered by 20% (sd) for the 1 KiB appends of 1,024 a
// call and 25% against the mapped store loop. Turns of 200 ms a cycle
// apart share more of it.
func BenchmarkAppendTurns(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("value="+sizeName(size), func(b *testing.B) {
			many, few := 250_000, 250_000
			if size == 64 {
				many, few = 2_000_000, 500_000
			}
			noop := func() {}
			sides := []appendTurnSide{{"durable", many, func(b *testing.B, dir string, n int) time.Duration {
				return durableRun(b, dir, size, n, noop)
			}}}
			for _, mode := range modes {
				for _, batch := range []int{1, 64, 1024} {
					n := many
					if batch == 1 {
						n = few
					}
					sides = append(sides, appendTurnSide{fmt.Sprintf("%s-%d", mode, batch), n, func(b *testing.B, dir string, n int) time.Duration {
						return appendRun(b, dir, mode, size, batch, n, noop)
					}})
				}
			}
			sides = append(sides,
				appendTurnSide{"mapped", few, func(b *testing.B, dir string, n int) time.Duration { return mappedRun(b, dir, size, n, noop) }},
				appendTurnSide{"framed", many, func(b *testing.B, dir string, n int) time.Duration { return framedRun(b, dir, size, n, noop) }},
			)
			turn := func(s appendTurnSide) float64 {
				dir := b.TempDir()
				elapsed := s.run(b, dir, s.n)
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				return float64(s.n) / elapsed.Seconds()
			}
			for _, s := range sides { // warm-up
				turn(s)
			}
			rates := make([]map[string]float64, appendTurnCycles)
			for c := range rates {
				rates[c] = map[string]float64{}
				for i := range sides {
					s := sides[i]
					if c%2 == 1 {
						s = sides[len(sides)-1-i]
					}
					rates[c][s.name] = turn(s)
				}
			}
			over := func(name string, f func(map[string]float64) float64) float64 {
				xs := make([]float64, len(rates))
				for c, r := range rates {
					xs[c] = f(r)
				}
				return medianOf(xs)
			}
			for _, s := range sides {
				b.ReportMetric(over(s.name, func(r map[string]float64) float64 { return r[s.name] }), s.name+"-records/s")
				if s.name != "durable" && s.name != "mapped" && s.name != "framed" {
					b.ReportMetric(over(s.name, func(r map[string]float64) float64 { return r[s.name] / r["durable"] }), s.name+"-x-durable")
				}
			}
			b.ReportMetric(over("", func(r map[string]float64) float64 { return r["mmap-1"] / r["mapped"] }), "mmap-1-x-mapped")
			for _, mode := range modes {
				name := fmt.Sprintf("%s-1024", mode)
				b.ReportMetric(over("", func(r map[string]float64) float64 { return r[name] / r["framed"] }), name+"-x-framed")
			}
		})
	}
}
