package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/strom-dev/strom/log"
)

// publishBatch is how many lines of one partition go into one synced
// append when --pace is 0: one fsync per 512 lines instead of per line.
// With --pace it is pacedBatch, so that a kill finds a partly published
// input without paying an fsync per line (about 1.5ms each on the CI disk).
const (
	publishBatch = 512
	pacedBatch   = 16
)

// published is what publish did.
type published struct {
	Already int // lines that were in the log before (an earlier, killed run)
	New     int // lines appended now
}

// splitLines returns the lines of data: split at "\n", one "\r" before it
// dropped (as source.Lines reads files), a last line without "\n" kept.
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		lines = append(lines, string(bytes.TrimSuffix(line, []byte("\r"))))
	}
	return lines
}

// publish appends to t the lines it does not hold yet. Line i belongs to
// partition i % n at offset i / n (n = t.Partitions()), so what a partition
// holds says which of its lines are in: a partition p whose high watermark
// is c holds lines p, p+n, ..., p+(c-1)*n, and publishing goes on from line
// p + c*n. Every append is synced (log.AckSynced) before the next, and a
// torn append is cut back to its last whole record when the topic is
// opened for writing again, so after a kill -9 at any point a second call
// publishes exactly the missing lines: none twice, none skipped.
//
// Lines go in file order, 512 per partition per append; when pace > 0 (for
// tests and demos that want to kill it mid-way) they go pace apart on
// average, 16 per append. It fails when a partition holds more records than the input has
// lines for it (the log is not this input's).
func publish(ctx context.Context, t *log.Topic, lines []string, pace time.Duration) (published, error) {
	n := t.Partitions()
	parts := make([]*log.Partition, n)
	var res published
	from := len(lines) // the first line to publish, over all partitions
	for p := range n {
		part, err := t.Partition(int32(p))
		if err != nil {
			return res, err
		}
		parts[p] = part
		c := int(part.HighWatermark())
		if want := linesOf(len(lines), n, p); c > want {
			return res, fmt.Errorf("topic %s partition %d holds %d records, the input has %d lines for it: the log is not this input's",
				t.Name(), p, c, want)
		}
		res.Already += c
		from = min(from, p+c*n)
	}
	next := make([]int64, n) // the offset each partition appends next
	for p, part := range parts {
		next[p] = part.HighWatermark()
	}
	batches := make([][]log.Record, n)
	flush := func(p int) error {
		if len(batches[p]) == 0 {
			return nil
		}
		if _, err := parts[p].AppendAck(ctx, log.AckSynced, batches[p]...); err != nil {
			return fmt.Errorf("publish to topic %s partition %d at offset %d: %w", t.Name(), p, next[p], err)
		}
		next[p] += int64(len(batches[p]))
		res.New += len(batches[p])
		clear(batches[p])
		batches[p] = batches[p][:0]
		return nil
	}
	pc := newPacer(pace)
	size := publishBatch
	if pace > 0 {
		size = pacedBatch
	}
	for i := from; i < len(lines); i++ {
		p := i % n
		if int64(i/n) < next[p]+int64(len(batches[p])) {
			continue // already in the log
		}
		if err := pc.wait(ctx); err != nil {
			return res, err
		}
		// Timestamp 0: the log stamps the time of the append. The line's own
		// time is not put there: a December date of the current year may be
		// in the future, and the pipeline reads event time from the text.
		batches[p] = append(batches[p], log.Record{Value: []byte(lines[i])})
		if len(batches[p]) >= size {
			if err := flush(p); err != nil {
				return res, err
			}
		}
	}
	for p := range n {
		if err := flush(p); err != nil {
			return res, err
		}
	}
	return res, nil
}

// linesOf is how many of total lines belong to partition p of n: those
// with an index i where i % n == p.
func linesOf(total, n, p int) int {
	if p >= total {
		return 0
	}
	return (total-p-1)/n + 1
}

// pacer spaces lines pace apart on average: it waits until n*pace after
// its start before the n-th line, so paces under the timer's granularity
// (about 1ms) still average out instead of each costing a whole tick. A
// pacer that fell behind (the process was not scheduled) catches up at
// most maxDebt's worth of lines at full speed, so that a slow machine
// slows a paced run down instead of making it rush.
type pacer struct {
	pace  time.Duration // 0: no waiting
	start time.Time
	n     int64
}

// maxDebt is how far behind its schedule a pacer may run.
const maxDebt = 2 * time.Millisecond

func newPacer(pace time.Duration) *pacer { return &pacer{pace: pace} }

// wait waits until the next line is due, or returns ctx.Err() when ctx
// ends first.
func (p *pacer) wait(ctx context.Context) error {
	if p.pace <= 0 {
		return ctx.Err()
	}
	if p.n == 0 {
		p.start = time.Now()
	}
	p.n++
	d := time.Until(p.start.Add(time.Duration(p.n) * p.pace))
	if d < -maxDebt {
		p.start = p.start.Add(-d - maxDebt) // forgive the rest of the debt
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
