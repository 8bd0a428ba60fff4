package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMedianAndSpreadOfRounds ensures the verdict's median takes the middle
// round (the mean of the two middle ones for an even count) without
// reordering the rounds, and the spread is the lowest and highest.
func TestMedianAndSpreadOfRounds(t *testing.T) {
	xs := []float64{3, 1, 2}
	assert.Equal(t, 2.0, median(xs))
	assert.Equal(t, []float64{3, 1, 2}, xs, "median sorted its argument")
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 7.0, median([]float64{7}))
	assert.Equal(t, 0.0, median(nil))
	lo, hi := spread([]float64{0.9, 1.2, 1.0})
	assert.Equal(t, 0.9, lo)
	assert.Equal(t, 1.2, hi)
	assert.Equal(t, "-", spreadText([]float64{1}, ratioText))
	assert.Equal(t, "0.90x–1.20x (3)", spreadText([]float64{1.2, 0.9, 1.0}, ratioText))
	assert.Equal(t, "8.3–8.5 B/key (2)", spreadText([]float64{8.5, 8.3}, bytesPerKey))
	assert.Equal(t, "794–911 records/s (3)", spreadText([]float64{911, 794, 890}, rate))
}

// TestRatiosPairTheSameRound ensures a round's ratio divides the figure by
// the baseline measured in the same round, not by a median of all of
// them, and a baseline measured fewer times lends its last round.
func TestRatiosPairTheSameRound(t *testing.T) {
	assert.Equal(t, []float64{2, 0.5, 1}, ratios([]float64{2, 1, 3}, []float64{1, 2, 3}))
	assert.Equal(t, []float64{1, 2, 3}, ratios([]float64{2, 4, 6}, []float64{2}))
	assert.Equal(t, []float64{2}, ratios([]float64{2, 0}, []float64{1, 1}), "a zero figure is no ratio")
	assert.Nil(t, ratios([]float64{1}, nil))
}

// TestScheduleInterleavesTheSidesRoundByRound ensures each family's sides
// take turns (A B, then A B again), the rounds of the families take turns
// (round 1 of each, then round 2 of each), and a family marked once runs a
// single round, in the first pass.
func TestScheduleInterleavesTheSidesRoundByRound(t *testing.T) {
	fams := []family{
		{name: "pair", sides: []string{"A", "B"}},
		{name: "single", sides: []string{"S", "T"}, once: true},
		{name: "three", sides: []string{"X", "Y", "Z"}},
	}
	var got []string
	for _, inv := range schedule(fams, 3) {
		got = append(got, inv.side+string(rune('0'+inv.round)))
	}
	assert.Equal(t, strings.Fields("A1 B1 S1 T1 X1 Y1 Z1 A2 B2 X2 Y2 Z2 A3 B3 X3 Y3 Z3"), got)
	assert.Len(t, schedule(fams, 0), 2+2+3, "rounds below 1 run one")
}

// TestBenchtimeOfAFamilyIsItsOwnThenTheRuns ensures a family's -benchtime
// (the turns' 1x) overrides the run's, and the run's holds otherwise.
func TestBenchtimeOfAFamilyIsItsOwnThenTheRuns(t *testing.T) {
	assert.Equal(t, "8x", (&family{benchtime: "8x"}).benchtimeOf("1s"))
	assert.Equal(t, "1s", (&family{}).benchtimeOf("1s"))
}

// TestScheduleRunsAFamilyItsOwnLeastRounds ensures a family asking for
// more rounds than the run gets them, and one asking for fewer gets the
// run's, spread evenly over the passes of the run.
func TestScheduleRunsAFamilyItsOwnLeastRounds(t *testing.T) {
	fams := []family{{name: "noisy", sides: []string{"A", "B"}, rounds: 4}, {name: "calm", sides: []string{"C"}, rounds: 1}}
	var got []string
	for _, inv := range schedule(fams, 2) {
		got = append(got, fmt.Sprintf("%s%d/%d", inv.side, inv.round, inv.rounds))
	}
	assert.Equal(t, strings.Fields("A1/4 B1/4 C1/2 A2/4 B2/4 A3/4 B3/4 C2/2 A4/4 B4/4"), got)
}

