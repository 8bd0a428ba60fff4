// Command check verifies from the outside, over the services' HTTP /stats, that the
// publisher and the consumers kept strom's promise: every record written is handled, none is
// skipped, and a consumer killed with kill -9 resumes from its checkpoint.
//
// Run it with
//
//	go run ./examples/check split --publisher http://127.0.0.1:7070 \
//	    --consumers http://127.0.0.1:7071,http://127.0.0.1:7072,http://127.0.0.1:7073
//	go run ./examples/check resumed 1234 --consumer http://127.0.0.1:7072 --at-least 1100
//
// A URL may be given as host:port, as http://host:port, or with the /stats path.
//
// # check split
//
//	check split --publisher URL --consumers URL,URL,... [--wait 30s]
//
// First it waits, at most --wait, until the publisher reports stopped, every consumer's lag
// is 0 and the consumers' positions stayed the same over a few polls. Then, for each
// consumer, it compares the consumer's position (the next offset it will read, saved in its
// checkpoint) with the number of records written to that consumer's partition: the
// partition's high watermark as the publisher reports it (nextOffset), which also counts
// what earlier publisher processes wrote:
//
//   - equal: ok, every record of the partition was handled and checkpointed;
//   - smaller: "replay still owed", records written but not yet checkpointed (the consumer
//     is behind or stuck);
//   - larger: "skip", the consumer claims records that were never written.
//
// A partition no consumer reads fails too. It prints one line per partition, then a verdict.
//
// # check resumed
//
//	check resumed BEFORE --consumer URL [--at-least LOW] [--wait 10s]
//
// BEFORE is the partition's high watermark at the moment the consumer was killed (read from
// the publisher's nextOffset right after the kill: no saved position can be above it). LOW,
// optional, is the position the consumer reported just before it was killed (a position it
// had already saved). The check passes iff the restarted consumer's resumedFrom is
//
//   - not null: it found its checkpoint;
//   - greater than 0: it did not start over from the log start;
//   - at most BEFORE: it did not skip records;
//   - at least LOW, when given: a saved checkpoint survived kill -9.
//
// Resuming below what was handled before the kill is legal: at-least-once replays the
// records handled after the last checkpoint. Starting over is the failure.
//
// # check table and check get
//
//	check table --publisher URL --consumers URL,URL,...
//	check get URL PATH
//
// table prints, per partition, written (by the publisher), position, handled, resumedFrom
// and lag. get prints one value of a /stats document, PATH dot-separated with array indexes
// as numbers ("position", "nextOffset.2", "lastRecord.offset"), "null" for null: the demo
// script reads stats with it.
//
// # Exit status
//
// 0 when the check passes, 1 when it fails, 2 for a usage error or a service that cannot
// be reached or answers badly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses.
const (
	exitPass  = 0
	exitFail  = 1
	exitUsage = 2
)

// usage is printed for a bad command line.
const usage = `usage:
  check split --publisher URL --consumers URL,URL,... [--wait 30s]
  check resumed BEFORE --consumer URL [--at-least LOW] [--wait 10s]
  check table --publisher URL --consumers URL,URL,...
  check get URL PATH
`

// errFailed is returned by a check whose verdict is a failure; it has already printed why.
var errFailed = errors.New("check failed")

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "split":
		err = runSplit(args[1:], stdout)
	case "resumed":
		err = runResumed(args[1:], stdout)
	case "table":
		err = runTable(args[1:], stdout)
	case "get":
		err = runGet(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitPass
	default:
		err = usagef("unknown command %q", args[0])
	}
	var uerr usageError
	switch {
	case err == nil:
		return exitPass
	case errors.Is(err, errFailed):
		return exitFail
	case errors.Is(err, flag.ErrHelp):
		return exitPass
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "check: %v\n%s", err, usage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "check: %v\n", err)
		return exitUsage
	}
}

// parse parses flags and positional arguments in any order ("resumed 12 --consumer URL" and
// "resumed --consumer URL 12" both work), returning the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// statsURL turns "host:port", "http://host:port" or ".../stats" into the /stats URL.
func statsURL(u string) string {
	u = strings.TrimRight(u, "/")
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if !strings.HasSuffix(u, "/stats") {
		u += "/stats"
	}
	return u
}

// baseURL is statsURL without its /stats, for messages.
func baseURL(u string) string { return strings.TrimSuffix(statsURL(u), "/stats") }

// splitList splits a comma-separated list of URLs, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
