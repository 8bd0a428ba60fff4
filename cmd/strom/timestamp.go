package main

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Taking a record's timestamp from its line: produce --timestamp-regex,
// --timestamp-format, --timestamp-location, --timestamp-year and
// --timestamp-on-error.

// namedLayouts are the --timestamp-format names that stand for a Go time
// layout: Go's layout constants by their lower-case names, and syslog for
// time.Stamp ("Dec 10 06:55:46", the BSD syslog time, which has no year).
// rfc3339 parses fractional seconds too, as time.RFC3339 does.
var namedLayouts = map[string]string{
	"rfc3339":     time.RFC3339,
	"rfc3339nano": time.RFC3339Nano,
	"syslog":      time.Stamp,
	"stamp":       time.Stamp,
	"stampmilli":  time.StampMilli,
	"stampmicro":  time.StampMicro,
	"stampnano":   time.StampNano,
	"datetime":    time.DateTime,
	"dateonly":    time.DateOnly,
	"ansic":       time.ANSIC,
	"unixdate":    time.UnixDate,
	"rubydate":    time.RubyDate,
	"rfc822":      time.RFC822,
	"rfc822z":     time.RFC822Z,
	"rfc850":      time.RFC850,
	"rfc1123":     time.RFC1123,
	"rfc1123z":    time.RFC1123Z,
}

// unixDigits are the --timestamp-format names for a number since the Unix
// epoch, with the number of fraction digits that make one second: unix is
// seconds (a fraction after '.' allowed), unixms, unixus and unixns whole
// milliseconds, microseconds and nanoseconds.
var unixDigits = map[string]int{"unix": 0, "unixms": 3, "unixus": 6, "unixns": 9}

// timestampPolicy is --timestamp-on-error: what produce does with a line
// whose time --timestamp-regex does not find or --timestamp-format does not
// parse.
type timestampPolicy int8

const (
	timestampFail   timestampPolicy = iota // fail: stop, the lines before it appended
	timestampSkip                          // skip: append no record for the line
	timestampIngest                        // ingest: append it with the time of ingestion
)

// yearSlack is how far after now a time of a layout without a year may be
// and keep the current year; past it, it is taken for last year's (a log
// of late December read in early January). A day covers clock skew and
// any time zone a --timestamp-location left out.
const yearSlack = 24 * time.Hour

// lineTime finds a line's time (the first group of re) and parses it.
type lineTime struct {
	re       *regexp.Regexp
	format   string // --timestamp-format as given, for messages
	layout   string // the Go layout; "" for a unix format
	digits   int    // a unix format's fraction digits per second
	yearless bool   // the layout has no year
	loc      *time.Location
	year     int // --timestamp-year; 0: guessed from now
	onError  timestampPolicy
	now      func() time.Time
	// maxAhead is how far ahead of now a time may be: the bound of the
	// topic (log.DefaultMaxTimestampAhead for a topic of create time, which
	// refuses a whole append holding a time beyond it); 0: no bound (a
	// topic of log append time stores the time of the append instead).
	maxAhead time.Duration
	clock    int64 // the last reading of now, in ms; 0: not read yet
}