// TestBenchPatternRunsOneSideOnly ensures a side's -test.bench pattern is
// anchored per level, so BenchmarkThree/strom runs neither
// BenchmarkThreeFromLog nor a sub-benchmark named strom-json, and that a
// side given as a pattern is kept.
func TestBenchPatternRunsOneSideOnly(t *testing.T) {
	assert.Equal(t, `^BenchmarkThree$/^strom$`, benchPattern("BenchmarkThree/strom"))
	assert.Equal(t, `^BenchmarkSegmentAppend$/^mode=file$/^value=64B$/^batch=1$`, benchPattern("BenchmarkSegmentAppend/mode=file/value=64B/batch=1"))
	assert.Equal(t, `^BenchmarkOpenDamagedLength$/^len=0x7fffffff\.x$`, benchPattern("BenchmarkOpenDamagedLength/len=0x7fffffff.x"))
	assert.Equal(t, `^(A|B)$`, benchPattern(`^(A|B)$`))
}

// TestEveryTableFigureIsInAFamily ensures make bench runs every benchmark
// the table shows: a row whose benchmark no family runs would print
// "not run" on every machine.
func TestEveryTableFigureIsInAFamily(t *testing.T) {
	runs := func(name string) bool {
		for _, f := range families() {
			for _, s := range f.sides {
				if name == s || strings.HasPrefix(name, s+"/") {
					return true
				}
			}
		}
		return false
	}
	for _, r := range rows() {
		assert.True(t, runs(r.bench), "row %q: no family runs %s", r.figure, r.bench)
		if r.baseline != "" {
			assert.True(t, runs(r.baseline), "row %q: no family runs its baseline %s", r.figure, r.baseline)
		}
	}
}

// TestMachineHeaderParsesProcFiles ensures the header reads the CPU model,
// the load averages and the stolen share of CPU time from the kernel's
// files as they are written.
func TestMachineHeaderParsesProcFiles(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	assert.Equal(t, "AMD EPYC 7B13", cpuModel(strings.NewReader(cpuinfo)))
	assert.Equal(t, "", cpuModel(strings.NewReader("processor\t: 0\n")))
	assert.Equal(t, "0.52 0.58 0.59", loadAverage("0.52 0.58 0.59 1/257 12345\n"))
	assert.Equal(t, "?", loadAverage(""))

	a, err := parseCPUTimes("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n")
	require.NoError(t, err)
	assert.Equal(t, cpuTimes{total: 1000, steal: 35}, a)
	b, err := parseCPUTimes("cpu  200 0 100 1600 20 0 10 70 0 0\n")
	require.NoError(t, err)
	assert.InDelta(t, 3.5, stealPercent(a, b), 1e-9)
	_, err = parseCPUTimes("intr 1 2 3\n")
	assert.Error(t, err)

	dirty, wb := meminfo("MemTotal:       16384000 kB\nDirty:             1234 kB\nWriteback:           56 kB\n")
	assert.Equal(t, int64(1234), dirty)
	assert.Equal(t, int64(56), wb)

	m := machine{cpu: "AMD EPYC 7B13", cores: 2, kernel: "6.1.0", goVersion: "go1.26.8", commit: "abc1234",
		loadStart: "0.10 0.20 0.30", loadEnd: "1.90 1.00 0.50", cpuStart: a, cpuEnd: b}
	assert.Equal(t, []string{
		"cpu: AMD EPYC 7B13, 2 cores (runtime.NumCPU)",
		"kernel: 6.1.0; go1.26.8; commit abc1234",
		"load average (1, 5, 15 min): 0.10 0.20 0.30 at the start, 1.90 1.00 0.50 at the end",
		"cpu steal during the run: 3.5%",
	}, m.lines())
}

