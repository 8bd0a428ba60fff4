package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// projection is the read model: events per user key, and where each partition stands.
type projection struct {
	topic string

	mu       sync.Mutex
	counts   map[string]int64
	applied  int64
	parts    []partStats // nil until the topic is open
	replayed int         // partitions whose replay has ended
}

// partStats is one partition's line of /stats. Pointer fields are JSON null when unknown.
type partStats struct {
	Partition int32  `json:"partition"`
	ReplayEnd *int64 `json:"replayEnd"`
	Position  *int64 `json:"position"`
	Following bool   `json:"following"`
}

// stats is the JSON body of GET /stats.
type stats struct {
	Topic      string      `json:"topic"`
	Ready      bool        `json:"ready"`
	Applied    int64       `json:"applied"`
	Users      int         `json:"users"`
	Partitions []partStats `json:"partitions"`
}

// userCount is the JSON body of GET /users/ID.
type userCount struct {
	User   string `json:"user"`
	Events int64  `json:"events"`
}

func newProjection(topic string) *projection {
	return &projection{topic: topic, counts: make(map[string]int64)}
}

// run waits for the topic (checking every poll), then replays and follows each of its
// partitions until ctx is done or a pipeline fails.
func (p *projection) run(ctx context.Context, lg *log.Log, poll time.Duration) error {
	var n int
	for {
		t, err := lg.Topic(p.topic)
		if err == nil {
			n = t.Partitions()
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	p.mu.Lock()
	p.parts = make([]partStats, n)
	for i := range p.parts {
		p.parts[i].Partition = int32(i)
	}
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := p.runPartition(ctx, lg, int32(i))
			if err != nil {
				cancel() // one failed partition stops the others: a partial model is no model
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runPartition replays partition id to the high watermark its replay source saw when it
// opened, then follows it from exactly the replay's end (see the package doc).
func (p *projection) runPartition(ctx context.Context, lg *log.Log, id int32) error {
	replay := source.Partition(lg, p.topic, id, source.Earliest, source.Replay())
	err := stream.From(replay, stream.WithName(fmt.Sprintf("projection-replay-%d", id))).
		Tap(p.apply).
		Run(ctx)
	if err != nil {
		return fmt.Errorf("replay %s/%d: %w", p.topic, id, err)
	}
	end := replay.Position()
	if end < 0 {
		return fmt.Errorf("replay %s/%d ended without a position", p.topic, id)
	}
	p.replayEnded(id, end)

	follow := source.Partition(lg, p.topic, id, source.At(end))
	err = stream.From(follow, stream.WithName(fmt.Sprintf("projection-follow-%d", id))).
		Tap(p.apply).
		Run(ctx)
	if err != nil {
		return fmt.Errorf("follow %s/%d: %w", p.topic, id, err)
	}
	return ctx.Err() // a follow ends only when ctx is done (Run drains and returns nil)
}

// apply adds one record to the model.
func (p *projection) apply(_ context.Context, r log.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Key != nil {
		p.counts[string(r.Key)]++
	}
	p.applied++
	pos := r.Offset + 1
	p.parts[r.Partition].Position = &pos
	return nil
}

// replayEnded marks partition id's replay done at end.
func (p *projection) replayEnded(id int32, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts[id].ReplayEnd = &end
	p.parts[id].Following = true
	p.replayed++
	if p.replayed == len(p.parts) {
		fmt.Fprintf(os.Stderr, "projection: rebuilt %s: %d records, %d users; following\n",
			p.topic, p.applied, len(p.counts))
	}
}

// ready reports whether every partition's replay has ended; p.mu must be held.
func (p *projection) readyLocked() bool {
	return p.parts != nil && p.replayed == len(p.parts)
}

// user returns the count for id, whether the user has events, and whether the model is ready.
func (p *projection) user(id string) (n int64, found, ready bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, found = p.counts[id]
	return n, found, p.readyLocked()
}

// stats returns a snapshot for /stats.
func (p *projection) stats() stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := stats{
		Topic:      p.topic,
		Ready:      p.readyLocked(),
		Applied:    p.applied,
		Users:      len(p.counts),
		Partitions: make([]partStats, len(p.parts)),
	}
	copy(st.Partitions, p.parts)
	return st
}
