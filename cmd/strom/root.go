package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/samber/lo"
	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
)

// Exit codes, documented in the root command's help and the package doc.
const (
	exitOK      = 0 // success
	exitError   = 1 // the command failed: an I/O error, an unknown topic, a locked topic, ...
	exitUsage   = 2 // the command line is wrong: an unknown command or flag, a bad argument
	exitCorrupt = 3 // a segment holds a frame that fails its check (verify, or a read that met one)
)

// codedError carries the exit code an error should end the process with.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageErrorf returns an error that exits with exitUsage.
func usageErrorf(format string, args ...any) error {
	return &codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// errCorruptFound is returned by verify, dump and positions when they found
// corruption and already printed where; it exits with exitCorrupt.
var errCorruptFound = errors.New("corruption found")

// errRepairTried marks the corruption verify --repair left behind: no
// repair hint follows it (repairHint).
var errRepairTried = errors.New("after repair")

// exitCode maps an error returned by a command to the process's exit status.
func exitCode(err error) int {
	var ce *codedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, errCorruptFound), errors.Is(err, log.ErrCorrupt):
		return exitCorrupt
	case badArgument(err):
		return exitUsage
	}
	return exitError
}

// badArgument reports whether err says an argument of the command line was
// wrong, whichever command passed it on and whoever found it: a topic name
// breaking Kafka's rule, a partition count or number out of range. Each is
// a usage error (exit 2) wherever it is met.
func badArgument(err error) bool {
	for _, e := range []error{log.ErrInvalidTopic, log.ErrInvalidPartitions, log.ErrPartitionOutOfRange,
		checkpoint.ErrInvalidTopic} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// app is what every command shares: the standard streams (stdout buffered,
// flushed once when the command returns, and by --follow whenever it waits)
// and the global flags.
type app struct {
	ctx    context.Context
	stdin  *os.File
	stdout *bufio.Writer
	stderr io.Writer
	// outFile is the file behind stdout, to ask whether it is a terminal.
	outFile *os.File
	dir     string // --dir, defaulting to $STROM_DIR
}

// stdoutBufferBytes is the size of the buffer in front of stdout: one write
// syscall per 256 KiB of output instead of one per record (the old tool's
// 44,000 records/s; see bench_test.go).
const stdoutBufferBytes = 256 << 10

// logDir returns the log directory named by --dir or $STROM_DIR, after
// checking that it is one (checkLogDir). strom never creates it except in
// `topics create`, which does not call this.
func (a *app) logDir() (string, error) {
	if a.dir == "" {
		return "", usageErrorf("no log directory: give --dir DIR or set STROM_DIR")
	}
	if err := checkDir("log directory", a.dir); err != nil {
		return "", err
	}
	return a.dir, checkLogDir(a.dir)
}

// checkLogDir reports dir, an existing directory, as not a log directory
// when it holds something but no topic. A log directory holds nothing but
// topics (the log writes no file of its own there): it is one when it is
// empty (a new log, as an empty database is one) or holds at least one
// topic (a folder with a topic.json), whatever else lies beside it. Entries
// whose name begins with "." and lost+found (a file system's root) are not
// counted. So a mistyped --dir, or one a level too high, fails (exit 1)
// instead of reading as a log without topics.
func checkLogDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	var others []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && e.Name() != "lost+found" {
			others = append(others, e.Name())
		}
	}
	if len(others) == 0 {
		return nil
	}
	names, err := log.ListTopics(dir)
	if err != nil || len(names) > 0 {
		return err
	}
	shown := strings.Join(others[:min(len(others), 3)], ", ")
	if len(others) > 3 {
		shown += ", ..."
	}
	msg := fmt.Sprintf("%s is not a strom log directory: it holds no topic (a folder with a topic.json) but %d other entr%s (%s)",
		dir, len(others), lo.Ternary(len(others) == 1, "y", "ies"), shown)
	if hint := subfolderHint(dir); hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}

// checkDir reports a missing path, or one that is not a directory, as such.
func checkDir(what, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s does not exist", what, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	return nil
}

// noTopics says that the log directory dir holds no topic and, when one
// of its subfolders does, suggests it (subfolderHint).
func noTopics(dir string) string {
	msg := fmt.Sprintf("no topics in log directory %s", dir)
	if hint := subfolderHint(dir); hint != "" {
		msg += "; " + hint
	}
	return msg
}

// subfolderHint suggests --dir with a subfolder of dir that holds topics
// (--dir given one level too high, e.g. the folder above log/), or returns
// "" when none does.
func subfolderHint(dir string) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if names, err := log.ListTopics(sub); err == nil && len(names) > 0 {
			return fmt.Sprintf("its subfolder %s holds %d topic(s) (%s): did you mean --dir %s?",
				sub, len(names), strings.Join(names[:min(len(names), 3)], ", "), sub)
		}
	}
	return ""
}