// TestRenderTakesTheMedianRoundAndShowsTheSpread ensures a bench.out of
// several rounds is judged on the median of the per-round ratios (here
// 1.0x, met, although one round's ratio missed), prints the lowest and
// highest ratio beside it, and prints the machine header the driver wrote
// into the raw output.
func TestRenderTakesTheMedianRoundAndShowsTheSpread(t *testing.T) {
	in := `# machine: cpu: AMD EPYC, 2 cores (runtime.NumCPU)
# three stages, round 1/3: BenchmarkThree/strom
BenchmarkThree/strom-2      	 9000000	 125.0 ns/op	   8000000 records/s
BenchmarkThreeTelemetry/metrics-2  	  500000	  2200 ns/op	    4000000 records/s
BenchmarkThree/strom-2      	 9000000	 125.0 ns/op	   6000000 records/s
BenchmarkThreeTelemetry/metrics-2  	  500000	  2200 ns/op	    6600000 records/s
BenchmarkThree/strom-2      	 9000000	 125.0 ns/op	   9000000 records/s
BenchmarkThreeTelemetry/metrics-2  	  500000	  2200 ns/op	    9000000 records/s
BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 400000 base-records/s	 8000000 records/s	 20.00 x-turns
BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 200000 base-records/s	 6000000 records/s	 30.00 x-turns
BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 500000 base-records/s	 9000000 records/s	 18.00 x-turns
`
	m, header, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"cpu: AMD EPYC, 2 cores (runtime.NumCPU)"}, header)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	// Rounds (each the median of its process's turns): 20x, 30x, 18x;
	// the rates' medians 8 and 0.4 M/s.
	assert.Regexp(t, `strom vs go-streams\s+8.00 M/s\s+0.40 M/s\s+20.00x\s+18.00x–30.00x \(3\)\s+>= 20x\s+met`, s)
	// Rounds: 0.5x, 1.1x, 1.0x: the median meets 0.9x.
	assert.Regexp(t, `metrics on vs none installed\s+6.60 M/s\s+8.00 M/s\s+1.00x\s+0.50x–1.10x \(3\)\s+>= 0.9x\s+met`, s)
}

// TestRunMainRendersStdin ensures the command without -run renders a
// saved bench.out with the header and the notes, exit status 0.
func TestRunMainRendersStdin(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runMain(nil, strings.NewReader("# machine: load average (1, 5, 15 min): 1 2 3 at the start\nBenchmarkIndexMemory-2   1   1 ns/op   40.0 index-MiB\n"), &out, &errOut)
	assert.Equal(t, 0, code, errOut.String())
	assert.True(t, strings.HasPrefix(out.String(), "load average (1, 5, 15 min): 1 2 3 at the start\n\nfigure"), out.String())
	assert.Contains(t, out.String(), "the median of the per-round ratios")
	assert.Equal(t, 2, runMain([]string{"-nonsense"}, strings.NewReader(""), &out, &errOut))
}

