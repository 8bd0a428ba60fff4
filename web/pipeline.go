package web

import (
	"embed"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/strom-dev/strom/stream"
)

// PipelineOption configures a [PipelinePage]. The zero configuration (no
// options) samples every second and keeps 300 samples (five minutes).
type PipelineOption func(*pipelineConfig)

type pipelineConfig struct {
	interval time.Duration
	history  int
}

// PipelineSampleInterval sets how often the page samples the pipeline and
// pushes a snapshot to its event streams: 1 s by default, which is also the
// most (the page updates at least once a second). d <= 0 or above 1 s keeps
// the default.
func PipelineSampleInterval(d time.Duration) PipelineOption {
	return func(c *pipelineConfig) {
		if d > 0 && d <= time.Second {
			c.interval = d
		}
	}
}

// PipelineHistory sets how many samples of each partition's records per
// second and lag the page keeps for its sparklines: 300 by default (five
// minutes at 1 s). n <= 0 keeps the default.
func PipelineHistory(n int) PipelineOption {
	return func(c *pipelineConfig) {
		if n > 0 {
			c.history = n
		}
	}
}

// PipelineSnapshot is what /snapshot.json and each event of /events carry:
// the pipeline's [stream.Snapshot] (its fields at the top level of the JSON)
// and, per partition, the page's history of samples.
type PipelineSnapshot struct {
	stream.Snapshot
	// History is, per partition the page has seen, its last samples,
	// oldest first, sorted by topic and partition like Partitions.
	History []PartitionHistory `json:"history"`
}

// PartitionHistory is one partition's last samples, oldest first, one per
// sample interval.
type PartitionHistory struct {
	Topic            string    `json:"topic"`
	Partition        int32     `json:"partition"`
	RecordsPerSecond []float64 `json:"recordsPerSecond"`
	Lag              []int64   `json:"lag"`
}

// PipelinePage is the live page of a running pipeline, an http.Handler;
// [Pipeline] returns it. It is safe for concurrent use.
type PipelinePage struct {
	obs stream.Observer
	cfg pipelineConfig

	mu      sync.Mutex
	history map[pipelinePartition]*PartitionHistory
	last    []byte        // the last sample, encoded
	version uint64        // bumped with each sample
	changed chan struct{} // closed and replaced with each sample

	srv       pageServer
	done      chan struct{}
	closeOnce sync.Once
	stopped   chan struct{}
}

type pipelinePartition struct {
	topic     string
	partition int32
}

// errPipelinePageClosed answers a request to a closed page.
var errPipelinePageClosed = errors.New("web: the pipeline page is closed")

// Pipeline returns the live page of the pipeline obs observes (a
// *stream.Stream of it; [stream.Observer]). It takes a first sample at once
// and then one each sample interval ([PipelineSampleInterval], 1 s) on a
// goroutine of its own until [PipelinePage.Close], and may be made before
// Run starts: the page then shows the stages with zero counts. It panics if
// obs is nil.
func Pipeline(obs stream.Observer, opts ...PipelineOption) *PipelinePage {
	if obs == nil {
		panic("web: Pipeline called with a nil Observer")
	}
	cfg := pipelineConfig{interval: time.Second, history: 300}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	pp := &PipelinePage{obs: obs, cfg: cfg, history: make(map[pipelinePartition]*PartitionHistory),
		changed: make(chan struct{}), done: make(chan struct{}), stopped: make(chan struct{})}
	pp.srv = pageServer{assets: pipelineAssets, files: pipelinePageFiles, done: pp.done, closed: errPipelinePageClosed,
		interval: cfg.interval, snapshot: pp.snapshotNow, current: pp.current}
	pp.sample()
	go pp.run()
	return pp
}

// Close stops the page's sampling and ends its event streams; requests
// after it are answered 503. It returns nil, and may be called more than
// once.
func (pp *PipelinePage) Close() error {
	pp.closeOnce.Do(func() { close(pp.done) })
	<-pp.stopped
	return nil
}

