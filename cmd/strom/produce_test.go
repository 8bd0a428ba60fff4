package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
)

// TestProduceCountsKeyedLinesAndWarnsWhenTheKeyRegexMatchesNone ensures
// produce --key-regex ends by saying how many lines it keyed and how many
// went without a key (the OpenSSH sample: 266 of its 2,000 lines carry no
// IP address), and that an expression matching no line gets a warning that
// names it, while the records are still appended; without --key-regex it
// prints nothing.
func TestProduceCountsKeyedLinesAndWarnsWhenTheKeyRegexMatchesNone(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(loghub.Dir(t), "OpenSSH_2k.log"))
	require.NoError(t, err)
	dir := newLog(t, "ssh", 3)
	ip := `(\d+\.\d+\.\d+\.\d+)`

	r := strom(t, data, "--dir", dir, "produce", "ssh", "--key-regex", ip)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 2000 lines: 1734 keyed by --key-regex, 266 without a key (round-robin)\n", string(r.stderr))

	r = strom(t, data, "--dir", dir, "produce", "ssh", "--key-regex", `sshd\[(\d+)\]x`)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "strom: produce: 2000 lines: 0 keyed by --key-regex, 2000 without a key (round-robin)\n"+
		`strom: warning: --key-regex "sshd\\[(\\d+)\\]x" matched no line of 2000: no record has a key, all went round-robin`+"\n", string(r.stderr))

	r = strom(t, []byte("a\nb\n"), "--dir", dir, "produce", "ssh", "--key-regex", "z", "--partition", "1")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, string(r.stderr), "2 without a key (to partition 1)")
	assert.Contains(t, string(r.stderr), `warning: --key-regex "z" matched no line of 2`)

	r = strom(t, data, "--dir", dir, "produce", "ssh")
	require.Equal(t, 0, r.code)
	assert.Empty(t, r.stderr, "no --key-regex: nothing to count")
	assert.Contains(t, string(ok(t, nil, "--dir", dir, "topics", "describe", "ssh", "--json")), `"nextOffset"`)
}
