package scaledemo

// The input: the sshd log's lines, their Kafka keys, and the sentinels
// that close the last windows.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stampLayout is syslog's timestamp, as sshwatch reads it (RFC 3164: no
// year, the day padded with a space).
const stampLayout = "Jan _2 15:04:05"

// input is the demo's input: the lines of the file and how they are keyed.
type input struct {
	lines []string
	keys  [][]byte  // each line's Kafka key
	last  time.Time // the latest timestamp of a line, in the run's year
}

// readInput reads the file's lines (split at "\n", one "\r" before it
// dropped, as sshwatch splits them) and keys each one: by its line number
// (byLine), or by the source IP of a failed password attempt, the key
// sshwatch's window counts by, and by the line number for the other lines
// (sshwatch drops them: any key does).
func readInput(path string, year int, byLine bool) (*input, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scaledemo: %w", err)
	}
	in := &input{}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		in.lines = append(in.lines, string(bytes.TrimSuffix(line, []byte("\r"))))
	}
	if len(in.lines) == 0 {
		return nil, fmt.Errorf("scaledemo: %s has no lines", path)
	}
	for n, line := range in.lines {
		key := strconv.Itoa(n)
		if ip, ok := attemptIP(line); ok && !byLine {
			key = ip
		}
		in.keys = append(in.keys, []byte(key))
		if len(line) >= len(stampLayout) {
			if t, err := time.Parse(stampLayout, line[:len(stampLayout)]); err == nil {
				t = time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
				if t.After(in.last) {
					in.last = t
				}
			}
		}
	}
	if in.last.IsZero() {
		return nil, fmt.Errorf("scaledemo: %s: no line starts with a syslog timestamp (%q)", path, stampLayout)
	}
	return in, nil
}

// attemptIP returns the source IP of a failed password attempt ("Failed
// password for [invalid user] NAME from IP port N", also inside "message
// repeated N times: [ ... ]"), cut by hand rather than with sshwatch's
// regular expression: the IP after the last " from ".
func attemptIP(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, "Failed password for ")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, " from ")
	if i < 0 {
		return "", false
	}
	f := strings.Fields(rest[i+len(" from "):])
	if len(f) < 2 || f[1] != "port" {
		return "", false
	}
	return f[0], true
}

// sentinels returns one line per partition of a topic of n partitions: a
// failed password attempt at the latest line's time plus after, from an
// address of TEST-NET-1 (192.0.2.0/24, never a real source) whose key
// Kafka's partitioner puts in that partition. Each closes every window of
// the lines in its partition, in the input topic and, through the same
// partitioner, in a repartition topic of as many partitions; its own
// window (one attempt) stays open, below any threshold of 2 or more.
func sentinels(in *input, n int, after time.Duration) (lines []string, keys [][]byte, err error) {
	at := in.last.Add(after)
	if at.Year() != in.last.Year() {
		return nil, nil, fmt.Errorf("scaledemo: the input ends at %s: a line %v later falls in the next year, which sshwatch reads as earlier (syslog has no year)",
			in.last.Format(time.DateTime), after)
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	lines = make([]string, n)
	keys = make([][]byte, n)
	found := 0
	for host := 1; host < 255 && found < n; host++ {
		ip := "192.0.2." + strconv.Itoa(host)
		p := part.Partition(&kgo.Record{Key: []byte(ip)}, n)
		if keys[p] != nil {
			continue
		}
		keys[p] = []byte(ip)
		lines[p] = fmt.Sprintf("%s scaledemo sshd[0]: Failed password for sentinel from %s port 1 ssh2", at.Format(stampLayout), ip)
		found++
	}
	if found < n {
		return nil, nil, fmt.Errorf("scaledemo: no address of 192.0.2.0/24 for %d of %d partitions", n-found, n)
	}
	return lines, keys, nil
}

// isSentinel reports whether an alert's or window's key is a sentinel's.
func isSentinel(key string) bool { return strings.HasPrefix(key, "192.0.2.") }
