package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// Names inside --dir.
const (
	topicName      = "ssh"           // the topic the lines are published into
	checkpointsDir = "checkpoints"   // the checkpoint.FileStore: positions and the window's state
	windowsFile    = "windows.jsonl" // every window result, one JSON line each
	windowStage    = "failed-per-ip" // the window stage's name: its state file is checkpoints/failed-per-ip.state
)

// window is the one window definition: a restart under another one would
// fail with stream.ErrStateMismatch.
var window = stream.Tumbling(time.Minute)

// result is a window's result as sshwatch writes it: a line of
// windows.jsonl, and with --json a line of the alerts on stdout.
type result struct {
	WindowStart string `json:"window_start"` // RFC 3339, UTC
	WindowEnd   string `json:"window_end"`   // RFC 3339, UTC; the window is [start, end)
	Key         string `json:"key"`          // the source IP
	Count       int64  `json:"count"`        // failed password attempts in the window
}

func newResult(r stream.WindowResult[string, int64]) result {
	return result{WindowStart: r.Start.Format(time.RFC3339), WindowEnd: r.End.Format(time.RFC3339), Key: r.Key, Count: r.Value}
}

// summary is what one call of watch did.
type summary struct {
	Published published
	Lines     atomic.Int64 // lines read by the pipeline (replays after a kill included)
	Attempts  atomic.Int64 // failed password attempts among them
	Windows   atomic.Int64 // window results written to windows.jsonl
	Alerts    atomic.Int64 // of which at or above the threshold
	Late      atomic.Int64 // attempts that came after their window closed (warned on stderr)
	Skipped   atomic.Int64 // lines that looked like attempts but did not parse (warned on stderr)
}

// watch publishes cfg.input into the log in cfg.dir (resuming after a
// kill), then runs the window pipeline over it to its end, printing the
// alerts to stdout and warnings to stderr. cfg.dir must be set (run makes
// a temporary one).
func watch(ctx context.Context, cfg config, stdout, stderr io.Writer) (*summary, error) {
	data, err := os.ReadFile(cfg.input)
	if err != nil {
		return nil, err
	}
	meta, err := prepareDir(cfg, data)
	if err != nil {
		return nil, err
	}
	lines := splitLines(data)

	lg, err := log.Open(cfg.dir)
	if err != nil {
		return nil, err
	}
	defer lg.Close()
	topic, err := lg.CreateTopic(topicName, meta.Partitions)
	if err != nil {
		return nil, err
	}
	sum := &summary{}
	if sum.Published, err = publish(ctx, topic, lines, cfg.pace); err != nil {
		return sum, err
	}
	store, err := checkpoint.NewFileStore(filepath.Join(cfg.dir, checkpointsDir))
	if err != nil {
		return sum, err
	}
	var handled int64 // lines below the saved positions
	for p := range meta.Partitions {
		pos, found, err := store.Load(ctx, topicName, int32(p))
		if err != nil {
			return sum, err
		}
		if found {
			handled += pos.Offset
		}
	}
	if sum.Published.Already > 0 || handled > 0 {
		fmt.Fprintf(stderr, "sshwatch: resuming in %s: %d of %d lines were published before, %d now; the windows go on from their checkpoint after %d lines\n",
			cfg.dir, sum.Published.Already, len(lines), sum.Published.New, handled)
	}
	wf, err := openWindows(filepath.Join(cfg.dir, windowsFile))
	if err != nil {
		return sum, err
	}
	defer wf.Close()

	opts := []source.TopicOption{source.Replay()}
	if cfg.pace > 0 {
		opts = append(opts, source.MaxBytes(1)) // one line at a time, so a test can kill it between any two
	}
	// source.Topic hands out a batch of one partition at a time; the
	// window's watermark waits until every partition with lines has been
	// read from (stream.PartitionLister), so the first batch of one does
	// not make the lines of the others late.
	in := stream.From(source.Topic(lg, topicName, source.FromStore(store), opts...))
	where := func(f stream.Failure) string {
		return fmt.Sprintf("line %d (%s/%d offset %d)", lineIndex(f.Offset, f.Partition, meta.Partitions)+1, f.Topic, f.Partition, f.Offset)
	}
	byIP := func(as *stream.Stream[attempt]) *stream.Keyed[string, attempt] { return stream.KeyBy(as, attemptIP) }
	err = pipeline(in, byIP, meta.Year, cfg, sum, where, wf, stdout, stderr).Checkpointing(store).Run(ctx)
	if err != nil {
		return sum, err
	}
	return sum, ctx.Err() // a signal stopped it before the end: not done
}

