package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runConfig is what the driver (-run) is asked for.
type runConfig struct {
	goCmd     string // the go command that builds the test binaries
	rounds    int
	benchtime string
	out       string // where the raw output goes: bench.out
	only      string // when set, only families whose name contains it
}

// drive builds the test binaries, runs the schedule, writes every line
// the benchmarks print to cfg.out (with a comment line before each process
// saying what it is and what the machine looked like) and echoes them to
// progress, and returns the raw output's metrics and machine header. A
// process that fails is reported and the run goes on; failed lists them.
func driveRun(cfg runConfig, progress io.Writer) (m metrics, header []string, failed []string, err error) {
	mach := thisMachine()
	fams := selectFamilies(families(), cfg.only)
	if len(fams) == 0 {
		return nil, nil, nil, fmt.Errorf("-only %q names no family; the families: %s", cfg.only, strings.Join(familyNames(), ", "))
	}
	tmp, err := os.MkdirTemp("", "strom-bench-bin-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("a folder for the test binaries: %w", err)
	}
	defer os.RemoveAll(tmp)
	bins := map[string]string{}
	for _, f := range fams {
		if _, ok := bins[f.pkg]; ok {
			continue
		}
		bin := filepath.Join(tmp, strings.ReplaceAll(strings.Trim(f.pkg, "./"), "/", "_")+".test")
		fmt.Fprintf(progress, "benchtable: building %s\n", f.pkg)
		cmd := exec.Command(cfg.goCmd, "test", "-c", "-o", bin, f.pkg)
		cmd.Stdout, cmd.Stderr = progress, progress
		if err := cmd.Run(); err != nil {
			return nil, nil, nil, fmt.Errorf("go test -c %s: %w", f.pkg, err)
		}
		bins[f.pkg] = bin
	}
	out, err := os.Create(cfg.out)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench output: %w", err)
	}
	defer out.Close()
	var raw bytes.Buffer
	w := io.MultiWriter(out, &raw)
	plan := schedule(fams, cfg.rounds)
	start := time.Now()
	for i, inv := range plan {
		// What the process before left in the page cache is written back
		// here, untimed, and said in the comment line: a fixture's dirty
		// pages written back while the next benchmark runs were one of the
		// causes of issue 24 (internal/bench's package doc).
		dirty, wb := dirtyKiB()
		unix.Sync()
		runtime.GC()
		benchtime := inv.family.benchtimeOf(cfg.benchtime)
		fmt.Fprintf(w, "# %s, round %d/%d: %s (-benchtime %s; before it: dirty %d KiB, writeback %d KiB, synced; load %s) [%d/%d, %s]\n",
			inv.family.name, inv.round, inv.rounds, inv.side, benchtime, dirty, wb, loadAverage(readFile("/proc/loadavg")),
			i+1, len(plan), time.Since(start).Round(time.Second))
		fmt.Fprintf(progress, "# %s, round %d/%d: %s [%d/%d, %s]\n", inv.family.name, inv.round, inv.rounds, inv.side, i+1, len(plan), time.Since(start).Round(time.Second))
		cmd := exec.Command(bins[inv.family.pkg], "-test.run", "^$", "-test.bench", benchPattern(inv.side),
			"-test.benchmem", "-test.benchtime", benchtime, "-test.timeout", "30m")
		cmd.Dir = inv.family.pkg
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		copied := make(chan struct{})
		var why []string // the first lines of the process's own words: what a failure says
		go func() {
			defer close(copied)
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(w, line)
				if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "---") || strings.Contains(line, "FAIL") || strings.HasPrefix(line, "panic:") {
					fmt.Fprintln(progress, line)
				}
				if len(why) < 2 && !testPreamble(line) {
					why = append(why, strings.TrimSpace(line))
				}
			}
			io.Copy(io.Discard, pr)
		}()
		runErr := cmd.Run()
		pw.Close()
		<-copied
		if runErr != nil {
			reason := runErr.Error()
			if len(why) > 0 {
				reason += ": " + strings.Join(why, " / ")
			}
			failed = append(failed, fmt.Sprintf("%s, round %d: %s: %s", inv.family.name, inv.round, inv.side, reason))
			fmt.Fprintf(progress, "benchtable: %s failed: %s\n", inv.side, reason)
		}
	}
	mach.finish()
	header = mach.lines()
	for _, h := range header {
		fmt.Fprintln(w, machinePrefix+h)
	}
	// -rounds and -benchtime as asked: a family may run more rounds
	// (family.rounds) and its own -benchtime, said in each process's line.
	fmt.Fprintf(w, "%s-rounds %d, -benchtime %s (a family may run more rounds or its own benchtime), %s in all\n", machinePrefix, cfg.rounds, cfg.benchtime, time.Since(start).Round(time.Second))
	m, header, err = parse(&raw, nil)
	return m, header, failed, err
}

// testPreamble reports whether line is what every benchmark process
// prints besides its results (goos, goarch, pkg, cpu, PASS, blank).
func testPreamble(line string) bool {
	for _, p := range []string{"goos:", "goarch:", "pkg:", "cpu:", "PASS", "Benchmark"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return strings.TrimSpace(line) == ""
}

// selectFamilies returns the families of fs whose name contains only (all
// of them when only is "").
func selectFamilies(fs []family, only string) []family {
	if only == "" {
		return fs
	}
	var kept []family
	for _, f := range fs {
		if strings.Contains(f.name, only) {
			kept = append(kept, f)
		}
	}
	return kept
}

// familyNames lists the names -only matches against, in run order.
func familyNames() []string {
	var names []string
	for _, f := range families() {
		names = append(names, strconv.Quote(f.name))
	}
	return names
}

// dirtyKiB reads /proc/meminfo's Dirty and Writeback, in KiB (0 where
// unreadable).
func dirtyKiB() (dirty, writeback int64) {
	return meminfo(readFile("/proc/meminfo"))
}

// meminfo returns the Dirty and Writeback lines of a /proc/meminfo, in KiB.
func meminfo(s string) (dirty, writeback int64) {
	for line := range strings.Lines(s) {
		var v int64
		if _, err := fmt.Sscanf(line, "Dirty: %d kB", &v); err == nil {
			dirty = v
		} else if _, err := fmt.Sscanf(line, "Writeback: %d kB", &v); err == nil {
			writeback = v
		}
	}
	return dirty, writeback
}