// TestCompareSaysWhichRatioRowsHeld ensures two runs are compared on
// their median ratios: a row whose ratio moved by less than 15% held, one
// that moved more did not, a row without a baseline is shown but not
// counted, and a row only one run measured is neither.
func TestCompareSaysWhichRatioRowsHeld(t *testing.T) {
	a := `# machine: load average (1, 5, 15 min): 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end
BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 400000 base-records/s	 8000000 records/s	 20.00 x-turns
BenchmarkTurns/three/strom-vs-rill-2  	 1	 5000000000 ns/op	 800000 base-records/s	 8000000 records/s	 10.00 x-turns
BenchmarkIndexMemory-2   1   1 ns/op   40.0 index-MiB
BenchmarkKeyOrdered/n=1-2   	       1	1 ns/op	       1000 records/s
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       4000 records/s
`
	b := `BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 220000 base-records/s	 4000000 records/s	 18.18 x-turns
BenchmarkTurns/three/strom-vs-rill-2  	 1	 5000000000 ns/op	 200000 base-records/s	 4000000 records/s	 20.00 x-turns
BenchmarkIndexMemory-2   1   1 ns/op   50.0 index-MiB
`
	ma, ha, err := parse(strings.NewReader(a), nil)
	require.NoError(t, err)
	mb, hb, err := parse(strings.NewReader(b), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	n, within := compare(&out, ma, mb, ha, hb)
	s := out.String()
	assert.Equal(t, 2, n, s)
	assert.Equal(t, 1, within, s)
	assert.Contains(t, s, "run A: load average (1, 5, 15 min): 0.10 0.20 0.30")
	// go-streams: 20x then 18.18x (0.91, held); rill: 10x then 20x (2.00, not).
	assert.Regexp(t, `strom vs go-streams\s+20.00x\s+18.18x\s+0.91\s+yes`, s)
	assert.Regexp(t, `strom vs rill\s+10.00x\s+20.00x\s+2.00\s+no`, s)
	assert.Regexp(t, `10 GiB of 64 B records\s+40.0 MiB\s+50.0 MiB\s+1.25\s*\n`, s)
	assert.Regexp(t, `n=4 vs n=1\s+4.00x\s+-\s+-\s*\n`, s)
	assert.Regexp(t, `live page open vs off\s+-\s+-\s+-\s*\n`, s)
	assert.Contains(t, s, "1 of 2 ratio rows within 15% of each other")
}

// TestParsePairsRoundsAcrossAFailedProcess ensures that when one side's
// process fails in a round, the rounds after it still pair each figure
// with the baseline measured next to it: the driver's comment lines say
// which round a result belongs to.
func TestParsePairsRoundsAcrossAFailedProcess(t *testing.T) {
	in := `# KeyOrdered, round 1/3: BenchmarkKeyOrdered/n=1 (...)
BenchmarkKeyOrdered/n=1-2   	       1	1 ns/op	       1000 records/s
# KeyOrdered, round 1/3: BenchmarkKeyOrdered/n=4 (...)
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       4000 records/s
# KeyOrdered, round 2/3: BenchmarkKeyOrdered/n=1 (...)
--- FAIL: BenchmarkKeyOrdered/n=1
# KeyOrdered, round 2/3: BenchmarkKeyOrdered/n=4 (...)
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       9000 records/s
# KeyOrdered, round 3/3: BenchmarkKeyOrdered/n=1 (...)
BenchmarkKeyOrdered/n=1-2   	       1	1 ns/op	       2000 records/s
# KeyOrdered, round 3/3: BenchmarkKeyOrdered/n=4 (...)
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       7000 records/s
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	n1 := m["BenchmarkKeyOrdered/n=1"]["records/s"]
	require.Len(t, n1, 3)
	assert.True(t, math.IsNaN(n1[1]), "round 2 of n=1 failed: %v", n1)
	// Round 1: 4x; round 2: no pair; round 3: 3.5x (not 7000/1000 or 9000/2000).
	assert.Equal(t, []float64{4, 3.5}, ratios(m["BenchmarkKeyOrdered/n=4"]["records/s"], n1))
	var out bytes.Buffer
	render(&out, m)
	assert.Regexp(t, `n=1\s+1500 records/s\s+-\s+-\s+1000–2000 records/s \(2\)`, out.String())
	assert.Regexp(t, `n=4 vs n=1\s+7000 records/s\s+1500 records/s\s+3.75x\s+3.50x–4.00x \(2\)`, out.String())
}

// TestParseLeavesABaselinesFailedLastRoundOut ensures a baseline whose
// last round failed lends no earlier round to the figure's last round:
// that round has no neighbour and no ratio.
func TestParseLeavesABaselinesFailedLastRoundOut(t *testing.T) {
	in := `# KeyOrdered, round 1/2: BenchmarkKeyOrdered/n=1 (...)
BenchmarkKeyOrdered/n=1-2   	       1	1 ns/op	       1000 records/s
# KeyOrdered, round 1/2: BenchmarkKeyOrdered/n=4 (...)
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       4000 records/s
# KeyOrdered, round 2/2: BenchmarkKeyOrdered/n=1 (...)
--- FAIL: BenchmarkKeyOrdered/n=1
# KeyOrdered, round 2/2: BenchmarkKeyOrdered/n=4 (...)
BenchmarkKeyOrdered/n=4-2   	       1	1 ns/op	       12000 records/s
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	assert.Equal(t, []float64{4}, ratios(m["BenchmarkKeyOrdered/n=4"]["records/s"], m["BenchmarkKeyOrdered/n=1"]["records/s"]))
}

// TestRunMainRefusesWhatWouldLookLikeAnEmptySuccess ensures inputs that
// would print a table of "not run" rows, or a comparison of no rows, with
// status 0 are refused, naming what was wrong.
func TestRunMainRefusesWhatWouldLookLikeAnEmptySuccess(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.out")
	require.NoError(t, os.WriteFile(empty, []byte("garbage\n"), 0o644))
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 1, "no benchmark results on stdin"},
		{[]string{"bench.out"}, 2, `unexpected argument "bench.out"`},
		{[]string{"-compare", empty, empty}, 1, "no benchmark results"},
		{[]string{"-run", "-only", "nosuchfamily"}, 2, `names no family`},
		{[]string{"-run", "-rounds", "0"}, 2, "-rounds 0"},
		{[]string{"-run", "-benchtime", "xyz"}, 2, `-benchtime "xyz"`},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, c.code, runMain(c.args, strings.NewReader(""), &out, &errOut), "%v: %s", c.args, errOut.String())
		assert.Contains(t, errOut.String(), c.says, c.args)
	}
}
