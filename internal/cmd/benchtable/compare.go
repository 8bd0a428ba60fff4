package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// compareTolerance is how far apart two runs' median ratios may be for
// issue 24's check (two make bench runs on a quiet machine, one after the
// other): within 15%.
const compareTolerance = 0.15

// judged returns what a row is judged on in m: the median of its
// per-round ratios when it has a baseline (isRatio), else the median of
// its values; ok is false when it did not run.
func judged(r row, m metrics) (v float64, isRatio, ok bool) {
	vs := m[r.bench][r.unit]
	if len(present(vs)) == 0 {
		return 0, r.baseline != "", false
	}
	if r.baseline != "" {
		rs := ratios(vs, m[r.baseline][r.baseUnit])
		if own := m[r.bench][r.ratioUnit]; len(own) > 0 && r.ratioUnit != "" {
			rs = own
		}
		if len(rs) == 0 {
			return 0, true, false
		}
		return median(rs), true, true
	}
	return median(vs), false, true
}

// compare prints two runs side by side (run A's and run B's machine
// headers, then per row A's and B's median ratio or value and B over A)
// and says, for every row with a baseline, whether B's ratio is within
// 15% of A's. It returns how many ratio rows both runs measured and how
// many of them are within the tolerance.
func compare(w io.Writer, a, b metrics, headerA, headerB []string) (rows2, within int) {
	// Issue 24's check holds only between runs on the same kind of
	// machine with the same code: say so when the headers differ.
	for _, key := range []string{"cpu: ", "kernel: "} {
		ha, hb := headerLine(headerA, key), headerLine(headerB, key)
		if ha != hb {
			fmt.Fprintf(w, "warning: the runs differ: A %q, B %q\n", ha, hb)
		}
	}
	for _, h := range headerA {
		fmt.Fprintln(w, "run A: "+h)
	}
	for _, h := range headerB {
		fmt.Fprintln(w, "run B: "+h)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\trun A\trun B\tB / A\twithin 15%")
	onlyOne := 0
	for _, r := range rows() {
		va, ratioRow, okA := judged(r, a)
		vb, _, okB := judged(r, b)
		f := r.formatter
		if ratioRow {
			f = ratioText
		}
		as, bs, q, verdict := "-", "-", "-", ""
		if okA {
			as = f(va)
		}
		if okB {
			bs = f(vb)
		}
		if ratioRow && okA != okB {
			onlyOne++
		}
		if okA && okB && va != 0 {
			q = fmt.Sprintf("%.2f", vb/va)
			if ratioRow {
				rows2++
				verdict = "no"
				if math.Abs(vb/va-1) <= compareTolerance {
					verdict = "yes"
					within++
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.figure, as, bs, q, verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d of %d ratio rows within 15%% of each other (B / A between %.2f and %.2f)\n",
		within, rows2, 1-compareTolerance, 1+compareTolerance)
	if onlyOne > 0 {
		fmt.Fprintf(w, "%d ratio rows were measured in one run only (a run cut short, or filtered by BENCH_ONLY): not counted\n", onlyOne)
	}
	return rows2, within
}

// headerLine returns the line of a machine header that starts with key
// ("cpu: "), "" when there is none.
func headerLine(header []string, key string) string {
	for _, h := range header {
		if strings.HasPrefix(h, key) {
			return h
		}
	}
	return ""
}

// compareFiles reads two raw outputs (bench.out) and compares them.
func compareFiles(w io.Writer, pathA, pathB string) error {
	read := func(p string) (metrics, []string, error) {
		f, err := os.Open(p)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		m, h, err := parse(f, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		if len(m) == 0 {
			return nil, nil, fmt.Errorf("%s: no benchmark results (want a bench.out from make bench)", p)
		}
		return m, h, nil
	}
	a, ha, err := read(pathA)
	if err != nil {
		return err
	}
	b, hb, err := read(pathB)
	if err != nil {
		return err
	}
	compare(w, a, b, ha, hb)
	return nil
}