// openRead opens the log directory read-only: it takes no lock, so it reads
// beside a running writer (another process), and it never writes.
func (a *app) openRead() (*log.Log, error) {
	dir, err := a.logDir()
	if err != nil {
		return nil, err
	}
	return log.Open(dir, log.ReadOnly())
}

const rootLong = `strom inspects and edits a strom log directory: its topics, partitions and
segments, the records in them, and the positions consumers saved.

Every command that reads or writes a log takes the directory as --dir DIR,
or from the STROM_DIR environment variable; there is no default. Reading
commands open the log read-only and take no lock, so they work beside a
running writer. A missing directory is reported as missing and only
"topics create" ever creates one. A directory is a log when it is empty (a
new log) or holds at least one topic (a folder with a topic.json); one that
holds other things but no topic (dot files and lost+found aside) is not a
log, and every command but "topics create" fails on it (exit 1) rather than
read it as a log without topics.

Exit status:
  0  success
  1  an error (I/O, unknown topic, not a log directory, topic locked by
     another writer, ...)
  2  a usage error (unknown command or flag, missing or bad argument)
  3  corruption: a frame failed its check, or a partition ends below its
     recovery point (records known to be on disk are gone). verify and dump
     report it, and so does every command that opens or reads a damaged
     partition (consume, topics describe, positions); "strom verify
     --repair" cuts it

Errors go to stderr, prefixed "strom: ", and name the file, partition,
byte position and offset involved.`

// newRoot builds the command tree for a.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "strom",
		Short: "Inspect and edit a strom log directory",
		Long:  rootLong,
		Example: `  export STROM_DIR=/var/lib/app/log
  strom topics create events --partitions 3
  printf 'one\ntwo\n' | strom produce events
  strom consume events --from earliest
  strom topics describe events
  strom verify`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          unknownCommand,
		RunE:          showHelp,
		// No completion command: strom's commands are few and listed in help.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(flagError)
	root.PersistentFlags().StringVar(&a.dir, "dir", os.Getenv("STROM_DIR"), "log directory (default $STROM_DIR)")
	root.AddCommand(newTopicsCmd(a), newProduceCmd(a), newConsumeCmd(a), newPositionsCmd(a),
		newDumpCmd(a), newVerifyCmd(a), newRetentionCmd(a), newCompactCmd(a), newServeCmd(a))
	return root
}

// unknownCommand rejects an argument that names no subcommand of a group
// command (strom, strom topics, strom positions) as a usage error.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
	}
	return usageErrorf("%s; run '%s --help'", msg, cmd.CommandPath())
}

// showHelp prints a group command's help when it is run alone (exit 0).
func showHelp(cmd *cobra.Command, args []string) error {
	return cmd.Help()
}

var negativeNumber = regexp.MustCompile(`^unknown shorthand flag: '(\d)' in (-\d\S*)$`)

// Every message is printed once, by run, after the one prefix "strom: ".
// A message names its command where that helps (in the hint "run 'strom
// consume --help'", or as a sentence's subject, "consume takes 1
// argument"), never as a second prefix: "strom: strom consume: ..." read
// as a stutter.

// flagError makes every flag parsing error a usage error, and explains the
// one a negative number as a positional argument causes.
func flagError(cmd *cobra.Command, err error) error {
	if m := negativeNumber.FindStringSubmatch(err.Error()); m != nil {
		return usageErrorf("%s is not a valid argument: partitions, offsets and counts are never negative; run '%s --help'", m[2], cmd.CommandPath())
	}
	return usageErrorf("%w; run '%s --help'", err, cmd.CommandPath())
}

// commandName is the command's path without the program's name ("consume",
// "topics create"), or "strom" for the root command.
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		want := "no arguments"
		switch {
		case n == 1:
			want = "1 argument (" + names + ")"
		case n > 1:
			want = fmt.Sprintf("%d arguments (%s)", n, names)
		}
		return usageErrorf("%s takes %s, got %d; run '%s --help'", commandName(cmd), want, len(args), cmd.CommandPath())
	}
}

// checkFlagNonNegative rejects a negative value of an integer flag the user set.
func checkFlagNonNegative(cmd *cobra.Command, name string, v int64) error {
	if cmd.Flags().Changed(name) && v < 0 {
		return usageErrorf("--%s %d is negative; run '%s --help'", name, v, cmd.CommandPath())
	}
	return nil
}
