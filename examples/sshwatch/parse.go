package main

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// attempt is one failed SSH password attempt read from a line, or several
// when syslog folded identical lines into "message repeated N times".
type attempt struct {
	Time  time.Time // the line's own timestamp, read as UTC in the configured year
	IP    string    // the source address after "from"
	User  string    // the user name tried, without "invalid user "
	Count int64     // 1, or N of "message repeated N times: [ ... ]"
	Line  string    // the whole line, for the late-record warning
}

// failedRE matches a failed password attempt of OpenSSH's sshd as syslog
// writes it:
//
//	Dec 10 07:28:14 LabSZ sshd[24245]: Failed password for root from 112.95.230.3 port 41542 ssh2
//	Dec 10 08:24:35 LabSZ sshd[24361]: Failed password for invalid user  0101 from 5.188.10.180 port 36279 ssh2
//	Dec 10 07:13:56 LabSZ sshd[24227]: message repeated 5 times: [ Failed password for root from 5.36.59.76 port 42393 ssh2]
//
// Groups: 1 the timestamp, 2 the repeat count (empty for one attempt), 3
// the user (a name may hold spaces, so it runs to the last " from "), 4 the
// address (IPv4 or IPv6).
var failedRE = regexp.MustCompile(`^([A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d) .*?(?:message repeated (\d+) times: \[ )?Failed password for (?:invalid user )?(.*) from ([0-9A-Fa-f.:]+) port \d+`)

// stampLayout is syslog's timestamp (RFC 3164): no year, no zone, the day
// padded with a space.
const stampLayout = "Jan _2 15:04:05"

// parseAttempt returns the failed password attempt on line, ok false for a
// line that is not one (most lines). The timestamp is read as UTC in year.
// It is deterministic, as a window's event time must be: a line read again
// after a restart gives the same attempt.
func parseAttempt(line string, year int) (a attempt, ok bool, err error) {
	m := failedRE.FindStringSubmatch(line)
	if m == nil {
		return attempt{}, false, nil
	}
	t, err := time.Parse(stampLayout, m[1])
	if err != nil {
		return attempt{}, false, fmt.Errorf("timestamp %q: %w", m[1], err)
	}
	n := int64(1)
	if m[2] != "" {
		if n, err = strconv.ParseInt(m[2], 10, 64); err != nil || n < 1 {
			return attempt{}, false, fmt.Errorf("repeat count %q: not a positive integer", m[2])
		}
	}
	t = time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	return attempt{Time: t, IP: m[4], User: m[3], Count: n, Line: line}, true, nil
}
