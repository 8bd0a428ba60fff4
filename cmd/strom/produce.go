package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/samber/lo"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/strom-dev/strom/internal/txnfile"
	"github.com/strom-dev/strom/log"
)

// Batching of produce: records are gathered from stdin and appended with one
// Partition.Append per partition per batch, which the log writes with one
// write. A batch ends at batchRecords records or batchBytes of values, at the
// end of input, and, when stdin is not a regular file (a pipe, a terminal),
// whenever no more input is waiting, so a line typed or piped in slowly is
// appended at once instead of waiting for a full batch.
const (
	batchRecords  = 8192
	batchBytes    = 4 << 20
	stdinBufBytes = 1 << 20
	// batchesInFlight batches take turns: while the appender waits for a
	// segment roll's sync (tens of ms for 64 MiB), the reader fills the
	// others.
	batchesInFlight = 4
)

// produceMode is produce's write path, ModeFile rather than the log's
// default ModeMmap: for one bulk write from the command line, pwrite of whole
// batches beats copying into a fresh mapping page fault by page fault.
// 200 MB of Loghub lines (1.78 million records, 64 MiB segments) took 0.92 s
// with file and 2.90 s with mmap (wall, sync at the end included;
// 2026-11-30, 2-core machine). The format is the same either way: a writer of
// either mode reopens the segments of the other.
const produceMode = "file"

// minSegmentBytes is the smallest segment size log.Open takes (its largest
// is math.MaxInt32, the largest frame): checked here first, so a bad
// --segment-bytes is a usage error found before anything is opened.
const minSegmentBytes = 64

type produceFlags struct {
	format       string
	keyRegex     string
	key          string
	partition    int32
	printOffsets bool
	segmentBytes int64
	mode         string
	keepCR       bool
	tsRegex      string
	tsFormat     string
	tsLocation   string
	tsYear       int
	tsOnError    string
}

