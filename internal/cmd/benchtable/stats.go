package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// present returns the values of xs that were measured: a round whose
// process failed leaves a NaN in its place (parse), so that the rounds
// after it still pair with their neighbours.
func present(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// median returns the middle of the measured values of xs (the mean of the
// two middle ones when their count is even); xs is not modified. It
// returns 0 for no values.
func median(xs []float64) float64 {
	s := present(xs)
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// spread returns the smallest and largest measured value of xs (0, 0 for
// none).
func spread(xs []float64) (lo, hi float64) {
	xs = present(xs)
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// ratios pairs the rounds of a measured figure with its baseline's: the
// i-th ratio is a[i] over b[i], the two measured in the same round (next
// to each other); a baseline with fewer rounds than the figure lends its
// last one to the rest. Pairs with a value <= 0, or a round not measured
// (NaN), are left out.
func ratios(a, b []float64) []float64 {
	if len(b) == 0 {
		return nil
	}
	var rs []float64
	for i, v := range a {
		base := b[min(i, len(b)-1)]
		if v > 0 && base > 0 {
			rs = append(rs, v/base)
		}
	}
	return rs
}

// spreadText prints the range of xs with format f, "lo–hi (n)", or "-"
// for fewer than two values (a single round has no spread).
func spreadText(xs []float64, f func(float64) string) string {
	xs = present(xs)
	if len(xs) < 2 {
		return "-"
	}
	lo, hi := spread(xs)
	los, his := f(lo), f(hi)
	// "8.3 B/key–8.5 B/key" reads better as "8.3–8.5 B/key".
	if num, unit, ok := strings.Cut(los, " "); ok && strings.HasSuffix(his, " "+unit) {
		los = num
	}
	return fmt.Sprintf("%s–%s (%d)", los, his, len(xs))
}

func ratioText(v float64) string { return fmt.Sprintf("%.2fx", v) }
