package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/web"
)

// consumer handles records and keeps the numbers /stats reports.
type consumer struct {
	cfg config
	lg  *log.Log
	out *os.File // --out, nil without it; written by handle only

	mu          sync.Mutex
	handled     int64
	position    int64 // valid when hasPosition
	hasPosition bool
	resumedFrom *int64 // the offset reading resumed at: the loaded position, or where a reset moved it
	reconnects  int64
	last        *service.RecordView
	part        *log.Partition // read-only handle for the high watermark; nil until the topic exists

	// mon observes the running pipeline (ConsumeForever's, rebuilt after a
	// failure) and page serves it at /ui/; page is nil when not served.
	mon  stream.Monitor
	page *web.PipelinePage
}

// handle is the consumer's per-record work: wait --delay, then append the record to --out.
// It returns before the position covering the record can be saved, as ConsumeForever
// promises, so a record written to --out and lost by a crash is handled again.
func (c *consumer) handle(ctx context.Context, r log.Record) error {
	if c.cfg.delay > 0 {
		t := time.NewTimer(c.cfg.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	view := service.RecordView{Offset: r.Offset, Key: keyString(r.Key), Value: string(r.Value)}
	if c.out != nil {
		line, err := json.Marshal(service.OutLine{
			Partition: r.Partition,
			Offset:    r.Offset,
			Key:       view.Key,
			Value:     view.Value,
		})
		if err != nil {
			return fmt.Errorf("encode record %d for --out: %w", r.Offset, err)
		}
		// One Write per record, and the page cache keeps it when the process is killed;
		// a kill can still cut the Write short at a page boundary, and openOut drops such
		// a partial last line at the next start (the record is handled again then: its
		// position was not saved).
		if _, err := c.out.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("write --out: %w", err)
		}
	}
	c.mu.Lock()
	c.handled++
	c.last = &view
	c.mu.Unlock()
	return nil
}

// keyString returns key as a string, nil for a nil key (an empty key stays "").
func keyString(key []byte) *string {
	if key == nil {
		return nil
	}
	s := string(key)
	return &s
}

// resume sets the position loaded at startup, before serving: the offset reading resumes at
// unless the source resets it (reset).
func (c *consumer) resume(off int64) {
	c.mu.Lock()
	c.resumedFrom = &off
	c.position = off
	c.hasPosition = true
	c.mu.Unlock()
}

// source returns the consumer's source: its partition from the position saved in store,
// reporting resets to c.reset.
func (c *consumer) source(store checkpoint.Store) *source.PartitionSource {
	return source.Partition(c.lg, c.cfg.topic, c.cfg.partition, source.FromStore(store),
		source.MaxBytes(c.cfg.batchBytes), source.OnReset(c.reset))
}

// reset is the source's OnReset hook. A reset of the position the consumer resumed from,
// before it handled a record (the saved offset is below the log start, or belongs to a topic
// since deleted and created again), moves resumedFrom and position to where reading really
// resumed: reporting the saved offset would claim records were skipped that were read, and
// give a lag against another topic. Every reset is logged.
func (c *consumer) reset(r source.Reset) {
	why := fmt.Sprintf("below the log start offset %d", r.StartOffset)
	if r.Recreated != nil {
		why = r.Recreated.Error()
	}
	fmt.Fprintf(os.Stderr, "%s: offset %d of %s/%d is no longer there (%s): reading at offset %d (%s)\n",
		c.cfg.name, r.From, r.Topic, r.Partition, why, r.To, r.Policy)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resumedFrom != nil && *c.resumedFrom == r.From && c.handled == 0 {
		to := r.To
		c.resumedFrom = &to
		c.position = to
	}
}

// sourceError counts a source failure ConsumeForever backs off from.
func (c *consumer) sourceError(err error, attempt int) {
	c.mu.Lock()
	c.reconnects++
	c.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%s: source failed (attempt %d), backing off: %v\n", c.cfg.name, attempt, err)
}

// checkpointed records a saved position.
func (c *consumer) checkpointed(_ string, _ int32, position checkpoint.Position) {
	c.mu.Lock()
	c.position = position.Offset
	c.hasPosition = true
	c.mu.Unlock()
}

// partition returns a read-only handle on the consumer's partition, or nil while the topic
// does not exist.
func (c *consumer) partition() *log.Partition {
	c.mu.Lock()
	p := c.part
	c.mu.Unlock()
	if p != nil {
		return p
	}
	t, err := c.lg.Topic(c.cfg.topic)
	if err != nil {
		return nil
	}
	p, err = t.Partition(c.cfg.partition)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	c.part = p
	c.mu.Unlock()
	return p
}

// stats returns a snapshot for /stats.
func (c *consumer) stats() service.ConsumerStats {
	c.mu.Lock()
	st := service.ConsumerStats{
		Name:        c.cfg.name,
		Topic:       c.cfg.topic,
		Partition:   c.cfg.partition,
		Handled:     c.handled,
		ResumedFrom: c.resumedFrom,
		Reconnects:  c.reconnects,
		LastRecord:  c.last,
	}
	if c.hasPosition {
		pos := c.position
		st.Position = &pos
	}
	c.mu.Unlock()
	// The high watermark is read after the position: a saved position never passes the high
	// watermark of its moment, and the high watermark only grows, so the lag is never negative.
	if p := c.partition(); p != nil {
		from := p.StartOffset()
		if st.Position != nil {
			from = *st.Position
		}
		lag := p.HighWatermark() - from
		st.Lag = &lag
	}
	return st
}

// routes are the consumer's endpoints, all read-only: GET /stats, /metrics and /health, and
// the live page of its pipeline under /ui/ when c.page is set (web.Pipeline). Any other
// method is 405 with an Allow header (http.ServeMux's method patterns; the page's own).
func (c *consumer) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", c.handleStats)
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /health", service.Health)
	if c.page != nil {
		mux.Handle("/ui/", http.StripPrefix("/ui", c.page))
	}
	return mux
}

func (c *consumer) handleStats(w http.ResponseWriter, _ *http.Request) {
	service.WriteJSON(w, http.StatusOK, c.stats())
}

// openOut opens the --out file at path for appending, creating it, after
// cutting a partial last line (no newline at the end): what a kill left of a
// Write that crossed a page boundary. That record's position was not saved,
// so it is handled, and written whole, again.
func openOut(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := cutPartialLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// cutPartialLine truncates f after its last newline when it does not end
// with one, reading backwards 64 KiB at a time.
func cutPartialLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	buf := make([]byte, 64<<10)
	for pos := end; pos > 0; {
		n := min(int64(len(buf)), pos)
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return err
		}
		if pos+n == end && buf[n-1] == '\n' {
			return nil // whole lines only
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(pos + int64(i) + 1)
		}
	}
	return f.Truncate(0) // one partial line and nothing before it
}