func newProduceCmd(a *app) *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Append records read from stdin, one per line",
		Long: `Append records read from stdin to TOPIC, which must exist.

produce refuses a topic that an exactly-once pipeline writes (its folder
holds the sink's transaction file, exactly-once.txn), appending nothing:
records appended by anything but the pipeline's sink.LogSink lie past the
committed ends and are truncated away at the sink's next start.

Raw input (the default): every line is one record's value, without its
line ending: the '\n' and one '\r' right before it (a CRLF line ending, as
bufio.ScanLines and source.Lines strip it; a last line without '\n' loses
one trailing '\r' too). Any other byte is kept as it is, a '\r' elsewhere
in the line, NUL bytes and bytes that are not UTF-8 too; a line beginning
with '-' is data like any other. An empty line is a record with an empty
value; a last line without '\n' is a record too. --keep-cr keeps the '\r'
of a CRLF ending in the value, so that raw consume gives back the input
byte for byte; --key-regex matches the line without its ending either way,
so a '$'-anchored expression picks the same key with and without it.

--format json: every line is one JSON object as "strom consume --format json"
prints it: {"key":..., "value":..., "headers":[{"key":..., "value":...}],
"timestamp": MILLISECONDS}; a key or value that is not UTF-8 is given in
base64 with "keyEncoding":"base64" / "valueEncoding":"base64"; null is a nil
key or value; topic, partition and offset are accepted and ignored. Any
other field is an error (a misspelt field must not be lost silently): drop
extra fields first, e.g. jq -c 'del(.extra)'. Blank lines are skipped. A
timestamp more than an hour ahead of the clock, which a topic of create time
refuses, stops produce at its line, the lines before it appended.

The partition of a record is --partition when given, else picked from its key
as Kafka does (murmur2, modulo the partition count), and round-robin for
records without a key. Records are appended in batches (one write per
partition per batch) and are on disk (synced) when produce exits 0. A
progress counter is drawn on stderr when stdin and stdout are both
terminals. With --key-regex, produce ends by printing on stderr how many
lines it keyed and how many got no key, and warns, naming the expression,
when it matched no line at all.

--timestamp-regex RE sets each raw record's timestamp from its line instead
of the time of ingestion, so that consume --from TIME and event-time windows
use the log's own time: RE's first capture group is the time text, parsed by
--timestamp-format, a Go time layout (2006-01-02 15:04:05.000, written with
Go's reference time) or a name: rfc3339 (the default), syslog ("Dec 10
06:55:46", Go's Stamp), datetime ("2026-11-30 12:00:00"), dateonly, stamp,
stampmilli, stampmicro, stampnano, ansic, unixdate, rubydate, rfc822,
rfc822z, rfc850, rfc1123, rfc1123z (Go's layout constants), or unix (seconds
since the epoch, decimals allowed), unixms, unixus, unixns. A time without a
zone is in --timestamp-location (default UTC; Local or an IANA name such as
Europe/Berlin). A layout without a year (syslog) takes --timestamp-year (an
error with a layout that has one, and with unix formats), or by default the
current year in that location, or the year before when that would put the
time more than a day after now (a log of late December read in January). A
line whose time RE does not find or the format does not parse (or that
parses to the Unix epoch or before, or, on a topic of create time, the
default, to more than an hour ahead of the clock, which the topic would
refuse) stops produce with an error naming its line number and text
(--timestamp-on-error fail, the default; the lines before it are appended),
is left out (skip), or keeps the time of ingestion (ingest); produce ends by
counting on stderr the lines stamped, skipped and kept at the time of
ingestion. A topic of log append time stores the time of the append whatever
the line says, and produce warns so; a topic with --retention deletes a
segment whose newest time is older than the retention at the next retention
run, old log lines included.

On SIGINT (Ctrl-C) or SIGTERM it stops reading stdin, appends the lines it
has read, syncs, prints their offsets (--print-offsets) and exits 0, as
"consume --follow" does; input not read yet is left unread.`,
		Example: `  strom produce events < access.log
  strom produce events --key-regex '^(\S+)' --print-offsets < access.log
  printf -- '-key=x\n--\n' | strom produce events --partition 0
  strom produce ssh --timestamp-regex '^(\w+ +\d+ [0-9:]+)' --timestamp-format syslog --timestamp-year 2015 < OpenSSH_2k.log
  strom consume events --format json | strom produce events-copy --format json`,
		Args: exactArgs(1, "TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFlagNonNegative(cmd, "partition", int64(f.partition)); err != nil {
				return err
			}
			return a.produce(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "raw", "input format: raw (one value per line) or json (one record per line)")
	fl.StringVar(&f.keyRegex, "key-regex", "", "key each raw line by this regular expression's first group (or whole match); no match: no key")
	fl.StringVar(&f.key, "key", "", "key every raw line with this string")
	fl.BoolVar(&f.keepCR, "keep-cr", false, "keep the '\\r' of a CRLF line ending in the raw value (default: stripped, as source.Lines does)")
	fl.StringVar(&f.tsRegex, "timestamp-regex", "", "take each raw record's timestamp from the time text this regular expression's first group finds in its line")
	fl.StringVar(&f.tsFormat, "timestamp-format", "rfc3339", "how --timestamp-regex's time text is written: a Go time layout, or rfc3339, syslog, datetime, unix, unixms, ... (see above)")
	fl.StringVar(&f.tsLocation, "timestamp-location", "UTC", "time zone of a --timestamp-regex time without one: UTC, Local or an IANA name")
	fl.IntVar(&f.tsYear, "timestamp-year", 0, "year of a --timestamp-format without one (syslog); 0: the current year, or the year before for a time over a day ahead; an error with a format that has a year")
	fl.StringVar(&f.tsOnError, "timestamp-on-error", "fail", "a line whose time is not found, does not parse or is over an hour ahead: fail, skip (no record) or ingest (the time of ingestion)")
	fl.Int32Var(&f.partition, "partition", -1, "append every record to this partition (-1: picked by key)")
	fl.BoolVar(&f.printOffsets, "print-offsets", false, "print TOPIC/PARTITION@OFFSET for each record appended, in input order")
	fl.Int64Var(&f.segmentBytes, "segment-bytes", log.DefaultSegmentBytes, "roll to a new segment at this size in bytes")
	fl.StringVar(&f.mode, "mode", produceMode, "write path of the segments it writes: file or mmap")
	return cmd
}

