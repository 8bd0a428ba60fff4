package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/strom-dev/strom/log"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns the process's exit status. Output
// to stdout is buffered and flushed here, once, whatever the command returned.
func run(args []string) int {
	a := &app{
		ctx:     context.Background(),
		stdin:   os.Stdin,
		stdout:  bufio.NewWriterSize(os.Stdout, stdoutBufferBytes),
		stderr:  os.Stderr,
		outFile: os.Stdout,
	}
	root := newRoot(a)
	root.SetArgs(args)
	err := root.Execute()
	if ferr := a.stdout.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("writing stdout: %w", ferr)
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "strom:", err)
		if hint := repairHint(err); hint != "" {
			fmt.Fprintln(a.stderr, "strom:", hint)
		}
	}
	return exitCode(err)
}

// repairHint returns what to do about an error that names damage in a
// segment (a *log.CorruptError: a bad frame, a gap, an end below the
// recovery point), whichever command met it, or "" for any other error
// and after verify --repair already tried.
func repairHint(err error) string {
	var ce *log.CorruptError
	if !errors.As(err, &ce) || errors.Is(err, errRepairTried) {
		return ""
	}
	return "'strom verify' lists every damaged place; 'strom verify --repair' cuts each damaged partition at its first one, " +
		"dropping the records from there on (copy the log directory first if they matter)"
}
