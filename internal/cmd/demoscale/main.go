// Command demoscale is make demo-scale: examples/sshwatch on 3 processes
// of one Kafka consumer group over an in-process Kafka, one killed with
// kill -9 and a fourth added mid-way, checked against sshwatch on one
// process (see package internal/scaledemo for what it does and checks).
//
//	go build -o bin/ ./examples/sshwatch ./internal/cmd/demoscale
//	bin/demoscale --input ../shared/data/loghub/OpenSSH_2k.log --sshwatch bin/sshwatch
//
// It prints the run's events as they happen, then a report: the records,
// the alerts and windows expected, printed, missing, extra, wrong and
// duplicated, the kills and joins, what each worker did, and the timings.
//
// Flags:
//
//	--input FILE      the sshd log (required)
//	--sshwatch PATH   the sshwatch binary (default: sshwatch beside this command)
//	--repartition     key the lines by line number and count through a repartition topic
//	--workers N       processes started at first, default 3
//	--partitions N    of the input topic, default 6
//	--seed N          picks the worker killed, default 1
//	--kill=false      no kill -9 (with --repartition a kill counts again the lines the
//	                  killed worker wrote to the repartition topic after its last commit)
//	--join=false      no fourth worker
//	--dir DIR         keep the run's files (the workers' alerts, windows, stderr) in DIR;
//	                  default a temporary folder, removed when the run passes
//	--timeout D       bound on the whole run, default 3m
//
// Exit status: 0 when the alerts and windows equal one process's, 1 when
// they differ or the run failed (the run folder is kept and named), 2 for
// a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/strom-dev/strom/internal/scaledemo"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("demoscale", flag.ContinueOnError)
	input := fs.String("input", "", "the sshd log (required)")
	sshwatch := fs.String("sshwatch", "", "the sshwatch binary (default: sshwatch beside this command)")
	repartition := fs.Bool("repartition", false, "key the lines by line number and count per IP through a repartition topic")
	workers := fs.Int("workers", 3, "sshwatch processes started at first")
	partitions := fs.Int("partitions", 6, "partitions of the input topic")
	seed := fs.Uint64("seed", 1, "picks the worker killed")
	kill := fs.Bool("kill", true, "kill a worker with kill -9 a third of the way")
	join := fs.Bool("join", true, "start one more worker two thirds of the way")
	dir := fs.String("dir", "", "keep the run's files in `DIR` (default: a temporary folder, removed when the run passes)")
	timeout := fs.Duration("timeout", 3*time.Minute, "bound on the whole run")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *input == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "demoscale: --input is required, and takes no arguments")
		return 2
	}
	if *sshwatch == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(os.Stderr, "demoscale: %v\n", err)
			return 2
		}
		*sshwatch = filepath.Join(filepath.Dir(exe), "sshwatch")
	}
	keep := *dir != ""
	if !keep {
		tmp, err := os.MkdirTemp("", "strom-demo-scale-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "demoscale: %v\n", err)
			return 1
		}
		*dir = tmp
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := scaledemo.Run(ctx, scaledemo.Config{Input: *input, SSHWatch: *sshwatch, Dir: *dir, Workers: *workers,
		Partitions: *partitions, Repartition: *repartition, NoKill: !*kill, NoJoin: !*join, Seed: *seed, Progress: prefixed{}})
	if rep != nil && err == nil {
		fmt.Print("demo-scale: " + rep.String())
	}
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo-scale: FAIL: %v\ndemo-scale: the run's files are in %s\n", err, *dir)
		return 1
	case !rep.Pass():
		fmt.Fprintf(os.Stderr, "demo-scale: the run's files are in %s\n", *dir)
		return 1
	}
	if !keep {
		os.RemoveAll(*dir)
	}
	return 0
}

// prefixed prints the run's events as demo-scale's lines.
type prefixed struct{}

func (prefixed) Write(p []byte) (int, error) {
	fmt.Print("demo-scale: " + string(p))
	return len(p), nil
}