// producer turns input lines into records and appends them in batches:
// one goroutine reads and parses stdin into a batch while another appends
// the batch before it, batchesInFlight batches taking turns.
type producer struct {
	topic *log.Topic
	n     int32 // the topic's partition count
	// Set by the flags:
	format string
	keyRe  *regexp.Regexp
	key    []byte // constant key (--key), nil for none
	fixed  int32  // --partition, -1 for picked by key
	out    *bufio.Writer
	print  bool
	keepCR bool      // --keep-cr: a raw value keeps the '\r' of its CRLF ending
	ts     *lineTime // --timestamp-regex; nil: the time of ingestion

	// The reading goroutine's, atomic for the summary after a stop by
	// signal (which does not wait for it): lines --timestamp-on-error skip
	// left out and ingest kept at the time of ingestion, and the first of
	// them with its line number.
	tsSkipped, tsIngested atomic.Int64
	tsFirst               atomic.Pointer[string]

	// The reading goroutine's:
	rr   int32 // next round-robin partition for records without a key
	line int64 // number of the last line read, 1-based
	// maxAhead is how far ahead of the clock a JSON record's timestamp may
	// be (log.DefaultMaxTimestampAhead on a topic of create time; 0: no
	// bound), checked line by line so that the lines before one past it are
	// appended; clock is pastBound's last reading.
	maxAhead time.Duration
	clock    int64

	// Between the two, for a stop by signal:
	stopping atomic.Bool // a signal came: read no more lines
	inRead   atomic.Bool // the reader waits for stdin with no line held back

	// The appending goroutine's:
	appended int64 // records appended
	keyed    int64 // with --key-regex: records appended with a key
}

// batch is a run of records read from stdin, their bytes in one arena.
type batch struct {
	arena       []byte
	recs        []log.Record
	parts       []int32 // the partition of each record
	first, last int64   // line numbers of its first and last record
}

func (b *batch) reset() {
	clear(b.recs) // let go of values that did not fit the arena
	b.recs, b.parts, b.arena = b.recs[:0], b.parts[:0], b.arena[:0]
}

