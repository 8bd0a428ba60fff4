package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/strom-dev/strom/internal/service"
)

// pollInterval is how often split and resumed read the stats while they wait.
const pollInterval = 100 * time.Millisecond

// stablePolls is how many consecutive polls must show the same positions, lag 0 and a
// stopped publisher before split compares: about half a second of nothing moving.
const stablePolls = 5

// snapshot is one reading of every service's stats.
type snapshot struct {
	pub       service.PublisherStats
	consumers []service.ConsumerStats
}

// read fetches the publisher's and every consumer's stats.
func read(ctx context.Context, pubURL string, consumerURLs []string) (snapshot, error) {
	var s snapshot
	if err := service.GetJSON(ctx, statsURL(pubURL), &s.pub); err != nil {
		return snapshot{}, err
	}
	s.consumers = make([]service.ConsumerStats, len(consumerURLs))
	for i, u := range consumerURLs {
		if err := service.GetJSON(ctx, statsURL(u), &s.consumers[i]); err != nil {
			return snapshot{}, err
		}
	}
	return s, nil
}

// settled reports whether the publisher has stopped and every consumer has caught up.
func (s snapshot) settled() bool {
	if !s.pub.Stopped {
		return false
	}
	for _, c := range s.consumers {
		if c.Lag == nil || *c.Lag != 0 {
			return false
		}
	}
	return true
}

// positions returns the consumers' positions, -1 for null.
func (s snapshot) positions() []int64 {
	out := make([]int64, len(s.consumers))
	for i, c := range s.consumers {
		out[i] = orMinus1(c.Position)
	}
	return out
}

func orMinus1(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// splitVerdict compares a consumer's position with the records written to its partition.
// A null position (nothing saved) counts as 0, the start of a fresh partition.
func splitVerdict(written int64, position *int64) (ok bool, why string) {
	pos := int64(0)
	if position != nil {
		pos = *position
	}
	switch {
	case pos == written:
		return true, "ok"
	case pos < written:
		return false, fmt.Sprintf("FAIL: replay still owed (%d records written but not checkpointed)", written-pos)
	default:
		return false, fmt.Sprintf("FAIL: skip (position %d records past what was written)", pos-written)
	}
}

// runSplit is "check split".
func runSplit(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("split", flag.ContinueOnError)
	pubURL := fs.String("publisher", "", "publisher URL")
	consumers := fs.String("consumers", "", "comma-separated consumer URLs")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the publisher to stop and the consumers to catch up")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	urls := splitList(*consumers)
	switch {
	case len(pos) > 0:
		return usagef("split: unexpected argument %q", pos[0])
	case *pubURL == "":
		return usagef("split: --publisher is required")
	case len(urls) == 0:
		return usagef("split: --consumers is required")
	}

	ctx := context.Background()
	deadline := time.Now().Add(*wait)
	var s snapshot
	var last []int64
	stable := 0
	for {
		s, err = read(ctx, *pubURL, urls)
		switch {
		case err != nil:
			stable = 0
		case s.settled() && slices.Equal(s.positions(), last):
			stable++
		case s.settled():
			stable = 1
		default:
			stable = 0
		}
		if err == nil {
			last = s.positions()
		}
		if stable >= stablePolls {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "check split: not settled after %v (publisher stopped: %v, lags: %s); comparing anyway\n",
				*wait, s.pub.Stopped, lags(s))
			break
		}
		time.Sleep(pollInterval)
	}

	failed := false
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\twritten\tposition\tverdict")
	written := writtenPerPartition(s.pub)
	covered := make([]bool, len(written))
	for _, c := range s.consumers {
		p := int(c.Partition)
		if p < 0 || p >= len(written) {
			failed = true
			fmt.Fprintf(tw, "%d\t-\t%s\tFAIL: %s reads a partition the topic does not have\n", p, orNull(c.Position), c.Name)
			continue
		}
		covered[p] = true
		ok, why := splitVerdict(written[p], c.Position)
		failed = failed || !ok
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", p, written[p], orNull(c.Position), why)
	}
	for p, c := range covered {
		if !c {
			failed = true
			fmt.Fprintf(tw, "%d\t%d\t-\tFAIL: no consumer reads this partition\n", p, written[p])
		}
	}
	tw.Flush()
	if failed {
		fmt.Fprintln(out, "check split: FAILED")
		return errFailed
	}
	fmt.Fprintf(out, "check split: ok: each partition's position equals the records written to it (%d in all)\n", s.pub.Sent)
	return nil
}

// lags formats the consumers' lags for a message.
func lags(s snapshot) string {
	out := ""
	for i, c := range s.consumers {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%s", c.Name, orNull(c.Lag))
	}
	return out
}

// orNull formats an optional number, "null" for nil.
func orNull(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}

// runTable is "check table".
func runTable(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	pubURL := fs.String("publisher", "", "publisher URL")
	consumers := fs.String("consumers", "", "comma-separated consumer URLs")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	urls := splitList(*consumers)
	switch {
	case len(pos) > 0:
		return usagef("table: unexpected argument %q", pos[0])
	case *pubURL == "":
		return usagef("table: --publisher is required")
	}
	s, err := read(context.Background(), *pubURL, urls)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "partition\twritten\tposition\thandled\tresumedFrom\tlag\tconsumer")
	all := writtenPerPartition(s.pub)
	for _, c := range s.consumers {
		written := "-"
		if p := int(c.Partition); p >= 0 && p < len(all) {
			written = strconv.FormatInt(all[p], 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", c.Partition, written, orNull(c.Position),
			c.Handled, orNull(c.ResumedFrom), orNull(c.Lag), c.Name)
	}
	return tw.Flush()
}

// writtenPerPartition returns the records written to each partition: the
// partitions' high watermarks (nextOffset), which count what earlier
// publisher processes wrote too, or, from a publisher that does not report
// them, what this process wrote (perPartition).
func writtenPerPartition(pub service.PublisherStats) []int64 {
	if len(pub.NextOffset) == len(pub.PerPartition) && len(pub.NextOffset) > 0 {
		return pub.NextOffset
	}
	return pub.PerPartition
}
