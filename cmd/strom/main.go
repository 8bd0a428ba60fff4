package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
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
	}
	return exitCode(err)
}
