package torture

// Scenario scale's checks: the output against the counts computed from
// the records (or, stateless, against the records themselves).

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxExamples bounds the examples a violation of scenario scale names.
const maxExamples = 5

// WindowCheck is the stateful check's count of the output against the
// expected (window, key) counts. A run passes with Missing and Wrong at
// zero (and no Unknown or Malformed); Duplicates are allowed, as
// at-least-once delivers a result again after a restart.
type WindowCheck struct {
	Expected   int // (window, key) results an uninterrupted one-process run emits
	Results    int // output records, sentinels' excluded
	Distinct   int // distinct (window, key) among them
	Missing    int // expected (window, key) never emitted
	Wrong      int // results whose count differs from the expected one
	WrongLow   int // of which below it (records of the window lost to the state)
	WrongHigh  int // of which above it (records counted twice)
	WrongPairs int // distinct (window, key) with at least one wrong result
	Duplicates int // results beyond each (window, key)'s first
	Unknown    int // results for a (window, key) no record belongs to
	Malformed  int // output values that do not parse
	Sentinels  int // results for the sentinels' windows (ignored)

	WrongBy         map[string]int // wrong results by the worker that emitted them ("w1.2": slot 1, incarnation 2)
	MissingByWindow map[int64]int  // missing results by window start (Unix milliseconds)

	missingEx, wrongEx, unknownEx, malformedEx []string
}

// checkWindows counts results against expected. window is the windows'
// size in milliseconds.
func checkWindows(expected map[windowKey]int64, results []scaleResult, window int64) WindowCheck {
	c := WindowCheck{Expected: len(expected), WrongBy: make(map[string]int), MissingByWindow: make(map[int64]int)}
	seen := make(map[windowKey]int)
	wrongPairs := make(map[windowKey]bool)
	for _, r := range results {
		if strings.HasPrefix(r.Key, "sentinel-") {
			c.Sentinels++
			continue
		}
		c.Results++
		k := windowKey{start: r.Start, key: r.Key}
		want, ok := expected[k]
		if !ok || r.End-r.Start != window {
			c.Unknown++
			c.unknownEx = appendEx(c.unknownEx, "%s [%s, %s) count %d by %s", r.Key, msTime(r.Start), msTime(r.End), r.Count, r.Worker)
			continue
		}
		seen[k]++
		if r.Count == want {
			continue
		}
		c.Wrong++
		c.WrongBy[r.Worker]++
		wrongPairs[k] = true
		if r.Count < want {
			c.WrongLow++
		} else {
			c.WrongHigh++
		}
		c.wrongEx = appendEx(c.wrongEx, "%s [%s, %s) count %d by %s, want %d", r.Key, msTime(r.Start), msTime(r.End), r.Count, r.Worker, want)
	}
	c.WrongPairs = len(wrongPairs)
	c.Distinct = len(seen)
	for _, n := range seen {
		c.Duplicates += n - 1
	}
	keys := slices.SortedFunc(maps.Keys(expected), func(a, b windowKey) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.key, b.key))
	})
	for _, k := range keys {
		if seen[k] == 0 {
			c.Missing++
			c.MissingByWindow[k.start]++
			c.missingEx = appendEx(c.missingEx, "%s [%s, %s) want %d", k.key, msTime(k.start), msTime(k.start+window), expected[k])
		}
	}
	return c
}

// RelayCheck is the stateless check's count of the output against the
// input records: every input record must be in the output at least once.
type RelayCheck struct {
	Input      int // input records, sentinels included
	Results    int // output records
	Distinct   int // distinct input records among them
	Missing    int // input records never in the output
	Duplicates int // output records beyond each input record's first
	Phantoms   int // output records naming no input record (or another key)
	Malformed  int // output values that do not parse

	missingEx, phantomEx, malformedEx []string
}

// relayInput is an input record as the stateless check knows it.
type relayInput struct {
	key string
	ts  int64
}

