package scaledemo

// The check: the workers' alerts and windows against sshwatch's on one
// process, and the report.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// windowsFile is sshwatch's file of every window result, in its --dir.
const windowsFile = "windows.jsonl"

// maxExamples bounds the examples a Check names.
const maxExamples = 5

// windowKey is one window result: an IP's minute.
type windowKey struct{ start, ip string }

// Check compares the result lines (alerts, or windows) the workers printed
// with those of sshwatch on one process: it passes with Missing, Extra and
// Wrong at zero. Duplicates are allowed: after a kill the member that
// takes a partition over prints again what was printed since the last
// checkpoint (at-least-once), with the same counts.
type Check struct {
	Expected   int // distinct (minute, IP) results of the one-process run
	Printed    int // result lines the workers printed, the sentinels' excluded
	Distinct   int // distinct (minute, IP) among them
	Missing    int // expected results never printed
	Extra      int // (minute, IP) results the one-process run does not print
	Wrong      int // lines whose count differs from the one-process run's
	Duplicates int // lines beyond each (minute, IP)'s first
	Torn       int // lines that do not parse: a write cut by kill -9
	Sentinels  int // results of the sentinels' windows (ignored)

	Examples []string // up to maxExamples of each kind of difference
}

// ok reports whether the check passes.
func (c Check) ok() bool { return c.Missing == 0 && c.Extra == 0 && c.Wrong == 0 && c.Expected > 0 }

// result is a line of sshwatch's --json output and windows.jsonl.
type result struct {
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	Key         string `json:"key"`
	Count       int64  `json:"count"`
}

// readResults parses the result lines of the files at paths (a missing
// file holds none); lines that do not parse are counted as torn.
func readResults(paths ...string) (res []result, torn int, err error) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("scaledemo: %w", err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			var r result
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.Key == "" {
				torn++
				continue
			}
			res = append(res, r)
		}
	}
	return res, torn, nil
}

