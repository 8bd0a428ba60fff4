// Command sshwatch counts failed SSH password attempts per source IP in
// one-minute windows of the log lines' own time, and alerts on the windows
// that reach a threshold: stream.Window over a real log file, surviving
// kill -9.
//
// Run it from the repository root with
//
//	go run ./examples/sshwatch --input ../shared/data/loghub/OpenSSH_2k.log --json
//
// It reads the sshd lines "Failed password for [invalid user] NAME from IP
// port N", and "message repeated N times: [ Failed password ... ]" as N
// attempts. A line's time is its syslog timestamp ("Dec 10 07:28:14"), read
// as UTC in the year --year; the windows are [hh:mm:00, hh:mm+1:00) of that
// time, not of the time sshwatch runs.
//
// # What it does
//
//  1. It publishes the file into the topic "ssh" of a strom log in --dir
//     (a temporary directory, removed at exit, when --dir is not given):
//     line i goes to partition i % N at offset i / N (N = --partitions),
//     every append synced to disk. A run killed part-way publishes, when
//     started again on the same --dir, exactly the lines missing from each
//     partition (partition p holding c records goes on from line p + c*N).
//  2. It replays the topic to its end through the pipeline, resuming from
//     the checkpoint in --dir/checkpoints (a checkpoint.FileStore, which
//     also keeps the window's state): the lines of every partition, the failed
//     attempts, stream.Window(KeyBy IP, Tumbling(1m), Sum of attempts,
//     EventTime(the line's timestamp), OutOfOrderness(--out-of-order),
//     LateTo(a warning on stderr)).
//  3. Every window result goes to --dir/windows.jsonl, and those of
//     --threshold attempts or more to stdout.
//
// # Output
//
// Alerts, on stdout, one line each, in the order the windows close (those
// still open at the end of the input come out last, key by key):
//
//	2026-12-10 07:28-07:29 UTC  112.95.230.3     23 failed password attempts
//
// or with --json
//
//	{"window_start":"2026-12-10T07:28:00Z","window_end":"2026-12-10T07:29:00Z","key":"187.141.143.180","count":12}
//
// windows.jsonl holds every window result (count >= 1) in the --json form,
// appended. A summary and any warnings go to stderr.
//
// # Late lines
//
// Lines may be out of order by up to --out-of-order (default 10s): a
// window closes once a line --out-of-order past its end was read. A failed
// attempt that comes after its window closed is late: it is not counted,
// and it is never dropped unseen: each is printed to stderr as
// "sshwatch: late line ...: LINE" and counted in the summary. A file that
// runs from December into January reads January in the same --year, as
// earlier than December: those lines are late (give each year its own run).
//
// # Kill -9 and restarts
//
// A run killed at any point (SIGKILL, a crash) goes on when started again
// with the same --input and --dir: the publishing resumes as above, the
// pipeline from its last checkpoint, the windows from the state saved with
// it. The windows and their counts are those of an uninterrupted run. The
// output is at-least-once: the results written between the last
// checkpoint and the kill are written again, with the same counts, so
// after a kill the set of alerts (and of windows.jsonl lines, once
// duplicates are removed) is the same, but a line may appear twice. A run
// over a --dir that finished prints nothing new. SIGINT or SIGTERM stops a
// run at once (exit 1), keeping what it saved.
//
// # Flags
//
//	--input FILE        the log file (required); read whole into memory
//	--dir DIR           keep the log, checkpoints and windows.jsonl here, to resume
//	                    after a kill; default a temporary directory removed at exit.
//	                    DIR/sshwatch.json records the input (size, SHA-256), the
//	                    partitions and the year: another input is refused
//	--threshold N       alert on windows of N attempts or more, default 5
//	--year Y            the year of the timestamps, default the current year (UTC), or
//	                    the one --dir was made with
//	--json              alerts as JSON lines
//	--partitions N      partitions of the topic, default 1, or what --dir was made with
//	--out-of-order D    how far lines may be out of time order, default 10s
//	--pace D            publish lines D apart (on average, 16 per append) and handle
//	                    them D apart (one line per batch), default 0: for tests and
//	                    demos that kill it mid-way
//
// Exit status: 0 when the whole input was handled, 1 on a failure or a
// signal, 2 for a usage error (-h and --help print the usage and exit 0).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/strom-dev/strom/internal/service"
)

