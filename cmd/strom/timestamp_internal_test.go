package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLineTimeYearlessLayoutTakesTheYearThatIsNotAhead ensures a syslog time
// (no year) takes --timestamp-year when given, else the current year in its
// location, or the year before when that is more than a day ahead of now:
// on 2026-12-02, Dec 10 is last year's, Dec 2 at 20:00 (hours ahead) and
// Nov 30 this year's, and Jan 5 read on 2027-01-01 is this year's.
func TestLineTimeYearlessLayoutTakesTheYearThatIsNotAhead(t *testing.T) {
	now := time.Date(2026, time.December, 2, 14, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	lt, err := newLineTime(`^(\w+ +\d+ [0-9:]+)`, "syslog", "UTC", 0, "fail", clock)
	require.NoError(t, err)
	for line, want := range map[string]time.Time{
		"Dec 10 06:55:46 LabSZ sshd[24200]: x": time.Date(2025, time.December, 10, 6, 55, 46, 0, time.UTC),
		"Dec  2 20:00:00 host y":               time.Date(2026, time.December, 2, 20, 0, 0, 0, time.UTC),
		"Nov 30 23:59:59 host z":               time.Date(2026, time.November, 30, 23, 59, 59, 0, time.UTC),
	} {
		ms, err := lt.stamp([]byte(line))
		require.NoError(t, err, line)
		assert.Equal(t, want.UnixMilli(), ms, line)
	}
	now = time.Date(2027, time.January, 1, 0, 5, 0, 0, time.UTC)
	ms, err := lt.stamp([]byte("Dec 31 23:59:00 h"))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, time.December, 31, 23, 59, 0, 0, time.UTC).UnixMilli(), ms)

	fixed, err := newLineTime(`^(\w+ +\d+ [0-9:]+)`, "syslog", "UTC", 2015, "fail", clock)
	require.NoError(t, err)
	ms, err = fixed.stamp([]byte("Dec 10 06:55:46 LabSZ"))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2015, time.December, 10, 6, 55, 46, 0, time.UTC).UnixMilli(), ms)
}

// TestLineTimeParsesLayoutsNamesAndUnixCounts ensures the named formats, a
// Go layout with a comma before its milliseconds (ZooKeeper's), a zone from
// --timestamp-location for a time without one, and unix counts with
// decimals give the right milliseconds.
func TestLineTimeParsesLayoutsNamesAndUnixCounts(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		format, location, line string
		want                   int64
	}{
		{"rfc3339", "UTC", "2026-11-30T12:00:00.25+01:00 x", time.Date(2026, 11, 30, 11, 0, 0, 250e6, time.UTC).UnixMilli()},
		{"RFC3339", "UTC", "2026-11-30T12:00:00Z x", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli()},
		{"2006-01-02 15:04:05,000", "UTC", "2015-07-29 17:41:44,747 - INFO", time.Date(2015, 7, 29, 17, 41, 44, 747e6, time.UTC).UnixMilli()},
		{"datetime", "Asia/Tokyo", "2015-07-29 17:41:44 x", time.Date(2015, 7, 29, 8, 41, 44, 0, time.UTC).UnixMilli()},
		{"060102 150405", "UTC", "081109 203615 148 INFO", time.Date(2008, 11, 9, 20, 36, 15, 0, time.UTC).UnixMilli()},
		{"unix", "UTC", "1700000000 x", 1700000000000},
		{"unix", "UTC", "1700000000.1239 x", 1700000000123},
		{"unixms", "UTC", "1700000000123 x", 1700000000123},
		{"unixus", "UTC", "1700000000123456 x", 1700000000123},
		{"unixns", "UTC", "1700000000123456789 x", 1700000000123},
	} {
		re := `^(\S+)`
		if strings.Contains(c.line, " - ") || strings.HasPrefix(c.format, "0") || c.format == "datetime" {
			re = `^([0-9-]+ [0-9:,]+)` // a date, a space and a time
		}
		lt, err := newLineTime(re, c.format, c.location, 0, "fail", clock)
		if c.location != "UTC" && err != nil {
			t.Logf("no time zone data for %s, case left out: %v", c.location, err)
			continue
		}
		require.NoError(t, err, c.format)
		ms, err := lt.stamp([]byte(c.line))
		require.NoError(t, err, "%s %q", c.format, c.line)
		assert.Equal(t, c.want, ms, "%s %q", c.format, c.line)
	}
}

// TestLineTimeErrorsQuoteTheTextAndMatchTheirKind ensures a line without a
// time is errNoTime quoting the line, and a text that does not parse, or
// parses to the epoch (which the log takes for "now"), errBadTime quoting
// the text.
func TestLineTimeErrorsQuoteTheTextAndMatchTheirKind(t *testing.T) {
	lt, err := newLineTime(`^(\S+) `, "unix", "UTC", 0, "skip", time.Now)
	require.NoError(t, err)
	_, err = lt.stamp([]byte("nospace"))
	assert.ErrorIs(t, err, errNoTime)
	assert.Contains(t, err.Error(), `does not match the line "nospace"`)
	_, err = lt.stamp([]byte("12x3 y"))
	assert.ErrorIs(t, err, errBadTime)
	assert.Contains(t, err.Error(), `time text "12x3" is not a --timestamp-format unix number`)
	_, err = lt.stamp([]byte("0 y"))
	assert.ErrorIs(t, err, errBadTime)
	assert.Contains(t, err.Error(), "at or before the Unix epoch")
	_, err = lt.stamp([]byte("1.5000000000 y"))
	assert.ErrorIs(t, err, errBadTime, "ten decimals")
}

// TestLineTimeRefusesATimePastTheBoundOfItsClock ensures stamp refuses, as
// errAheadTime saying how far ahead, a time more than maxAhead ahead of the
// clock, and takes one within it; that a time refused by a stale reading of
// the clock is taken once the clock has moved on (it reads the clock again
// before refusing); and that maxAhead 0 refuses nothing.
func TestLineTimeRefusesATimePastTheBoundOfItsClock(t *testing.T) {
	now := time.Date(2026, time.December, 2, 14, 0, 0, 0, time.UTC)
	lt, err := newLineTime(`^(\S+)`, "rfc3339", "UTC", 0, "fail", func() time.Time { return now })
	require.NoError(t, err)
	lt.maxAhead = time.Hour

	ms, err := lt.stamp([]byte("2026-12-02T15:00:00Z in"))
	require.NoError(t, err, "exactly the bound ahead")
	assert.Equal(t, now.Add(time.Hour).UnixMilli(), ms)
	_, err = lt.stamp([]byte("2026-12-02T15:00:01Z out"))
	require.ErrorIs(t, err, errAheadTime)
	assert.Contains(t, err.Error(), `time text "2026-12-02T15:00:01Z" in the line "2026-12-02T15:00:01Z out" is 2026-12-02T15:00:01Z, 1h0m1s ahead of the clock (2026-12-02T14:00:00Z), more than the 1h0m0s`)
	_, err = lt.stamp([]byte("3000-01-01T00:00:00Z far"))
	require.ErrorIs(t, err, errAheadTime)
	assert.Contains(t, err.Error(), "355410 days ahead", "centuries do not overflow a Duration")

	now = now.Add(time.Minute)
	_, err = lt.stamp([]byte("2026-12-02T15:00:01Z later"))
	require.NoError(t, err, "the clock has moved on: read again")

	lt.maxAhead = 0
	_, err = lt.stamp([]byte("3000-01-01T00:00:00Z off"))
	require.NoError(t, err)
}