// newLineTime checks the --timestamp-* flags and returns what parses a
// line's time. Every error is a usage error naming its flag; a year given
// (not 0) with a format that has one is an error, not silently ignored.
func newLineTime(regex, format, location string, year int, onError string, now func() time.Time) (*lineTime, error) {
	lt := &lineTime{format: format, year: year, now: now}
	var err error
	if lt.re, err = regexp.Compile(regex); err != nil {
		return nil, usageErrorf("--timestamp-regex: %w", err)
	}
	if lt.re.NumSubexp() < 1 {
		return nil, usageErrorf("--timestamp-regex %q: needs a capture group around the time, e.g. '^(\\w+ +\\d+ [0-9:]+)'", regex)
	}
	switch onError {
	case "fail":
		lt.onError = timestampFail
	case "skip":
		lt.onError = timestampSkip
	case "ingest":
		lt.onError = timestampIngest
	default:
		return nil, usageErrorf("--timestamp-on-error %q: want fail, skip or ingest", onError)
	}
	if lt.loc, err = time.LoadLocation(location); err != nil {
		return nil, usageErrorf("--timestamp-location %q: %w (want UTC, Local or an IANA name such as Europe/Berlin)", location, err)
	}
	if year < 0 || year > 9999 {
		return nil, usageErrorf("--timestamp-year %d: want 1 to 9999, or 0 to take the current year", year)
	}
	// hasYear is the usage error of a --timestamp-year that would be
	// ignored: the format gives the year itself.
	hasYear := func() error {
		return usageErrorf("--timestamp-year %d: --timestamp-format %s has a year of its own; --timestamp-year applies to a layout without one (syslog, stamp, ...)", year, format)
	}
	if d, ok := unixDigits[strings.ToLower(format)]; ok {
		if year != 0 {
			return nil, hasYear()
		}
		lt.digits = d
		return lt, nil
	}
	lt.layout = format
	if l, ok := namedLayouts[strings.ToLower(format)]; ok {
		lt.layout = l
	}
	// A layout must print a time and read it back with its date: one that
	// does not is a misspelt name or a layout written in another notation
	// (yyyy-MM-dd).
	ref := time.Date(1999, time.November, 10, 23, 34, 45, 0, time.UTC)
	if s := ref.Format(lt.layout); s == lt.layout {
		return nil, usageErrorf("--timestamp-format %q: not a Go time layout (one written with 2006 01 02 15 04 05, e.g. '2006-01-02 15:04:05') nor a name: unix, unixms, unixus, unixns, %s", format, strings.Join(slices.Sorted(maps.Keys(namedLayouts)), ", "))
	} else if back, err := time.Parse(lt.layout, s); err != nil {
		return nil, usageErrorf("--timestamp-format %q: the layout does not read back what it writes: %w", format, err)
	} else if back.Day() != ref.Day() {
		return nil, usageErrorf("--timestamp-format %q: the layout has no day of the month, so a line's date is unknown", format)
	} else {
		lt.yearless = back.Year() == 0
	}
	if year != 0 && !lt.yearless {
		return nil, hasYear()
	}
	return lt, nil
}

// errNoTime is a line in which --timestamp-regex finds no time.
var errNoTime = errors.New("no time found in the line")

// errBadTime is a time text --timestamp-format does not parse, or one at or
// before the Unix epoch.
var errBadTime = errors.New("time text does not parse")

// errAheadTime is a time more than the topic's bound (lineTime.maxAhead)
// ahead of the clock, which the topic would refuse with the whole batch.
var errAheadTime = errors.New("time too far ahead of the clock")

// timeError is an error of stamp: its message says what was wrong with
// which text, and it matches errNoTime or errBadTime (kind).
type timeError struct {
	msg  string
	kind error
}

func (e *timeError) Error() string { return e.msg }

// Unwrap returns errNoTime or errBadTime.
func (e *timeError) Unwrap() error { return e.kind }