// config is sshwatch's parsed command line.
type config struct {
	input         string
	dir           string // "" until run makes a temporary one
	threshold     int64
	year          int
	yearSet       bool // --year was given
	json          bool
	partitions    int
	partitionsSet bool // --partitions was given
	outOfOrder    time.Duration
	pace          time.Duration
}

func main() { service.Main("sshwatch", parseFlags, run) }

const usage = `Usage: sshwatch --input FILE [--dir DIR] [--threshold N] [--year Y] [--json]
                [--partitions N] [--out-of-order D] [--pace D]

Counts failed SSH password attempts per source IP in one-minute windows of the
lines' own timestamps (read as UTC in --year) and prints the windows with
--threshold attempts or more.

Late lines: a failed attempt read after its window closed (more than
--out-of-order behind the newest line) is not counted; each one is printed to
stderr as a warning and counted in the summary, never dropped silently.

Kill -9: run again with the same --input and --dir to go on. Alerts are
at-least-once: after a kill the set of alerts is the same as without one, but
some may be printed twice. Every window (not only alerts) is appended to
DIR/windows.jsonl.

Exit status: 0 done, 1 failure or signal, 2 usage error.

Flags:
`

// parseFlags reads the command line.
func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("sshwatch", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	input := fs.String("input", "", "the log file (required)")
	dir := fs.String("dir", "", "keep the log, checkpoints and windows.jsonl in `DIR`, to resume after a kill (default: a temporary directory, removed at exit)")
	threshold := fs.Int64("threshold", 5, "alert on windows of `N` failed attempts or more")
	year := fs.Int("year", time.Now().UTC().Year(), "the `year` of the timestamps, UTC; an existing --dir keeps its own (another given is refused)")
	asJSON := fs.Bool("json", false, `alerts as JSON lines {"window_start","window_end","key","count"}`)
	partitions := fs.Int("partitions", 1, "partitions of the topic (line i goes to i % N); an existing --dir keeps its own (another given is refused)")
	outOfOrder := fs.Duration("out-of-order", 10*time.Second, "how far lines may be out of time order before they are late")
	pace := fs.Duration("pace", 0, "publish and handle lines this far apart, on average (for tests and demos that kill it mid-way)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := config{input: *input, dir: *dir, threshold: *threshold, year: *year, json: *asJSON,
		partitions: *partitions, outOfOrder: *outOfOrder, pace: *pace}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "year":
			cfg.yearSet = true
		case "partitions":
			cfg.partitionsSet = true
		}
	})
	switch {
	case cfg.input == "":
		return config{}, errors.New("--input is required")
	case cfg.threshold < 1:
		return config{}, fmt.Errorf("--threshold %d: must be at least 1", cfg.threshold)
	case cfg.year < 1 || cfg.year > 9999:
		return config{}, fmt.Errorf("--year %d: must be between 1 and 9999", cfg.year)
	case cfg.partitions < 1 || cfg.partitions > 1024:
		return config{}, fmt.Errorf("--partitions %d: must be between 1 and 1024", cfg.partitions)
	case cfg.outOfOrder < 0:
		return config{}, fmt.Errorf("--out-of-order %s: must not be negative", cfg.outOfOrder)
	case cfg.pace < 0:
		return config{}, fmt.Errorf("--pace %s: must not be negative", cfg.pace)
	}
	// Checked before anything is created: a typo must not leave a new,
	// empty --dir behind.
	f, err := os.Open(cfg.input)
	if err != nil {
		return config{}, fmt.Errorf("--input: %w", err)
	}
	f.Close()
	return cfg, nil
}

// run publishes and watches cfg.input, in a temporary directory when
// cfg.dir is empty, and prints a summary to stderr.
func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	where := cfg.dir
	if cfg.dir == "" {
		dir, err := os.MkdirTemp("", "sshwatch-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.dir, where = dir, "a temporary directory, removed"
	}
	sum, err := watch(ctx, cfg, os.Stdout, os.Stderr)
	if sum != nil {
		fmt.Fprintf(os.Stderr, "sshwatch: read %d lines: %d failed password attempts, %d windows, %d alerts (threshold %d), %d late, %d skipped; log, checkpoints and %s in %s\n",
			sum.Lines.Load(), sum.Attempts.Load(), sum.Windows.Load(), sum.Alerts.Load(), cfg.threshold,
			sum.Late.Load(), sum.Skipped.Load(), windowsFile, where)
	}
	if ctx.Err() != nil {
		return errors.New("stopped by a signal before the end of the input; run again with the same --dir to go on")
	}
	return err
}
