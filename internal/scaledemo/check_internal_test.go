package scaledemo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompareCountsMissingExtraWrongAndDuplicates ensures the check tells
// each way the workers' results can differ from one process's: a window
// never printed, one printed that one process does not print, a count
// that differs (each line counted), a window printed again with its count
// (a duplicate, not a failure), a torn line, and that the sentinels'
// windows are set apart.
func TestCompareCountsMissingExtraWrongAndDuplicates(t *testing.T) {
	want := []result{
		{WindowStart: "07:00", Key: "1.1.1.1", Count: 5},
		{WindowStart: "07:01", Key: "1.1.1.1", Count: 6},
		{WindowStart: "07:00", Key: "2.2.2.2", Count: 7},
	}
	got := []result{
		{WindowStart: "07:00", Key: "1.1.1.1", Count: 5},
		{WindowStart: "07:00", Key: "1.1.1.1", Count: 5}, // again: at-least-once
		{WindowStart: "07:00", Key: "2.2.2.2", Count: 8}, // wrong
		{WindowStart: "07:00", Key: "2.2.2.2", Count: 6}, // wrong again
		{WindowStart: "07:02", Key: "3.3.3.3", Count: 9}, // extra
		{WindowStart: "07:03", Key: "192.0.2.7", Count: 1},
	}
	c := compare(want, got, 1)
	assert.Equal(t, 3, c.Expected)
	assert.Equal(t, 5, c.Printed)
	assert.Equal(t, 3, c.Distinct)
	assert.Equal(t, 1, c.Missing, "07:01 1.1.1.1")
	assert.Equal(t, 1, c.Extra)
	assert.Equal(t, 2, c.Wrong)
	assert.Equal(t, 2, c.Duplicates)
	assert.Equal(t, 1, c.Torn)
	assert.Equal(t, 1, c.Sentinels)
	assert.False(t, c.ok())
	assert.True(t, compare(want, append(want, want[0]), 0).ok(), "a duplicate alone passes")
	assert.False(t, compare(nil, nil, 0).ok(), "nothing expected is no pass")
}

// TestAttemptIPCutsTheSourceAddress ensures the demo keys a failed
// password line by the address after the last " from ", also in a folded
// "message repeated" line and for a user name holding " from ", and keys
// no other line by an address.
func TestAttemptIPCutsTheSourceAddress(t *testing.T) {
	for line, want := range map[string]string{
		"Dec 10 07:28:14 LabSZ sshd[24245]: Failed password for root from 112.95.230.3 port 41542 ssh2":                            "112.95.230.3",
		"Dec 10 07:13:56 LabSZ sshd[24227]: message repeated 5 times: [ Failed password for root from 5.36.59.76 port 42393 ssh2]": "5.36.59.76",
		"Dec 10 08:24:35 LabSZ sshd[24361]: Failed password for invalid user from from 5.188.10.180 port 36279 ssh2":               "5.188.10.180",
		"Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking getaddrinfo for ns.example.com [173.234.31.186] failed":       "",
		"Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186":                                            "",
	} {
		ip, ok := attemptIP(line)
		assert.Equal(t, want != "", ok, line)
		assert.Equal(t, want, ip, line)
	}
}

// TestSentinelsOnePerPartitionByKafkasPartitioner ensures the sentinels
// are failed password lines, one for each partition as Kafka's partitioner
// places its key, later than the input's last line by the given time, and
// that a sentinel that would fall in the next year (which sshwatch reads
// as earlier) is refused.
func TestSentinelsOnePerPartitionByKafkasPartitioner(t *testing.T) {
	in := &input{last: time.Date(2026, 12, 10, 11, 4, 45, 0, time.UTC)}
	lines, keys, err := sentinels(in, 6, time.Minute)
	require.NoError(t, err)
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for p := range 6 {
		assert.Equal(t, p, part.Partition(&kgo.Record{Key: keys[p]}, 6))
		ip, ok := attemptIP(lines[p])
		require.True(t, ok, lines[p])
		assert.Equal(t, string(keys[p]), ip)
		assert.True(t, isSentinel(ip))
		assert.Equal(t, "Dec 10 11:05:45", lines[p][:len(stampLayout)])
	}
	in.last = time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC)
	_, _, err = sentinels(in, 6, time.Hour)
	require.ErrorContains(t, err, "next year")
}
