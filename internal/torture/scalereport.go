package torture

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ScaleReport is what a scenario scale run did and found (Summary.Scale).
type ScaleReport struct {
	Stateless      bool          // the relay variant: records copied, not counted
	Records        int           // input records, sentinels excluded
	Keys           int           // distinct keys drawn
	Partitions     int           // of the input topic
	Members        []int         // the membership schedule, e.g. 1, 3, 2, 3 workers
	KillsPlanned   int           // SIGKILLs in the schedule
	Window         time.Duration // the tumbling window's size
	OutOfOrderness time.Duration // the window's OutOfOrderness
	Disorder       time.Duration // how far the generator puts a record's event time behind its place

	Joins   int  // workers started by the schedule
	Leaves  int  // workers stopped with SIGTERM by the schedule
	Kills   int  // workers killed with SIGKILL (each replaced at once)
	Crashes int  // workers that exited by themselves (each a violation; started again)
	Stalled bool // the group's commits stopped advancing for Config.CatchUp

	Events []string // the schedule as it happened: when, at which commit, what

	Late    int          // records the window sent to ScaleLate
	Windows *WindowCheck // the stateful check; nil for the stateless variant
	Relay   *RelayCheck  // the stateless check; nil for the stateful one

	malformed int
}

// note adds an event to the schedule as it happened.
func (r *ScaleReport) note(sum *Summary, committed, n int64, what string) {
	r.Events = append(r.Events, fmt.Sprintf("%6.1fs  %6d/%d committed  %s", time.Since(sum.started).Seconds(), committed, n, what))
}

// Line is the run's one-line summary.
func (r *ScaleReport) Line(seed uint64, pass bool) string {
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	var ms []string
	for _, m := range r.Members {
		ms = append(ms, fmt.Sprint(m))
	}
	members := strings.Join(ms, "→")
	shape := fmt.Sprintf("%d records, %d partitions, %d keys; members %s, %d kills", r.Records, r.Partitions, r.Keys, members, r.Kills)
	switch {
	case r.Windows != nil:
		w := r.Windows
		return fmt.Sprintf("scale: seed %d: %s: missing %d, wrong %d (low %d, high %d) of %d expected results; %d emitted, %d duplicates, %d unknown, %d late records; %s",
			seed, verdict, w.Missing, w.Wrong, w.WrongLow, w.WrongHigh, w.Expected, w.Results, w.Duplicates, w.Unknown, r.Late, shape)
	case r.Relay != nil:
		c := r.Relay
		return fmt.Sprintf("scale --stateless: seed %d: %s: missing %d of %d input records; %d relayed, %d duplicates, %d phantoms; %s",
			seed, verdict, c.Missing, c.Input, c.Results, c.Duplicates, c.Phantoms, shape)
	default:
		return fmt.Sprintf("scale: seed %d: %s: not checked (the run stopped before its check); %s", seed, verdict, shape)
	}
}

// lines writes the report below the summary's head line.
func (r *ScaleReport) lines(b *strings.Builder, s *Summary) {
	fmt.Fprintf(b, "  %s\n", r.Line(s.Seed, len(s.Violations) == 0))
	pipeline := fmt.Sprintf("KeyBy(key) → Window(Tumbling(%v), Count, OutOfOrderness(%v)) → sink.Kafka(%s); event times up to %v out of order",
		r.Window, r.OutOfOrderness, ScaleOutput, r.Disorder)
	if r.Stateless {
		pipeline = "MapTo(relay) → sink.Kafka(" + ScaleOutput + ")"
	}
	fmt.Fprintf(b, "  setup       kfake, %s of %d partitions; workers: source.Kafka(group %s) → %s\n", ScaleInput, r.Partitions, ScaleGroup, pipeline)
	fmt.Fprintf(b, "  membership  %d started, %d stopped (SIGTERM), %d killed (SIGKILL, replaced), %d exited by themselves\n", r.Joins, r.Leaves, r.Kills, r.Crashes)
	for _, e := range r.Events {
		fmt.Fprintf(b, "    %s\n", e)
	}
	if w := r.Windows; w != nil {
		fmt.Fprintf(b, "  results     %d emitted (%d distinct (window, key)), %d expected; %d sentinel results ignored\n", w.Results, w.Distinct, w.Expected, w.Sentinels)
		fmt.Fprintf(b, "  missing     %d (window, key) never emitted", w.Missing)
		if len(w.MissingByWindow) > 0 {
			b.WriteString(": by window start")
			for _, start := range slices.Sorted(maps.Keys(w.MissingByWindow)) {
				fmt.Fprintf(b, " %s %d", time.UnixMilli(start).UTC().Format("15:04"), w.MissingByWindow[start])
			}
		}
		b.WriteString("\n")
		fmt.Fprintf(b, "  wrong       %d results (%d below the expected count, %d above; %d distinct (window, key))", w.Wrong, w.WrongLow, w.WrongHigh, w.WrongPairs)
		if len(w.WrongBy) > 0 {
			b.WriteString(": by worker")
			for _, k := range slices.Sorted(maps.Keys(w.WrongBy)) {
				fmt.Fprintf(b, " %s %d", k, w.WrongBy[k])
			}
		}
		b.WriteString("\n")
		fmt.Fprintf(b, "  duplicates  %d (at-least-once: allowed)\n", w.Duplicates)
		fmt.Fprintf(b, "  unknown     %d results for windows no record belongs to, %d malformed\n", w.Unknown, w.Malformed)
		fmt.Fprintf(b, "  late        %d records sent to %s\n", r.Late, ScaleLate)
	}
	if c := r.Relay; c != nil {
		fmt.Fprintf(b, "  relayed     %d output records, %d distinct input records of %d\n", c.Results, c.Distinct, c.Input)
		fmt.Fprintf(b, "  missing     %d input records never relayed\n", c.Missing)
		fmt.Fprintf(b, "  duplicates  %d (at-least-once: allowed)\n", c.Duplicates)
		fmt.Fprintf(b, "  phantoms    %d, %d malformed\n", c.Phantoms, c.Malformed)
	}
}
