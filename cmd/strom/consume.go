package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

type consumeFlags struct {
	from      string
	partition int32
	follow    bool
	max       int64
	format    string
}

func newConsumeCmd(a *app) *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print the records of a topic",
		Long: `Print the records of TOPIC, from every partition in turn or from --partition.

--from picks where each partition starts: earliest (the log start offset, the
default), latest (the high watermark: only records appended from now on), an
OFFSET (needs --partition when the topic has more than one), or a TIMESTAMP
in RFC 3339 (2026-11-30T12:00:00Z): from the first record whose timestamp is
at or after it, found by reading the partition from its start.

Without --follow it stops at each partition's high watermark as it was when
consume started; with --follow it waits for new records until interrupted
(Ctrl-C, SIGTERM: exit 0), reading all partitions at once when no
--partition is given. --max N stops after N records in all.

Raw output (the default) writes each value's bytes exactly as stored,
followed by '\n'; a value that holds '\n' is therefore ambiguous: use
--format json for such data. --format json prints one object per line:
  {"topic":"t","partition":0,"offset":7,"timestamp":MILLISECONDS,
   "key":"k","value":"v","headers":[{"key":"h","value":"x"}]}
lossless for any bytes: a key, value or header value that is not valid UTF-8
is base64 (RFC 4648, padded) with "keyEncoding"/"valueEncoding":"base64"
beside it; a nil key or value is null. "strom produce --format json" reads
it back.

The log is opened read-only and without its lock, so consume reads a topic
another process is writing. A damaged partition (a bad frame, or an end
below its recovery point: records known to be on disk are gone) fails it
with exit 3, naming the segment, byte position and offset, as verify does,
instead of printing fewer records.

Output is buffered: written in 256 KiB blocks, and with --follow after every
batch, so nothing waits in the buffer while consume waits for records.`,
		Example: `  strom consume events --from earliest > events.txt
  strom consume events --partition 2 --from 1500 --max 10
  strom consume events --from 2026-11-30T12:00:00Z --format json
  strom consume events --from latest --follow`,
		Args: exactArgs(1, "TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFlagNonNegative(cmd, "partition", int64(f.partition)); err != nil {
				return err
			}
			if err := checkFlagNonNegative(cmd, "max", f.max); err != nil {
				return err
			}
			return a.consume(args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "earliest", "where to start: earliest, latest, OFFSET or TIMESTAMP (RFC 3339)")
	fl.Int32Var(&f.partition, "partition", -1, "read only this partition (-1: all)")
	fl.BoolVar(&f.follow, "follow", false, "wait for new records at the end instead of stopping")
	fl.Int64Var(&f.max, "max", 0, "stop after this many records (0: no limit)")
	fl.StringVar(&f.format, "format", "raw", "output format: raw (each value and '\\n') or json (one record per line)")
	return cmd
}

// fromKind is what --from names.
type fromKind int

const (
	fromEarliest fromKind = iota
	fromLatest
	fromOffset
	fromTime
)

// fromSpec is a parsed --from.
type fromSpec struct {
	kind   fromKind
	offset int64 // fromOffset
	ms     int64 // fromTime: milliseconds since the Unix epoch
}

// parseFrom parses --from: earliest, latest, an offset >= 0 or an RFC 3339 time.
func parseFrom(s string) (fromSpec, error) {
	switch s {
	case "earliest":
		return fromSpec{kind: fromEarliest}, nil
	case "latest":
		return fromSpec{kind: fromLatest}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return fromSpec{}, usageErrorf("--from %d: an offset is never negative (want earliest, latest, an OFFSET >= 0 or an RFC 3339 TIMESTAMP)", n)
		}
		return fromSpec{kind: fromOffset, offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return fromSpec{kind: fromTime, ms: t.UnixMilli()}, nil
	}
	return fromSpec{}, usageErrorf("--from %q: want earliest, latest, an OFFSET >= 0 or an RFC 3339 TIMESTAMP such as 2026-11-30T12:00:00Z", s)
}

// consumer writes the records of one or more partitions to the app's stdout.
type consumer struct {
	a      *app
	from   fromSpec
	follow bool
	json   bool
	max    int64 // 0: no limit
	cancel context.CancelFunc

	mu  sync.Mutex // guards the writer, n and enc across partitions (--follow)
	n   int64      // records written
	enc *json.Encoder
}

