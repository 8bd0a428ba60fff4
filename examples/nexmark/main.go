package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// minEvents is the fewest events --events takes: one cycle of the event
// kinds, so that every topic gets records and every query reads some.
const minEvents = ProportionDenominator

func main() { os.Exit(exitCode(os.Args[1:], os.Stdout, os.Stderr)) }

// exitCode runs the command and returns its exit status: 0 after a run
// and after -h/--help (the usage printed on stderr, as the services do), 1
// for any error, printed on stderr with the prefix "nexmark: ".
func exitCode(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case strings.HasPrefix(err.Error(), "nexmark: "):
		fmt.Fprintln(stderr, err)
	default:
		fmt.Fprintf(stderr, "nexmark: %v\n", err)
	}
	return 1
}

// run is the command: flags in args, results to stdout, progress to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nexmark", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		names   = fs.String("query", "q0", `queries to run, comma-separated (one may repeat), or "all" (`+queryNames()+")")
		events  = fs.Int64("events", 1_000_000, "events to generate (persons, auctions and bids together)")
		dir     = fs.String("dir", "", "log directory to generate into (must hold no Nexmark topics); default a temporary directory, removed at exit")
		seed    = fs.Uint64("seed", 1, "generator seed")
		rate    = fs.Int64("rate", 10_000, "events per second of event time (0: the default)")
		out     = fs.String("out", "", "write each query's output, one value a line, to FILE (FILE.qN when several queries run)")
		table   = fs.Bool("table", false, "print a table with Flink 1.13's per-core figures after the runs")
		profile = fs.String("cpuprofile", "", "write a CPU profile of the query runs (not the generation) to FILE")
		goStr   = fs.Bool("gostreams", false, "also run go-streams' version of the queries it can express (q0, q1, q2, q12) over the same events, after strom's, and with --table print both")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("nexmark: unexpected arguments %q", fs.Args())
	}
	var run []Query
	if *names == "all" {
		run = queries
	} else {
		for _, n := range strings.Split(*names, ",") {
			q, ok := lookup(strings.TrimSpace(n))
			if !ok {
				return fmt.Errorf("nexmark: unknown query %q (have %s)", n, queryNames())
			}
			run = append(run, q)
		}
	}
	if *events < minEvents {
		return fmt.Errorf("nexmark: --events %d: want at least %d (one person, three auctions and 46 bids: each topic gets records)", *events, minEvents)
	}
	if *rate < 0 {
		return fmt.Errorf("nexmark: --rate %d: must not be negative (events per second of event time; 0: the default, 10000)", *rate)
	}
	if err := checkDir(*dir); err != nil {
		return err
	}
	// The files written after the events are generated are created first,
	// so a path that cannot be written fails before minutes of generating.
	outs, err := createOutputs(*out, run)
	for _, f := range outs {
		defer f.Close()
	}
	if err != nil {
		return err
	}
	var profFile *os.File
	if *profile != "" {
		if profFile, err = os.Create(*profile); err != nil {
			return fmt.Errorf("nexmark: --cpuprofile %s: %w", *profile, err)
		}
		defer profFile.Close()
	}
	// SIGTERM too: the temporary folder (up to a GB) is removed on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "nexmark-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logDir := *dir
	if logDir == "" {
		logDir = filepath.Join(tmp, "log")
	}
	t0 := time.Now()
	gen := Config{Seed: *seed, Rate: *rate}
	counts, err := Generate(ctx, logDir, gen, *events)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "generated %s (%s, %s, %s) into %s in %.1fs\n",
		plural(counts.Total(), "event"), plural(counts.Persons, "person"), plural(counts.Auctions, "auction"),
		plural(counts.Bids, "bid"), logDir, time.Since(t0).Seconds())

	if profFile != nil {
		if err := pprof.StartCPUProfile(profFile); err != nil {
			return fmt.Errorf("nexmark: --cpuprofile %s: %w", *profile, err)
		}
		defer pprof.StopCPUProfile()
	}
	var results []Result
	var pairs [][2]Result // strom's and go-streams' runs of a query
	for i, q := range run {
		var w *bufio.Writer
		if outs != nil {
			w = bufio.NewWriterSize(outs[i], 1<<20)
		}
		var wr io.Writer
		if w != nil {
			wr = w
		}
		r, err := RunQuery(ctx, q, logDir, filepath.Join(tmp, fmt.Sprintf("state-%d-%s", i, q.Name)), wr, WithConfig(gen))
		if err != nil {
			return err
		}
		if w != nil {
			if err := w.Flush(); err != nil {
				return fmt.Errorf("nexmark: --out: write %s output to %s: %w", q.Name, outs[i].Name(), err)
			}
		}
		fmt.Fprintln(stdout, r)
		results = append(results, r)
		if *goStr {
			g, ok, err := runGoStreams(ctx, q.Name, logDir, nil)
			if err != nil {
				return err
			}
			if ok {
				fmt.Fprintln(stdout, g)
				pairs = append(pairs, [2]Result{r, g})
			}
		}
	}
	if *table {
		printTable(stdout, results)
		printGoStreamsTable(stdout, pairs)
	}
	return nil
}

// checkDir refuses a --dir whose parent folder does not exist (or is not a
// folder): Generate creates the last element only, so a mistyped path is
// an error rather than a new tree of folders. "" (a temporary directory)
// is fine.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	parent := filepath.Dir(filepath.Clean(dir))
	fi, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("nexmark: --dir %s: its parent folder %s does not exist (nexmark creates only the last element)", dir, parent)
	case err != nil:
		return fmt.Errorf("nexmark: --dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("nexmark: --dir %s: %s is not a folder", dir, parent)
	}
	return nil
}

// createOutputs creates the file of each query's output for --out out
// (out itself for one query, out.qN for several), in the order of qs, or
// returns nil for no --out. On an error it returns the files it created,
// for the caller to close, and an error naming --out and the path.
func createOutputs(out string, qs []Query) ([]*os.File, error) {
	if out == "" {
		return nil, nil
	}
	files := make([]*os.File, 0, len(qs))
	for _, q := range qs {
		path := out
		if len(qs) > 1 {
			path += "." + q.Name
		}
		f, err := os.Create(path)
		if err != nil {
			return files, fmt.Errorf("nexmark: --out %s: %w", out, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// plural returns n and the noun, with an s unless n is 1: "1 person", "3 persons".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func queryNames() string {
	names := make([]string, len(queries))
	for i, q := range queries {
		names[i] = q.Name
	}
	return strings.Join(names, ", ")
}

// printTable prints the results as a Markdown table beside Flink 1.13's
// published per-core figures.
func printTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| query | events | events/s (wall) | CPU s / M events | events/s per core | Flink 1.13 per core | ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		flink, ratio := "-", "-"
		if r.FlinkPerCore > 0 {
			flink = fmt.Sprintf("%.1fk", r.FlinkPerCore/1e3)
			ratio = fmt.Sprintf("%.1fx", r.PerCore()/r.FlinkPerCore)
		}
		fmt.Fprintf(w, "| %s | %d | %.0fk | %.3f | %.0fk | %s | %s |\n",
			r.Query, r.Events, r.EventsPerSec()/1e3, r.CPUPerMillion(), r.PerCore()/1e3, flink, ratio)
	}
}
