package log_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestOpenOfMissingDirectoryFailsWithErrNoLogAndCreatesNothing ensures Open
// of a directory that does not exist (a mistyped path), read-write or
// read-only, fails at once with an error naming the path that matches
// ErrNoLog and fs.ErrNotExist, and creates neither the directory nor its
// missing parent.
func TestOpenOfMissingDirectoryFailsWithErrNoLogAndCreatesNothing(t *testing.T) {
	for name, opts := range map[string][]log.Option{
		"read-write": nil,
		"read-only":  {log.ReadOnly()},
	} {
		t.Run(name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "mistyped")
			dir := filepath.Join(parent, "log")
			lg, err := log.Open(dir, opts...)
			require.ErrorIs(t, err, log.ErrNoLog)
			require.ErrorIs(t, err, fs.ErrNotExist)
			assert.Nil(t, lg)
			assert.Contains(t, err.Error(), dir)
			assert.Contains(t, err.Error(), "CreateIfMissing", "the message says how to create one")
			_, err = os.Stat(parent)
			assert.ErrorIs(t, err, fs.ErrNotExist, "nothing created")
		})
	}
}

// TestOpenOfAFileFailsWithErrNoLog ensures Open of a path that exists but is
// a regular file fails with ErrNoLog naming it as not a directory (and not
// as missing), with CreateIfMissing too, and leaves the file as it was.
func TestOpenOfAFileFailsWithErrNoLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o644))
	for name, opts := range map[string][]log.Option{
		"read-write":        nil,
		"read-only":         {log.ReadOnly()},
		"create-if-missing": {log.CreateIfMissing()},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := log.Open(path, opts...)
			require.ErrorIs(t, err, log.ErrNoLog)
			assert.NotErrorIs(t, err, fs.ErrNotExist)
			assert.Contains(t, err.Error(), path+" is not a directory")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "x", string(data))
		})
	}
}

// TestCreateIfMissingCreatesTheDirectoryAndParents ensures CreateIfMissing
// creates a missing log directory and its missing parents, that the new log
// takes a topic, and that the directory then opens without the option,
// read-write and read-only, with the topic in it.
func TestCreateIfMissingCreatesTheDirectoryAndParents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "log")
	lg := openLog(t, dir, log.CreateIfMissing())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	_, err = lg.CreateTopic("events", 1)
	require.NoError(t, err)
	require.NoError(t, lg.Close())

	for _, opts := range [][]log.Option{nil, {log.ReadOnly()}} {
		again := openLog(t, dir, opts...)
		names, err := again.Topics()
		require.NoError(t, err)
		assert.Equal(t, []string{"events"}, names)
	}
}

// TestOpenOfEmptyExistingDirectoryNeedsNoOption ensures an existing empty
// directory opens without CreateIfMissing, read-write and read-only, and
// that a second CreateIfMissing on an existing log changes nothing.
func TestOpenOfEmptyExistingDirectoryNeedsNoOption(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range [][]log.Option{nil, {log.ReadOnly()}, {log.CreateIfMissing()}} {
		lg := openLog(t, dir, opts...)
		names, err := lg.Topics()
		require.NoError(t, err)
		assert.Empty(t, names)
	}
}

// TestReadOnlyWithCreateIfMissingIsABadCombination ensures Open rejects
// ReadOnly with CreateIfMissing, naming both, before creating anything.
func TestReadOnlyWithCreateIfMissingIsABadCombination(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	_, err := log.Open(dir, log.ReadOnly(), log.CreateIfMissing())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ReadOnly")
	assert.Contains(t, err.Error(), "CreateIfMissing")
	assert.NotErrorIs(t, err, log.ErrNoLog, "the options are checked before the directory")
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing created")
}

// TestOpenOfAnEmptyPathSaysSo ensures Open("") fails with ErrNoLog and a
// message that says the name is empty (a newcomer saw "no log directory: :"),
// with CreateIfMissing too: it must not create anything in the working
// directory.
func TestOpenOfAnEmptyPathSaysSo(t *testing.T) {
	for _, opts := range [][]log.Option{nil, {log.CreateIfMissing()}} {
		_, err := log.Open("", opts...)
		require.ErrorIs(t, err, log.ErrNoLog)
		assert.Contains(t, err.Error(), "empty directory name")
	}
}
