package main_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/source"
)

// crlfLines is a CRLF file with the awkward cases of a line ending: a space
// before the '\r', a lone '\r' inside a line, two '\r' before a '\n' (only
// the last is the line ending's), an empty CRLF line, an LF-only line, and
// a last line without '\n' that ends in '\r'.
const crlfLines = "alpha one \r\nbeta\rtwo\r\ngamma three\r\r\n\r\ndelta four\nomega five\r"

// linesOf reads path with source.Lines and returns its elements' texts.
func linesOf(t *testing.T, path string, opts ...source.LinesOption) []string {
	t.Helper()
	src := source.Lines(path, opts...)
	defer src.Close()
	var out []string
	for {
		batch, err := src.Read(context.Background())
		for _, e := range batch {
			out = append(out, e.Value)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
	}
}

// firstGroup is the key rule of produce --key-regex and the publisher's
// --key on a line's text: the first group, nil without a match.
func firstGroup(re *regexp.Regexp, text string) *string {
	m := re.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	return &m[1]
}

// producedRecords produces path's bytes into a fresh one-partition topic
// with args and returns the records' values and keys, in order.
func producedRecords(t *testing.T, path string, args ...string) (values []string, keys []*string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dir := newLog(t, "lines", 1)
	ok(t, data, append([]string{"--dir", dir, "produce", "lines"}, args...)...)
	for _, l := range parseJSONLines(t, ok(t, nil, "--dir", dir, "consume", "lines", "--format", "json")) {
		require.NotNil(t, l.Value)
		require.Empty(t, l.ValueEncoding)
		values = append(values, *l.Value)
		keys = append(keys, l.Key)
	}
	return values, keys
}

// TestProduceAndLinesGiveTheSameRecordsOfACRLFFile ensures one CRLF file
// gives byte-identical values through strom produce and through
// source.Lines (what the publisher reads with), by default (the '\r' of a
// CRLF ending stripped, a lone '\r' kept) and with produce --keep-cr and
// source.KeepCR, and that a '$'-anchored --key-regex picks the same keys
// in both and with or without --keep-cr: on a synthetic file with every
// awkward ending and on the OpenSSH sample.
func TestProduceAndLinesGiveTheSameRecordsOfACRLFFile(t *testing.T) {
	t.Parallel()
	synthetic := filepath.Join(t.TempDir(), "crlf.log")
	require.NoError(t, os.WriteFile(synthetic, []byte(crlfLines), 0o644))
	for _, c := range []struct {
		name, path, keyRe string
	}{
		{"synthetic", synthetic, `(\w+)$`},
		{"OpenSSH_2k.log", filepath.Join(loghub.Dir(t), "OpenSSH_2k.log"), `(\S+)$`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			re := regexp.MustCompile(c.keyRe)
			lines := linesOf(t, c.path)
			values, keys := producedRecords(t, c.path, "--key-regex", c.keyRe)
			require.Equal(t, lines, values, "produce and source.Lines differ")
			for i := range values {
				assert.Equal(t, firstGroup(re, lines[i]), keys[i], "record %d's key", i)
			}

			kept := linesOf(t, c.path, source.KeepCR())
			keptValues, keptKeys := producedRecords(t, c.path, "--key-regex", c.keyRe, "--keep-cr")
			require.Equal(t, kept, keptValues, "produce --keep-cr and source.KeepCR differ")
			assert.Equal(t, keys, keptKeys, "--keep-cr changed what a '$'-anchored key regex picks")
		})
	}
	// The synthetic file's texts, spelled out.
	assert.Equal(t, []string{"alpha one ", "beta\rtwo", "gamma three\r", "", "delta four", "omega five"}, linesOf(t, synthetic))
	assert.Equal(t, []string{"alpha one \r", "beta\rtwo\r", "gamma three\r\r", "\r", "delta four", "omega five\r"}, linesOf(t, synthetic, source.KeepCR()))
}
