package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func strom(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCreateAppendDescribeRead ensures the tool's commands work together on
// one directory.
func TestCreateAppendDescribeRead(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := strom(t, "create", "-dir", dir, "events", "3")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "3 partitions")

	code, out, errs := strom(t, "append", "-dir", dir, "-key", "alice", "events", "one", "two")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "events/0@0\nevents/0@1\n", out)

	code, out, _ = strom(t, "describe", "-dir", dir, "events")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^0\s+0\s+2\s+1$`, out)

	code, out, _ = strom(t, "read", "-dir", dir, "events", "0")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[1], `"offset":1`)
	assert.Contains(t, lines[1], `"key":"alice","value":"two"`)
}

// TestBadInputIsAClearError ensures usage mistakes exit 2 and log errors
// exit 1 with the log's message.
func TestBadInputIsAClearError(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := strom(t, "create", "-dir", dir, "../x", "3")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "invalid topic name")
	code, _, _ = strom(t, "create", "-dir", dir, "x")
	assert.Equal(t, 2, code)
	code, _, errs = strom(t, "read", "-dir", dir, "nope", "0")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "unknown topic")
	code, _, errs = strom(t, "frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "unknown command")
}

// TestFlagsMayFollowArguments ensures "strom create events 3 -dir D" works
// like "strom create -dir D events 3".
func TestFlagsMayFollowArguments(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := strom(t, "create", "events", "2", "-dir", dir)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "2 partitions")
	code, _, errs = strom(t, "create", "-follow", "-dir", dir, "x", "1")
	assert.Equal(t, 2, code, "create has no -follow")
	assert.Contains(t, errs, "flag provided but not defined: -follow")
}