// timeErrorf returns a *timeError of kind with a formatted message.
func timeErrorf(kind error, format string, args ...any) error {
	return &timeError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// maxQuoted is how much of a line an error quotes.
const maxQuoted = 120

// stamp returns the time of line (without its line ending), in milliseconds
// since the Unix epoch. A line the expression does not match is errNoTime,
// a time text that does not parse, or parses to the epoch or before it (0
// is "now" to the log), errBadTime; a time more than maxAhead ahead of the
// clock, errAheadTime; each error quotes the text.
func (lt *lineTime) stamp(line []byte) (int64, error) {
	m := lt.re.FindSubmatchIndex(line)
	if m == nil || m[2] < 0 {
		return 0, timeErrorf(errNoTime, "--timestamp-regex %q does not match the line %q", lt.re.String(), quoted(line))
	}
	text := string(line[m[2]:m[3]])
	var t time.Time
	if lt.layout == "" {
		ns, err := parseUnix(text, lt.digits)
		if err != nil {
			return 0, timeErrorf(errBadTime, "time text %q is not a --timestamp-format %s number: %v", text, lt.format, err)
		}
		t = time.Unix(0, ns)
	} else {
		var err error
		if t, err = time.ParseInLocation(lt.layout, text, lt.loc); err != nil {
			return 0, timeErrorf(errBadTime, "time text %q does not parse as --timestamp-format %s: %v", text, lt.format, err)
		}
		if lt.yearless {
			t = lt.withYear(t)
		}
	}
	ms := t.UnixMilli()
	if ms <= 0 {
		return 0, timeErrorf(errBadTime, "time text %q is %s, at or before the Unix epoch, which a record's timestamp cannot be", text, t.UTC().Format(time.RFC3339Nano))
	}
	if pastBound(ms, lt.maxAhead, &lt.clock, lt.now) {
		return 0, timeErrorf(errAheadTime, "time text %q in the line %q is %s, %s ahead of the clock (%s), more than the %v a topic of create time takes; check --timestamp-location and --timestamp-year",
			text, quoted(line), t.UTC().Format(time.RFC3339Nano), aheadText(ms-lt.clock), time.UnixMilli(lt.clock).UTC().Format(time.RFC3339), lt.maxAhead)
	}
	return ms, nil
}

// pastBound reports whether ms (milliseconds since the Unix epoch) is more
// than bound ahead of the clock now, the log's rule for a topic of create
// time (log.DefaultMaxTimestampAhead); bound <= 0 is no bound. *clock
// keeps the last reading of now in milliseconds (0: none yet), read again
// only for a time past the bound of the last reading, so a run of lines
// reads the clock about once: a stale reading only makes the first look
// stricter, and the clock is read again before a time is reported past it.
func pastBound(ms int64, bound time.Duration, clock *int64, now func() time.Time) bool {
	b := bound.Milliseconds()
	if b <= 0 || *clock != 0 && (ms <= *clock || ms-*clock <= b) {
		return false
	}
	*clock = now().UnixMilli()
	return ms > *clock && ms-*clock > b // ms > *clock first: no overflow
}

// quoted is line cut to maxQuoted bytes, for an error.
func quoted(line []byte) []byte {
	if len(line) > maxQuoted {
		return line[:maxQuoted]
	}
	return line
}

// aheadText writes a positive span of ms milliseconds to the second, as a
// time.Duration does ("3h0m5s"), or in days past 48 hours (a span of
// centuries does not fit a Duration).
func aheadText(ms int64) string {
	if ms <= 48*time.Hour.Milliseconds() {
		return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
	}
	return fmt.Sprintf("%d days", ms/(24*time.Hour).Milliseconds())
}

// withYear gives t, parsed by a layout without a year, its year:
// --timestamp-year, else the current year in the location, or the year
// before when that puts t more than yearSlack after now.
func (lt *lineTime) withYear(t time.Time) time.Time {
	y := lt.year
	if y == 0 {
		now := lt.now().In(lt.loc)
		y = now.Year()
		if at := yearOf(t, y); at.Sub(now) > yearSlack {
			y--
		}
	}
	return yearOf(t, y)
}

// yearOf is t in year y (February 29 of a year without one is March 1).
func yearOf(t time.Time, y int) time.Time {
	return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
}

// parseUnix parses a count since the Unix epoch in units of 10^-digits
// seconds into nanoseconds: an integer, or for seconds (digits 0) a decimal
// with up to 9 fraction digits.
func parseUnix(s string, digits int) (int64, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	if dotted && digits != 0 {
		return 0, errors.New("want an integer")
	}
	if dotted && (frac == "" || len(frac) > 9) {
		return 0, errors.New("want an integer, or 1 to 9 decimals after the '.'")
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	scale := int64(1)
	for range 9 - digits {
		scale *= 10
	}
	if n > (1<<63-1)/scale || n < -(1<<63-1)/scale {
		return 0, fmt.Errorf("%s is out of range", s)
	}
	ns := n * scale
	if dotted {
		f, err := strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return 0, err
		}
		ns += int64(f)
	}
	return ns, nil
}
