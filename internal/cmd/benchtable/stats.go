package main

import (
	"fmt"
	"slices"
	"strings"
)

// median returns the middle of xs (the mean of the two middle values when
// len(xs) is even); xs is not modified. It returns 0 for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// spread returns the smallest and largest of xs (0, 0 for none).
func spread(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// ratios pairs the rounds of a measured figure with its baseline's: the
// i-th ratio is a[i] over b[i], the two measured in the same round (next
// to each other); a baseline with fewer rounds than the figure lends its
// last one to the rest. Pairs with a value <= 0 are left out.
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
