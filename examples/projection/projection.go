package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/web"
)

// userStats is a user's row of the read model: how many events it has and its latest one.
type userStats struct {
	Events int64
	Last   string // the value of the user's latest event
}

// perUser folds a user's events into its row.
var perUser = stream.Aggregator[log.Record, userStats]{
	Add: func(acc userStats, r log.Record) userStats {
		return userStats{Events: acc.Events + 1, Last: string(r.Value)}
	},
}

// projection is the read model: a stream.Table of users, fed by the topic.
type projection struct {
	topic string
	// store keeps the positions and the table's snapshot (--state); nil: rebuilt at each start.
	store *savedPositions

	mu    sync.Mutex
	table *stream.Table[string, stream.KV[string, userStats]] // nil until the topic exists
	parts int

	// mon observes the running pipeline, and page serves it at /ui/ (nil: not served).
	mon  stream.Monitor
	page *web.PipelinePage
}

// partStats is one partition's line of /stats. Checkpointed is null until a position of it
// is saved.
type partStats struct {
	Partition    int32  `json:"partition"`
	Checkpointed *int64 `json:"checkpointed"`
}

// stats is the JSON body of GET /stats.
type stats struct {
	Topic      string      `json:"topic"`
	Ready      bool        `json:"ready"`
	Read       int64       `json:"read"`
	Applied    int64       `json:"applied"`
	Users      int         `json:"users"`
	Events     int64       `json:"events"`
	Partitions []partStats `json:"partitions"`
}

// userCount is the JSON body of GET /users/ID.
type userCount struct {
	User   string `json:"user"`
	Events int64  `json:"events"`
	Last   string `json:"last"`
}

func newProjection(topic string, store *savedPositions) *projection {
	return &projection{topic: topic, store: store}
}

// run waits for the topic (checking every poll), then builds the table from it and keeps it
// current until ctx is done or the pipeline fails.
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
	start := source.Earliest
	if p.store != nil {
		start = source.FromStore(p.store)
		for i := range int32(n) {
			if err := p.store.note(ctx, p.topic, i); err != nil {
				return err
			}
		}
	}
	events := stream.From(source.Topic(lg, p.topic, start), stream.WithName("projection"), stream.ObservedBy(&p.mon)).
		Filter(func(_ context.Context, r log.Record) (bool, error) { return r.Key != nil, nil }, stream.Name("keyed"))
	if p.store != nil {
		events = events.Checkpointing(p.store)
	}
	rows := stream.Aggregate(stream.KeyBy(events, func(r log.Record) string { return string(r.Key) }), perUser, stream.Name("per-user"))
	table := stream.ToTable(stream.KeyBy(rows, func(kv stream.KV[string, userStats]) string { return kv.Key }), stream.Name("users"))
	p.mu.Lock()
	p.table, p.parts = table, n
	p.mu.Unlock()
	go func() {
		select {
		case <-table.Ready():
			fmt.Fprintf(os.Stderr, "projection: table of %s ready: %d users (%d records read); following\n",
				p.topic, table.Len(), p.read())
		case <-ctx.Done():
		}
	}()
	if err := table.Run(ctx); err != nil {
		return fmt.Errorf("project %s: %w", p.topic, err)
	}
	return ctx.Err() // a follow ends only when ctx is done (Run drains and returns nil)
}

// stage returns the counts of the pipeline's stage name.
func (p *projection) stage(name string) stream.StageStats {
	p.mu.Lock()
	t := p.table
	p.mu.Unlock()
	if t == nil {
		return stream.StageStats{}
	}
	for _, s := range t.Stats() {
		if s.Name == name {
			return s
		}
	}
	return stream.StageStats{}
}

// read is the number of records read from the topic since start, keyless ones included.
func (p *projection) read() int64 { return p.stage("keyed").In }

// user returns the row of id, whether the user has events, and whether the table is ready.
func (p *projection) user(id string) (u userStats, found, ready bool) {
	p.mu.Lock()
	t := p.table
	p.mu.Unlock()
	if t == nil {
		return u, false, false
	}
	kv, found := t.Get(id)
	return kv.Value, found, isClosed(t.Ready())
}

// users returns every row, and whether the table is ready.
func (p *projection) users() (map[string]userCount, bool) {
	p.mu.Lock()
	t := p.table
	p.mu.Unlock()
	out := make(map[string]userCount)
	if t == nil {
		return out, false
	}
	for id, kv := range t.All() {
		out[id] = userCount{User: id, Events: kv.Value.Events, Last: kv.Value.Last}
	}
	return out, isClosed(t.Ready())
}

// stats returns a snapshot for /stats.
func (p *projection) stats() stats {
	p.mu.Lock()
	t, n := p.table, p.parts
	p.mu.Unlock()
	st := stats{Topic: p.topic, Partitions: make([]partStats, n)}
	if t == nil {
		return st
	}
	st.Ready = isClosed(t.Ready())
	st.Read = p.read()
	st.Applied = p.stage("users").In
	for _, kv := range t.All() {
		st.Users++
		st.Events += kv.Value.Events
	}
	for i := range st.Partitions {
		st.Partitions[i].Partition = int32(i)
		if p.store != nil {
			if pos, ok := p.store.saved(p.topic, int32(i)); ok {
				st.Partitions[i].Checkpointed = &pos
			}
		}
	}
	return st
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// savedPositions is the FileStore of --state that remembers the last position it saved of
// each partition, for /stats.
type savedPositions struct {
	*checkpoint.FileStore
	mu  sync.Mutex
	pos map[partKey]int64
}

func newSavedPositions(fs *checkpoint.FileStore) *savedPositions {
	return &savedPositions{FileStore: fs, pos: make(map[partKey]int64)}
}

// Save saves through the FileStore and notes the position.
func (s *savedPositions) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	if err := s.FileStore.Save(ctx, topic, partition, pos); err != nil {
		return err
	}
	s.mu.Lock()
	s.pos[partKey{topic, partition}] = pos.Offset
	s.mu.Unlock()
	return nil
}

// SaveBatch saves through the FileStore and notes the positions.
func (s *savedPositions) SaveBatch(ctx context.Context, positions []checkpoint.TopicPosition) error {
	if err := s.FileStore.SaveBatch(ctx, positions); err != nil {
		return err
	}
	s.mu.Lock()
	for _, p := range positions {
		s.pos[partKey{p.Topic, p.Partition}] = p.Position.Offset
	}
	s.mu.Unlock()
	return nil
}

// note remembers the position of topic/partition the store holds from an earlier run.
func (s *savedPositions) note(ctx context.Context, topic string, partition int32) error {
	pos, found, err := s.Load(ctx, topic, partition)
	if err != nil || !found {
		return err
	}
	s.mu.Lock()
	s.pos[partKey{topic, partition}] = pos.Offset
	s.mu.Unlock()
	return nil
}

type partKey struct {
	topic     string
	partition int32
}

func (s *savedPositions) saved(topic string, partition int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, ok := s.pos[partKey{topic, partition}]
	return pos, ok
}