func (a *app) consume(topic string, f consumeFlags) error {
	from, err := parseFrom(f.from)
	if err != nil {
		return err
	}
	if f.format != "raw" && f.format != "json" {
		return usageErrorf("--format %q: want raw or json", f.format)
	}
	lg, err := a.openRead()
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, t.Partitions())
	if f.partition >= 0 {
		if int(f.partition) >= t.Partitions() {
			return usageErrorf("--partition %d: topic %s has partitions 0 to %d", f.partition, topic, t.Partitions()-1)
		}
		parts = append(parts, f.partition)
	} else {
		if from.kind == fromOffset && t.Partitions() > 1 {
			return usageErrorf("--from %d: an offset names a record of one partition; give --partition (topic %s has %d)", from.offset, topic, t.Partitions())
		}
		for i := range t.Partitions() {
			parts = append(parts, int32(i))
		}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	if f.follow {
		ctx, cancel = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer cancel()
	}
	c := &consumer{a: a, from: from, follow: f.follow, json: f.format == "json", max: f.max, cancel: cancel}
	if c.json {
		c.enc = json.NewEncoder(a.stdout)
		c.enc.SetEscapeHTML(false)
	}
	if !f.follow || len(parts) == 1 {
		// One partition after the other: each replay ends.
		for _, pn := range parts {
			if err := c.partition(ctx, t, pn); err != nil {
				return err
			}
			if c.done() {
				break
			}
		}
		return nil
	}
	// --follow of several partitions: all at once, each batch written whole.
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, pn := range parts {
		wg.Go(func() {
			if err := c.partition(ctx, t, pn); err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// done reports whether --max records were written.
func (c *consumer) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max > 0 && c.n >= c.max
}

// partition writes the records of partition pn from --from on. It returns
// nil at the end of a replay, when ctx ends (interrupt, --max reached by
// another partition) and when --max is reached.
func (c *consumer) partition(ctx context.Context, t *log.Topic, pn int32) error {
	p, err := t.Partition(pn)
	if err != nil {
		return err
	}
	var start int64
	switch c.from.kind {
	case fromEarliest, fromTime:
		start = p.StartOffset()
	case fromLatest:
		start = p.HighWatermark()
	case fromOffset:
		start = c.from.offset
	}
	r := p.Replay(start)
	if c.follow {
		r = p.Follow(start)
	}
	// The batch is written before the next read, so the Reader's own buffer
	// can be reused: no allocation per batch.
	r.SetReuseBytes(true)
	skipping := c.from.kind == fromTime
	var recs []log.Record
	for {
		recs, err = r.NextInto(ctx, recs[:0], 1<<20)
		switch {
		case errors.Is(err, io.EOF), ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("reading %s partition %d at offset %d: %w", t.Name(), pn, r.Position(), err)
		}
		batch := recs
		if skipping {
			i := 0
			for i < len(batch) && batch[i].Timestamp < c.from.ms {
				i++
			}
			batch = batch[i:]
			skipping = len(batch) == 0
		}
		stop, err := c.write(batch)
		if err != nil || stop {
			return err
		}
	}
}

// write writes a batch (up to --max) and, with --follow, flushes it: the
// reader may wait next. It reports whether --max is reached.
func (c *consumer) write(batch []log.Record) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.n >= c.max {
		return true, nil
	}
	if c.max > 0 && int64(len(batch)) > c.max-c.n {
		batch = batch[:c.max-c.n]
	}
	w := c.a.stdout
	for i := range batch {
		if c.json {
			if err := c.enc.Encode(toJSONRecord(&batch[i])); err != nil {
				return true, fmt.Errorf("writing stdout: %w", err)
			}
			continue
		}
		w.Write(batch[i].Value)
		if err := w.WriteByte('\n'); err != nil {
			return true, fmt.Errorf("writing stdout: %w", err)
		}
	}
	c.n += int64(len(batch))
	if c.follow {
		if err := w.Flush(); err != nil {
			return true, fmt.Errorf("writing stdout: %w", err)
		}
	}
	if c.max > 0 && c.n >= c.max {
		c.cancel()
		return true, nil
	}
	return false, nil
}