// checkRelayed counts results against the input records, by partition
// and offset.
func checkRelayed(input map[[2]int64]relayInput, results []scaleRelayed) RelayCheck {
	c := RelayCheck{Input: len(input)}
	seen := make(map[[2]int64]int)
	for _, r := range results {
		c.Results++
		k := [2]int64{int64(r.Partition), r.Offset}
		in, ok := input[k]
		if !ok || in.key != r.Key || in.ts != r.Timestamp {
			c.Phantoms++
			c.phantomEx = appendEx(c.phantomEx, "partition %d offset %d key %s time %d by %s", r.Partition, r.Offset, r.Key, r.Timestamp, r.Worker)
			continue
		}
		seen[k]++
	}
	c.Distinct = len(seen)
	for _, n := range seen {
		c.Duplicates += n - 1
	}
	keys := slices.SortedFunc(maps.Keys(input), func(a, b [2]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range keys {
		if seen[k] == 0 {
			c.Missing++
			c.missingEx = appendEx(c.missingEx, "partition %d offset %d (key %s)", k[0], k[1], input[k].key)
		}
	}
	return c
}

func appendEx(ex []string, format string, args ...any) []string {
	if len(ex) >= maxExamples {
		return ex
	}
	return append(ex, fmt.Sprintf(format, args...))
}

// msTime formats Unix milliseconds as a UTC time of day (the records span
// about 20 minutes from 2026-01-01T00:00Z).
func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("01-02T15:04:05") }

// checkScale reads the output and the late records back and checks them;
// each kind of failure is one violation naming its count and examples.
func (s *supervisor) checkScale(ctx context.Context) error {
	sc := s.scale
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	late, err := sc.cluster.ReadAll(rctx, ScaleLate)
	if err != nil {
		return fmt.Errorf("torture: scale: read %s: %w", ScaleLate, err)
	}
	sc.rep.Late = len(late)
	out, err := sc.cluster.ReadAll(rctx, ScaleOutput)
	if err != nil {
		return fmt.Errorf("torture: scale: read %s: %w", ScaleOutput, err)
	}
	if s.cfg.Stateless {
		s.checkScaleRelayed(out)
		return nil
	}
	var results []scaleResult
	var malformed []string
	for _, r := range out {
		res, err := parseScaleResult(r.Value)
		if err != nil {
			malformed = appendEx(malformed, "%s partition %d offset %d: %v", ScaleOutput, r.Partition, r.Offset, err)
			sc.rep.malformed++
			continue
		}
		results = append(results, res)
	}
	wc := checkWindows(sc.data.expected(), results, scaleWindow.Milliseconds())
	wc.Malformed, wc.malformedEx = sc.rep.malformed, malformed
	sc.rep.Windows = &wc
	if wc.Missing > 0 {
		s.violate("scale: %d of %d (window, key) results never emitted, e.g. %s", wc.Missing, wc.Expected, strings.Join(wc.missingEx, "; "))
	}
	if wc.Wrong > 0 {
		s.violate("scale: %d results carry a wrong count (%d below, %d above; %d distinct (window, key)), e.g. %s",
			wc.Wrong, wc.WrongLow, wc.WrongHigh, wc.WrongPairs, strings.Join(wc.wrongEx, "; "))
	}
	if wc.Unknown > 0 {
		s.violate("scale: %d results for windows no record belongs to, e.g. %s", wc.Unknown, strings.Join(wc.unknownEx, "; "))
	}
	if wc.Malformed > 0 {
		s.violate("scale: %d output values do not parse, e.g. %s", wc.Malformed, strings.Join(wc.malformedEx, "; "))
	}
	return nil
}

// checkScaleRelayed is the stateless variant's check: every input record
// (sentinels included) in the output at least once, and nothing else.
func (s *supervisor) checkScaleRelayed(out []*kgo.Record) {
	sc := s.scale
	input := make(map[[2]int64]relayInput, len(sc.data.recs)+s.cfg.ScalePartitions)
	for _, r := range sc.data.recs {
		input[[2]int64{int64(r.partition), r.offset}] = relayInput{key: r.key, ts: r.ts}
	}
	for p := range int32(s.cfg.ScalePartitions) {
		if end := sc.prod.ends[p]; end > 0 {
			input[[2]int64{int64(p), end - 1}] = relayInput{key: sentinelKey(p), ts: sc.data.sentinel}
		}
	}
	var results []scaleRelayed
	var malformed []string
	for _, r := range out {
		rel, err := parseScaleRelayed(r.Value)
		if err != nil {
			malformed = appendEx(malformed, "%s partition %d offset %d: %v", ScaleOutput, r.Partition, r.Offset, err)
			sc.rep.malformed++
			continue
		}
		results = append(results, rel)
	}
	rc := checkRelayed(input, results)
	rc.Malformed, rc.malformedEx = sc.rep.malformed, malformed
	sc.rep.Relay = &rc
	if rc.Missing > 0 {
		s.violate("scale: %d of %d input records never reached %s, e.g. %s", rc.Missing, rc.Input, ScaleOutput, strings.Join(rc.missingEx, "; "))
	}
	if rc.Phantoms > 0 {
		s.violate("scale: %d output records name no input record, e.g. %s", rc.Phantoms, strings.Join(rc.phantomEx, "; "))
	}
	if rc.Malformed > 0 {
		s.violate("scale: %d output values do not parse, e.g. %s", rc.Malformed, strings.Join(rc.malformedEx, "; "))
	}
}
