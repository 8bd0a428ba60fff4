package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Main runs a service's command line and exits: it parses os.Args[1:]
// with parse and runs the result with run. The exit status is 0 for
// -h/--help (flag.ErrHelp) and for a run that returns nil, 2 for any other
// parse error (a usage error) and 1 for an error of run; an error is printed
// to stderr as "name: error".
func Main[C any](name string, parse func(args []string) (C, error), run func(C) error) {
	os.Exit(exitCode(name, os.Args[1:], os.Stderr, parse, run))
}

// exitCode is Main without the exit, for tests.
func exitCode[C any](name string, args []string, stderr io.Writer, parse func([]string) (C, error), run func(C) error) int {
	cfg, err := parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}