// compare checks got against want (the one-process run's lines, each
// window once).
func compare(want, got []result, torn int) Check {
	exp := make(map[windowKey]int64, len(want))
	for _, r := range want {
		exp[windowKey{r.WindowStart, r.Key}] = r.Count
	}
	c := Check{Expected: len(exp), Torn: torn}
	seen := make(map[windowKey]int)
	example := func(format string, args ...any) {
		if len(c.Examples) < 3*maxExamples {
			c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range got {
		if isSentinel(r.Key) {
			c.Sentinels++
			continue
		}
		c.Printed++
		k := windowKey{r.WindowStart, r.Key}
		if seen[k]++; seen[k] > 1 {
			c.Duplicates++
		}
		want, ok := exp[k]
		switch {
		case !ok:
			if seen[k] == 1 {
				c.Extra++
				example("extra: %s %s count %d", r.WindowStart, r.Key, r.Count)
			}
		case r.Count != want:
			c.Wrong++
			example("wrong: %s %s count %d, one process %d", r.WindowStart, r.Key, r.Count, want)
		}
	}
	c.Distinct = len(seen)
	for _, k := range slices.SortedFunc(maps.Keys(exp), func(a, b windowKey) int {
		return cmp.Or(strings.Compare(a.start, b.start), strings.Compare(a.ip, b.ip))
	}) {
		if seen[k] == 0 {
			c.Missing++
			example("missing: %s %s count %d", k.start, k.ip, exp[k])
		}
	}
	return c
}

// Report is what a run did and found.
type Report struct {
	Input       string // the sshd log
	Lines       int    // its lines
	Partitions  int    // of the input topic
	Workers     int    // processes started at first
	Repartition bool   // lines keyed by line number, counted through a repartition topic

	Kills int // workers killed with SIGKILL (not started again)
	Joins int // workers started later

	Alerts  Check // the alerts (stdout) against one process's
	Windows Check // every window result (windows.jsonl) against one process's

	Late      int      // late lines the workers warned about (each a line not counted)
	PerWorker []string // what each worker said it did, from its summary on stderr

	Events []string // the run as it happened

	Reference   time.Duration // sshwatch on one process over the file
	Distributed time.Duration // from the first worker's start until everything was committed
	Total       time.Duration // the whole run, Kafka and the check included
}

// Pass reports whether the workers' alerts, and windows, are those of one
// process, with no line late.
func (r *Report) Pass() bool {
	return r != nil && r.Alerts.ok() && r.Windows.ok() && r.Late == 0
}

// summaryRE matches sshwatch's summary on stderr in Kafka mode.
var summaryRE = regexp.MustCompile(`sshwatch: read (\d+) lines from \S+ \(group \S+\): (\d+) failed password attempts, (\d+) windows, (\d+) alerts`)

// check reads every worker's output and compares it with the one-process
// run's.
func (r *run) check() error {
	ref := filepath.Join(r.cfg.Dir, "one-process")
	wantAlerts, _, err := readResults(filepath.Join(r.cfg.Dir, "one-process.alerts"))
	if err != nil {
		return err
	}
	wantWindows, _, err := readResults(filepath.Join(ref, windowsFile))
	if err != nil {
		return err
	}
	var alertFiles, windowFiles []string
	for _, w := range r.workers {
		alertFiles = append(alertFiles, w.stdoutPath)
		windowFiles = append(windowFiles, filepath.Join(w.dir, windowsFile))
		stderr, err := os.ReadFile(w.stderrPath)
		if err != nil {
			return fmt.Errorf("scaledemo: %w", err)
		}
		r.rep.Late += strings.Count(string(stderr), "sshwatch: late line")
		desc := w.name + ": killed with kill -9"
		if m := summaryRE.FindAllStringSubmatch(string(stderr), -1); len(m) > 0 {
			last := m[len(m)-1]
			desc = fmt.Sprintf("%s: %s lines, %s windows, %s alerts", w.name, last[1], last[3], last[4])
		}
		r.rep.PerWorker = append(r.rep.PerWorker, desc)
	}
	gotAlerts, tornAlerts, err := readResults(alertFiles...)
	if err != nil {
		return err
	}
	gotWindows, tornWindows, err := readResults(windowFiles...)
	if err != nil {
		return err
	}
	r.rep.Alerts = compare(wantAlerts, gotAlerts, tornAlerts)
	r.rep.Windows = compare(wantWindows, gotWindows, tornWindows)
	return nil
}

// String is the report for a person: the verdict, then what ran and what
// was found.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS: the alerts and windows equal sshwatch's on one process"
	if !r.Pass() {
		verdict = "FAIL: the alerts or windows differ from sshwatch's on one process"
	}
	how := "keyed by source IP (the pipeline declares the key follows the partitioning)"
	if r.Repartition {
		how = "keyed by line number, counted per IP through a repartition topic (stream.Repartition)"
	}
	fmt.Fprintf(&b, "%s\n", verdict)
	fmt.Fprintf(&b, "  input      %s: %d lines into %d partitions of an in-process Kafka, %s\n", filepath.Base(r.Input), r.Lines, r.Partitions, how)
	fmt.Fprintf(&b, "  processes  %d sshwatch workers in one consumer group; kills (kill -9) %d, joins %d\n", r.Workers, r.Kills, r.Joins)
	for _, c := range []struct {
		name string
		c    Check
	}{{"alerts", r.Alerts}, {"windows", r.Windows}} {
		fmt.Fprintf(&b, "  %-10s %d expected (one process); %d printed by the workers, %d distinct: missing %d, extra %d, wrong %d, duplicates %d (printed again after a kill or a rebalance: at-least-once), torn %d\n",
			c.name, c.c.Expected, c.c.Printed, c.c.Distinct, c.c.Missing, c.c.Extra, c.c.Wrong, c.c.Duplicates, c.c.Torn)
		for _, ex := range c.c.Examples {
			fmt.Fprintf(&b, "             %s\n", ex)
		}
	}
	fmt.Fprintf(&b, "  late       %d lines\n", r.Late)
	fmt.Fprintf(&b, "  workers    %s\n", strings.Join(r.PerWorker, "; "))
	pause := ""
	if r.Kills > 0 {
		pause = " (a kill holds the killed worker's partitions for the 2 s session and 2 s rebalance timeouts)"
	}
	fmt.Fprintf(&b, "  timings    one process %v; on the group %v%s; whole run %v\n",
		r.Reference.Round(time.Millisecond), r.Distributed.Round(100*time.Millisecond), pause, r.Total.Round(100*time.Millisecond))
	return b.String()
}