func (a *app) produce(cmd *cobra.Command, topic string, f produceFlags) error {
	if f.format != "raw" && f.format != "json" {
		return usageErrorf("--format %q: want raw or json", f.format)
	}
	mode, err := log.ParseMode(f.mode)
	if err != nil {
		return usageErrorf("--mode: %w", err)
	}
	if f.segmentBytes < minSegmentBytes || f.segmentBytes > math.MaxInt32 {
		return usageErrorf("--segment-bytes %d: want %d to %d", f.segmentBytes, minSegmentBytes, math.MaxInt32)
	}
	p := &producer{format: f.format, fixed: f.partition, out: a.stdout, print: f.printOffsets, keepCR: f.keepCR}
	if f.keepCR && f.format != "raw" {
		return usageErrorf("--keep-cr applies to raw input only; a JSON value carries its bytes")
	}
	if f.keyRegex != "" {
		if f.format != "raw" || cmd.Flags().Changed("key") {
			return usageErrorf("--key-regex applies to raw input only, and not with --key")
		}
		if p.keyRe, err = regexp.Compile(f.keyRegex); err != nil {
			return usageErrorf("--key-regex: %w", err)
		}
	}
	if f.tsRegex != "" {
		if f.format != "raw" {
			return usageErrorf("--timestamp-regex applies to raw input only; a JSON record carries its timestamp")
		}
		if p.ts, err = newLineTime(f.tsRegex, f.tsFormat, f.tsLocation, f.tsYear, f.tsOnError, time.Now); err != nil {
			return err
		}
	} else {
		for _, name := range []string{"timestamp-format", "timestamp-location", "timestamp-year", "timestamp-on-error"} {
			if cmd.Flags().Changed(name) {
				return usageErrorf("--%s needs --timestamp-regex", name)
			}
		}
	}
	if cmd.Flags().Changed("key") {
		if f.format != "raw" {
			return usageErrorf("--key applies to raw input only; JSON records carry their key")
		}
		p.key = []byte(f.key)
	}
	dir, err := a.logDir()
	if err != nil {
		return err
	}
	lg, err := log.Open(dir, log.WithSegmentBytes(f.segmentBytes), log.WithMode(mode), log.WithRetentionCheckInterval(0))
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	if p.fixed >= int32(t.Partitions()) {
		return usageErrorf("--partition %d: topic %s has partitions 0 to %d", p.fixed, topic, t.Partitions()-1)
	}
	if err := t.LockWriter(); err != nil {
		return err
	}
	// Checked with the writer lock held: no sink can write the topic, nor
	// create its transaction file, until produce is done.
	if err := refuseExactlyOnceTopic(t); err != nil {
		return err
	}
	p.topic, p.n = t, int32(t.Partitions())
	switch {
	case t.TimestampType() == log.CreateTime:
		// The bound the topic checks each append against (produce opens the
		// log with the default): a line's time past it is a line's error,
		// not the whole batch's.
		p.maxAhead = log.DefaultMaxTimestampAhead
		if p.ts != nil {
			p.ts.maxAhead = log.DefaultMaxTimestampAhead
		}
	case p.ts != nil:
		// The topic replaces every timestamp with the time of the append:
		// the times read from the lines would be lost without a word.
		fmt.Fprintf(a.stderr, "strom: warning: topic %s has timestamp type %s (topics create --timestamp-type): it stores the time of each append, not the times --timestamp-regex reads from the lines\n", topic, t.TimestampType())
	}

	var progress func(int)
	finishBar := func() {}
	if term.IsTerminal(int(a.stdin.Fd())) && term.IsTerminal(int(a.outFile.Fd())) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionSetDescription("producing to "+topic),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
		defer bar.Finish()
		finishBar = func() { _ = bar.Finish() }
		progress = func(n int) { _ = bar.Add(n) }
	}
	dryFlush := true
	if fi, err := a.stdin.Stat(); err == nil && fi.Mode().IsRegular() {
		dryFlush = false
	}
	stop, cancel := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := p.run(a.ctx, stop, a.stdin, dryFlush, progress); err != nil {
		return err
	}
	if err := t.Sync(); err != nil {
		return fmt.Errorf("syncing topic %s: %w", topic, err)
	}
	finishBar()
	p.keySummary(a.stderr)
	p.timeSummary(a.stderr)
	return nil
}

// refuseExactlyOnceTopic returns an error naming t and its transaction file
// when t is the output of an exactly-once pipeline (a sink.LogSink under
// stream.ExactlyOnce keeps the file txnfile.Name, sink.TransactionFile, in
// the topic's folder): records appended by anything but that sink lie past
// the committed ends the file gives, and the sink's next start truncates
// them away, so produce's exit 0 would be a silent loss. Any command that
// appends to a topic must call it before its first append. Another error
// than "no such file" reading the folder is returned too: produce cannot
// tell the topic is safe.
func refuseExactlyOnceTopic(t *log.Topic) error {
	path := filepath.Join(t.Dir(), txnfile.Name)
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("topic %s is written exactly once by a pipeline (its transaction file %s exists): "+
			"records appended by anything but its sink.LogSink lie past the committed ends and are truncated away at the sink's next start, "+
			"so produce appends nothing to it; produce to the pipeline's input topic instead", t.Name(), path)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return fmt.Errorf("topic %s: looking for an exactly-once transaction file: %w", t.Name(), err)
}

