// Package testutil holds the test helpers that more than one package's
// tests use, so that each is written once: the log's write paths to run a
// test under, a small-segment log that closes itself, and a process
// environment without STROM_* settings, and a real HTTP server on 127.0.0.1
// with checks of the services' endpoints (http.go). Only tests import it.
package testutil

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// Mode is one of the log's write paths, named for t.Run.
type Mode struct {
	// Name is the subtest name: "file" or "mmap".
	Name string
	// Mode is the write path.
	Mode log.Mode
}

// Modes are the two write paths every test of a log runs under.
var Modes = []Mode{
	{"file", log.ModeFile},
	{"mmap", log.ModeMmap},
}

// SegmentBytes is the segment size OpenLog gives, in bytes: 4096, small
// enough that a few hundred test records span several segments (reads cross
// segment boundaries) and a record larger than a segment is cheap to build.
const SegmentBytes = 4096

// OpenLog opens a read-write log with write path mode and segments of
// SegmentBytes in a fresh directory (t.TempDir), then opts, which override
// those two. The log is closed, and the close checked, when the test ends;
// an error opening it fails the test.
func OpenLog(t testing.TB, mode log.Mode, opts ...log.Option) *log.Log {
	t.Helper()
	opts = append([]log.Option{log.WithMode(mode), log.WithSegmentBytes(SegmentBytes)}, opts...)
	lg, err := log.Open(t.TempDir(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lg.Close()) })
	return lg
}

// CleanEnv returns this process's environment without its STROM_*
// variables, for a child process that only the flags a test passes may
// configure.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STROM_") {
			env = append(env, kv)
		}
	}
	return env
}