// attemptIP is the window's key: the attempt's source IP.
func attemptIP(a attempt) string { return a.IP }

// pipeline builds the window pipeline over lines, whichever source they
// come from (the log in --dir, or a Kafka topic: kafka.go):
//
//	the lines
//	  -> failed password attempts (other lines dropped)
//	  -> per source IP (byIP), one-minute tumbling windows of event time, summed
//	  -> every result to windows
//	  -> results of threshold or more to stdout
//
// The caller checkpoints it to a store that also keeps the window's state.
// where names a line that failed to parse, for the warning.
func pipeline(lines *stream.Stream[log.Record], byIP func(*stream.Stream[attempt]) *stream.Keyed[string, attempt], year int,
	cfg config, sum *summary, where func(stream.Failure) string, windows, stdout, stderr io.Writer) *stream.Stream[stream.WindowResult[string, int64]] {
	pc := newPacer(cfg.pace)
	recs := lines.Tap(func(ctx context.Context, _ log.Record) error {
		sum.Lines.Add(1)
		return pc.wait(ctx)
	})

	attempts := stream.FlatMap(recs, func(_ context.Context, r log.Record) ([]attempt, error) {
		a, ok, err := parseAttempt(string(r.Value), year)
		if err != nil || !ok {
			return nil, err
		}
		sum.Attempts.Add(a.Count)
		return []attempt{a}, nil
	}, stream.Name("parse"), stream.Skip(), stream.OnError(func(f stream.Failure) {
		sum.Skipped.Add(1)
		fmt.Fprintf(stderr, "sshwatch: skipped %s: %v\n", where(f), f.Err)
	}))

	late := sink.Func(func(_ context.Context, as []attempt) error {
		for _, a := range as {
			sum.Late.Add(a.Count)
			fmt.Fprintf(stderr, "sshwatch: late line (its window closed %s before the newest line; not counted): %s\n",
				cfg.outOfOrder, a.Line)
		}
		return nil
	})
	results := stream.Window(byIP(attempts),
		window, stream.Sum(func(a attempt) int64 { return a.Count }),
		stream.EventTime(func(a attempt) time.Time { return a.Time }),
		stream.OutOfOrderness(cfg.outOfOrder),
		stream.LateTo[attempt](late),
		stream.Name(windowStage))

	threshold := cfg.threshold
	return results.
		To(sink.Func(func(_ context.Context, rs []stream.WindowResult[string, int64]) error {
			var buf bytes.Buffer
			for _, r := range rs {
				b, err := json.Marshal(newResult(r))
				if err != nil {
					return err
				}
				buf.Write(b)
				buf.WriteByte('\n')
			}
			// One write per batch: a kill leaves whole lines (or, inside the
			// write, a torn last one, which openWindows ends).
			if _, err := windows.Write(buf.Bytes()); err != nil {
				return fmt.Errorf("write %s: %w", windowsFile, err)
			}
			sum.Windows.Add(int64(len(rs)))
			return nil
		}), stream.Name("windows")).
		Filter(func(_ context.Context, r stream.WindowResult[string, int64]) (bool, error) {
			return r.Value >= threshold, nil
		}, stream.Name("threshold")).
		To(sink.Func(func(_ context.Context, rs []stream.WindowResult[string, int64]) error {
			var buf bytes.Buffer
			for _, r := range rs {
				if cfg.json {
					b, err := json.Marshal(newResult(r))
					if err != nil {
						return err
					}
					buf.Write(b)
					buf.WriteByte('\n')
				} else {
					fmt.Fprintf(&buf, "%s-%s UTC  %-15s %3d failed password attempts\n",
						r.Start.Format("2006-01-02 15:04"), r.End.Format("15:04"), r.Key, r.Value)
				}
			}
			if _, err := stdout.Write(buf.Bytes()); err != nil {
				return fmt.Errorf("write alerts: %w", err)
			}
			sum.Alerts.Add(int64(len(rs)))
			return nil
		}), stream.Name("alerts"))
}

// openWindows opens the windows file for appending. A kill inside a write
// may have left a torn last line; a newline ends it first, so that it
// stays one bad line and the next result starts a line of its own (the
// torn result was not finished, so it is written again whole).
func openWindows(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err = f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			_, err = f.Write([]byte{'\n'})
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// lineIndex is the 0-based line of the input at offset of partition p of n.
func lineIndex(offset int64, p int32, n int) int64 { return offset*int64(n) + int64(p) }