// timeSummary writes to w, after a run with --timestamp-regex, how many
// lines got the time of their line, and how many were skipped or kept the
// time of ingestion, with the first of those and why.
func (p *producer) timeSummary(w io.Writer) {
	if p.ts == nil {
		return
	}
	skipped, ingested := p.tsSkipped.Load(), p.tsIngested.Load()
	fmt.Fprintf(w, "strom: produce: %d lines: %d with the time of their line", p.appended+skipped, p.appended-ingested)
	switch {
	case skipped > 0:
		fmt.Fprintf(w, ", %d skipped (--timestamp-on-error skip)", skipped)
	case ingested > 0:
		fmt.Fprintf(w, ", %d at the time of ingestion (--timestamp-on-error ingest)", ingested)
	}
	fmt.Fprintln(w)
	if first := p.tsFirst.Load(); first != nil {
		done := "left out"
		if ingested > 0 {
			done = "kept at the time of ingestion"
		}
		fmt.Fprintf(w, "strom: warning: %d line(s) had no time that --timestamp-regex and --timestamp-format could read, or a time too far ahead; %s (first: %s)\n", skipped+ingested, done, *first)
	}
}

// run reads in to its end, appending a batch whenever one is full, at the
// end, and, with dryFlush, whenever the reader has no more input waiting.
// On an input error (a JSON line that does not parse) the lines before it
// are appended and the error returned. When stop is done (a signal) it
// appends the lines read so far and returns nil, leaving the reader blocked
// in a read of in if it is (a pipe or terminal cannot be interrupted).
func (p *producer) run(ctx, stop context.Context, in io.Reader, dryFlush bool, progress func(int)) error {
	free := make(chan *batch, batchesInFlight)
	for range batchesInFlight {
		free <- &batch{arena: make([]byte, 0, batchBytes)}
	}
	full := make(chan *batch, batchesInFlight)
	done := make(chan struct{})
	defer close(done)
	readErr := make(chan error, 1)
	go func() {
		readErr <- p.read(in, dryFlush, free, full, done)
		close(full)
	}()
	stopped := stop.Done()
	var poll <-chan time.Time
	for {
		var b *batch
		select {
		case b = <-full:
		case <-stopped:
			p.stopping.Store(true)
			stopped = nil
			ticker := time.NewTicker(2 * time.Millisecond)
			defer ticker.Stop()
			poll = ticker.C
			continue
		case <-poll:
			// The reader waits for input after handing over every line it
			// read (see stdinReader), and they have all been appended.
			if p.inRead.Load() && len(full) == 0 {
				return nil
			}
			continue
		}
		if b == nil {
			return <-readErr // full closed: the reader is done
		}
		if err := p.append(ctx, b); err != nil {
			return err
		}
		if progress != nil {
			progress(len(b.recs))
		}
		b.reset()
		free <- b
	}
}

// stdinReader is what the reader's bufio.Reader reads stdin through. Before
// a read that may block (nothing waiting on a pipe or terminal), it hands
// over the lines held back in the batch being filled (flush), so a line is
// appended at once and a stop by signal finds every line read handed over;
// while blocked it says so in inRead.
type stdinReader struct {
	in     io.Reader
	flush  func() // nil: stdin is a regular file, a read never waits
	inRead *atomic.Bool
}

func (r *stdinReader) Read(b []byte) (int, error) {
	if r.flush != nil {
		if f, ok := r.in.(*os.File); !ok || !readable(f) {
			r.flush()
		}
		r.inRead.Store(true)
		defer r.inRead.Store(false)
	}
	return r.in.Read(b)
}

