package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
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

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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
	fmt.Fprintf(stderr, "generated %d events (%d persons, %d auctions, %d bids) into %s in %.1fs\n",
		counts.Total(), counts.Persons, counts.Auctions, counts.Bids, logDir, time.Since(t0).Seconds())

	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var results []Result
	var pairs [][2]Result // strom's and go-streams' runs of a query
	for i, q := range run {
		var w *bufio.Writer
		if *out != "" {
			path := *out
			if len(run) > 1 {
				path += "." + q.Name
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			w = bufio.NewWriterSize(f, 1<<20)
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
				return fmt.Errorf("nexmark: write %s output: %w", q.Name, err)
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
