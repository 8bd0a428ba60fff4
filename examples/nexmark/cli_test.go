package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpExitsZeroWithTheUsage ensures --help (and -h) prints the usage
// and exits 0, as the services do, not "flag: help requested" and 1.
func TestHelpExitsZeroWithTheUsage(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var stderr bytes.Buffer
		assert.Equal(t, 0, exitCode([]string{arg}, io.Discard, &stderr), arg)
		assert.Contains(t, stderr.String(), "Usage of nexmark")
		assert.Contains(t, stderr.String(), "-rate")
		assert.NotContains(t, stderr.String(), "help requested")
	}
}

// TestBadFlagsFailBeforeGeneratingNamingTheFlag ensures a negative
// --rate, an --out or --cpuprofile that cannot be created and a --dir
// whose parent folder does not exist each stop the command before any
// event is generated (nothing is printed on stderr but the error), exit
// 1, and name nexmark and the flag; --dir's own folder is not created.
func TestBadFlagsFailBeforeGeneratingNamingTheFlag(t *testing.T) {
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "nonexistent", "dir")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "-5"}, "nexmark: --rate -5: must not be negative"},
		{[]string{"--out", filepath.Join(missing, "f")}, "nexmark: --out " + filepath.Join(missing, "f") + ": "},
		{[]string{"--query", "q0,q1", "--out", filepath.Join(missing, "f")}, "nexmark: --out " + filepath.Join(missing, "f") + ": "},
		{[]string{"--cpuprofile", filepath.Join(missing, "p")}, "nexmark: --cpuprofile " + filepath.Join(missing, "p") + ": "},
		{[]string{"--dir", filepath.Join(missing, "x")}, "nexmark: --dir " + filepath.Join(missing, "x") + ": its parent folder " + missing + " does not exist"},
	} {
		var stderr bytes.Buffer
		code := exitCode(append([]string{"--events", "50"}, c.args...), io.Discard, &stderr)
		assert.Equal(t, 1, code, c.args)
		assert.Equal(t, c.want, stderr.String()[:min(len(c.want), stderr.Len())], c.args)
		assert.NotContains(t, stderr.String(), "generated", "it failed only after generating the events")
		assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: the error")
	}
	_, err := os.Stat(filepath.Join(tmp, "nonexistent"))
	assert.ErrorIs(t, err, os.ErrNotExist, "--dir created the path")
}

// TestDirCreatesItsLastElement ensures a --dir whose parent exists is
// created, and the count line says "1 person", not "1 persons".
func TestDirCreatesItsLastElement(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var stderr bytes.Buffer
	require.Equal(t, 0, exitCode([]string{"--events", "50", "--dir", dir}, io.Discard, &stderr), stderr.String())
	assert.DirExists(t, dir)
	assert.Contains(t, stderr.String(), "generated 50 events (1 person, 3 auctions, 46 bids) into "+dir)
}

// TestPluralCountsOne ensures a count of 1 takes the singular and any
// other, 0 included, the plural.
func TestPluralCountsOne(t *testing.T) {
	assert.Equal(t, "1 person", plural(1, "person"))
	assert.Equal(t, "0 persons", plural(0, "person"))
	assert.Equal(t, "2 bids", plural(2, "bid"))
}