func (pp *PipelinePage) run() {
	defer close(pp.stopped)
	tick := time.NewTicker(pp.cfg.interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			pp.sample()
		case <-pp.done:
			return
		}
	}
}

// sample observes the pipeline, adds each partition's rate and lag to its
// history, encodes the snapshot and wakes the event streams.
func (pp *PipelinePage) sample() {
	snap := pp.obs.Observe()
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, p := range snap.Partitions {
		key := pipelinePartition{p.Topic, p.Partition}
		h := pp.history[key]
		if h == nil {
			h = &PartitionHistory{Topic: p.Topic, Partition: p.Partition}
			pp.history[key] = h
		}
		h.RecordsPerSecond = appendKeep(h.RecordsPerSecond, p.RecordsPerSecond, pp.cfg.history)
		h.Lag = appendKeep(h.Lag, p.Lag, pp.cfg.history)
	}
	b, err := json.Marshal(pp.withHistoryLocked(snap, ""))
	if err != nil { // cannot happen: the snapshot is plain data
		return
	}
	pp.last = b
	pp.version++
	close(pp.changed)
	pp.changed = make(chan struct{})
}

// appendKeep appends v to s and keeps its last n values.
func appendKeep[E any](s []E, v E, n int) []E {
	if len(s) >= n {
		s = append(s[:0], s[len(s)-n+1:]...)
	}
	return append(s, v)
}

// withHistoryLocked returns snap with the history of its partitions, and
// only topic's partitions when topic is not "".
func (pp *PipelinePage) withHistoryLocked(snap stream.Snapshot, topic string) PipelineSnapshot {
	if topic != "" {
		kept := snap.Partitions[:0:0]
		for _, p := range snap.Partitions {
			if p.Topic == topic {
				kept = append(kept, p)
			}
		}
		snap.Partitions = kept
	}
	out := PipelineSnapshot{Snapshot: snap, History: []PartitionHistory{}}
	for _, p := range snap.Partitions {
		if h := pp.history[pipelinePartition{p.Topic, p.Partition}]; h != nil {
			out.History = append(out.History, PartitionHistory{Topic: h.Topic, Partition: h.Partition,
				RecordsPerSecond: append([]float64{}, h.RecordsPerSecond...), Lag: append([]int64{}, h.Lag...)})
		}
	}
	return out
}

// current returns the last sample, encoded (kept to topic when not ""), its
// version and the channel closed at the next.
func (pp *PipelinePage) current(topic string) ([]byte, uint64, <-chan struct{}) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	b := pp.last
	if topic != "" {
		var snap stream.Snapshot
		if err := json.Unmarshal(pp.last, &snap); err == nil {
			if nb, err := json.Marshal(pp.withHistoryLocked(snap, topic)); err == nil {
				b = nb
			}
		}
	}
	return b, pp.version, pp.changed
}

//go:embed assets/pipeline
var pipelineAssets embed.FS

// pipelinePageFiles maps the page's static paths to their embedded file
// and content type.
var pipelinePageFiles = map[string][2]string{
	"/":             {"assets/pipeline/index.html", "text/html; charset=utf-8"},
	"/pipeline.js":  {"assets/pipeline/pipeline.js", "text/javascript; charset=utf-8"},
	"/pipeline.css": {"assets/pipeline/pipeline.css", "text/css; charset=utf-8"},
}

// ServeHTTP serves the page (see the package doc for its paths, and for
// how it answers what it does not serve).
func (pp *PipelinePage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pp.srv.ServeHTTP(w, r)
}

// snapshotNow observes the pipeline now (its counts are Stats' of this
// moment), with the history of the samples.
func (pp *PipelinePage) snapshotNow(topic string) any {
	snap := pp.obs.Observe()
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.withHistoryLocked(snap, topic)
}