// readable reports whether a read of f returns at once (data or its end
// waiting).
func readable(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// read fills batches taken from free with the lines of in and hands them to
// full, until the end of in or done.
func (p *producer) read(in io.Reader, dryFlush bool, free <-chan *batch, full chan<- *batch, done <-chan struct{}) error {
	var b *batch
	send := func() bool {
		if b == nil || len(b.recs) == 0 {
			return true
		}
		select {
		case full <- b:
			b = nil
			return true
		case <-done:
			return false
		}
	}
	sr := &stdinReader{in: in, inRead: &p.inRead}
	if dryFlush {
		sr.flush = func() { send() }
	}
	br := bufio.NewReaderSize(sr, stdinBufBytes)
	var long []byte // a line longer than br's buffer, gathered piecewise
	for {
		if p.stopping.Load() {
			send()
			return nil
		}
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			send()
			return fmt.Errorf("reading stdin after line %d: %w", p.line, err)
		}
		line := chunk
		if long != nil {
			line, long = append(long, chunk...), nil
		}
		if len(line) > 0 {
			if b != nil && len(line) > cap(b.arena)-len(b.arena) && len(line) <= cap(b.arena) {
				// Full: the line starts the next batch's arena.
				if !send() {
					return nil
				}
			}
			if b == nil {
				select {
				case b = <-free:
				case <-done:
					return nil
				}
			}
			p.line++
			if aerr := p.add(b, bytes.TrimSuffix(line, []byte{'\n'})); aerr != nil {
				send()
				return aerr
			}
		}
		atEOF := errors.Is(err, io.EOF)
		if b != nil && (atEOF || len(b.recs) >= batchRecords || (dryFlush && br.Buffered() == 0)) {
			if !send() {
				return nil
			}
		}
		if atEOF {
			return nil
		}
	}
}

// add turns one line (without its '\n') into a record of b, copying its
// bytes into b's arena, or, for a line larger than what the arena has left,
// into a buffer of its own. A raw line's value is its text, without the '\r'
// of a CRLF ending unless --keep-cr; its key and time are taken from the
// text. A line --timestamp-on-error skip leaves out adds nothing.
func (p *producer) add(b *batch, line []byte) error {
	var rec log.Record
	if p.format == "json" {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		var err error
		if rec, err = parseJSONRecord(line); err != nil {
			if p.line == 1 {
				return fmt.Errorf("stdin line 1: %w (nothing was appended)", err)
			}
			return fmt.Errorf("stdin line %d: %w (the lines before it were appended)", p.line, err)
		}
		if pastBound(rec.Timestamp, p.maxAhead, &p.clock, time.Now) {
			before := "the lines before it were appended"
			if p.line == 1 {
				before = "nothing was appended"
			}
			return fmt.Errorf("stdin line %d: timestamp %d (%s) is %s ahead of the clock (%s), more than the %v a topic of create time takes (%s)",
				p.line, rec.Timestamp, time.UnixMilli(rec.Timestamp).UTC().Format(time.RFC3339Nano), aheadText(rec.Timestamp-p.clock),
				time.UnixMilli(p.clock).UTC().Format(time.RFC3339), p.maxAhead, before)
		}
	} else {
		text := len(line)
		if text > 0 && line[text-1] == '\r' {
			text--
		}
		if p.ts != nil {
			var err error
			if rec.Timestamp, err = p.ts.stamp(line[:text]); err != nil {
				if err := p.timeless(err); err != nil {
					return err
				}
				if p.ts.onError == timestampSkip {
					return nil
				}
			}
		}
		if !p.keepCR {
			line = line[:text]
		}
		var v []byte
		if len(line) <= cap(b.arena)-len(b.arena) {
			start := len(b.arena)
			b.arena = append(b.arena, line...)
			v = b.arena[start:len(b.arena):len(b.arena)]
		} else {
			v = bytes.Clone(line)
		}
		rec.Value = v
		rec.Key = p.key
		if p.keyRe != nil {
			rec.Key = matchKey(p.keyRe, v[:text:text])
		}
	}
	if len(b.recs) == 0 {
		b.first = p.line
	}
	b.last = p.line
	b.recs = append(b.recs, rec)
	b.parts = append(b.parts, p.partitionOf(rec.Key))
	return nil
}

// timeless applies --timestamp-on-error to a line whose time stamp could not
// take: with fail it returns the error, naming the line; with skip and
// ingest it counts the line, keeps the first such error for the summary and
// returns nil.
func (p *producer) timeless(err error) error {
	switch p.ts.onError {
	case timestampFail:
		if p.line == 1 {
			return fmt.Errorf("stdin line 1: %w (nothing was appended; --timestamp-on-error skip or ingest goes on past such lines)", err)
		}
		return fmt.Errorf("stdin line %d: %w (the lines before it were appended; --timestamp-on-error skip or ingest goes on past such lines)", p.line, err)
	case timestampSkip:
		p.tsSkipped.Add(1)
	case timestampIngest:
		p.tsIngested.Add(1)
	}
	first := fmt.Sprintf("stdin line %d: %v", p.line, err)
	p.tsFirst.CompareAndSwap(nil, &first)
	return nil
}

// matchKey returns the key --key-regex picks from v: its first group when it
// has one (and it took part in the match), else the whole match; nil when
// the expression does not match.
func matchKey(re *regexp.Regexp, v []byte) []byte {
	m := re.FindSubmatchIndex(v)
	switch {
	case m == nil:
		return nil
	case len(m) >= 4 && m[2] >= 0:
		return v[m[2]:m[3]:m[3]]
	}
	return v[m[0]:m[1]:m[1]]
}

// partitionOf picks a record's partition as Topic.Append would: --partition,
// else Kafka's murmur2 of the key, else round-robin.
func (p *producer) partitionOf(key []byte) int32 {
	switch {
	case p.fixed >= 0:
		return p.fixed
	case key != nil:
		return log.KafkaPartition(key, p.n)
	}
	r := p.rr
	p.rr = (p.rr + 1) % p.n
	return r
}

// append appends b: one Partition.Append per partition, in increasing
// partition order, each partition's records in input order (what
// Topic.AppendBatch does, done here so every record's offset is known for
// --print-offsets).
func (p *producer) append(ctx context.Context, b *batch) error {
	byPart := lo.GroupBy(lo.Range(len(b.recs)), func(i int) int32 { return b.parts[i] })
	parts := lo.Keys(byPart)
	slices.Sort(parts)
	firsts := make(map[int32]int64, len(parts))
	for _, part := range parts {
		pt, err := p.topic.Partition(part)
		if err != nil {
			return err
		}
		recs := b.recs
		if len(parts) > 1 {
			recs = lo.Map(byPart[part], func(i int, _ int) log.Record { return b.recs[i] })
		}
		first, err := pt.Append(ctx, recs...)
		if err != nil {
			return fmt.Errorf("appending stdin lines %d to %d to partition %d (%d records before them appended): %w", b.first, b.last, part, p.appended, err)
		}
		firsts[part] = first
	}
	if p.print {
		next, buf := firsts, []byte(nil)
		for _, part := range b.parts {
			buf = append(buf[:0], p.topic.Name()...)
			buf = append(buf, '/')
			buf = strconv.AppendInt(buf, int64(part), 10)
			buf = append(buf, '@')
			buf = strconv.AppendInt(buf, next[part], 10)
			buf = append(buf, '\n')
			p.out.Write(buf)
			next[part]++
		}
	}
	p.appended += int64(len(b.recs))
	if p.keyRe != nil {
		for i := range b.recs {
			if b.recs[i].Key != nil {
				p.keyed++
			}
		}
	}
	return nil
}

// keySummary writes to w, after a run with --key-regex, how many of the
// records appended got a key from it and how many did not, and a warning
// naming the expression when it keyed none of them: a typo in it must not
// pass unseen while every record silently goes round-robin.
func (p *producer) keySummary(w io.Writer) {
	if p.keyRe == nil {
		return
	}
	where := "round-robin"
	if p.fixed >= 0 {
		where = fmt.Sprintf("to partition %d", p.fixed)
	}
	fmt.Fprintf(w, "strom: produce: %d lines: %d keyed by --key-regex, %d without a key (%s)\n", p.appended, p.keyed, p.appended-p.keyed, where)
	if p.keyed == 0 && p.appended > 0 {
		fmt.Fprintf(w, "strom: warning: --key-regex %q matched no line of %d: no record has a key, all went %s\n", p.keyRe.String(), p.appended, where)
	}
}
