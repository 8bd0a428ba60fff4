package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
)

// Defaults and limits of the log page's options.
const (
	// DefaultSampleInterval is how often the log page samples the log
	// and pushes a snapshot to its event streams, unless
	// WithSampleInterval says otherwise: at least once a second, as an
	// operator watching a lag expects.
	DefaultSampleInterval = time.Second
	// MinSampleInterval is the shortest sample interval
	// WithSampleInterval accepts (10 ms): each sample lists the log
	// directory and stats every segment file.
	MinSampleInterval = 10 * time.Millisecond
	// DefaultHistory is how many rates the log page keeps per partition
	// for its sparklines, unless WithHistory says otherwise: 300, five
	// minutes at the default interval.
	DefaultHistory = 300
	// MaxHistory is the most rates per partition WithHistory accepts
	// (3600: an hour at the default interval). Every event carries them
	// all, so the bound keeps an event of a topic of many partitions
	// small enough to send once a second.
	MaxHistory = 3600
)

// ErrPageClosed is the error a closed LogPage answers every request with
// (503 Service Unavailable, with this text).
var ErrPageClosed = errors.New("web: the page is closed")

// LogPageOption configures NewLogPage. The zero configuration (no
// option) serves the log alone, sampled every DefaultSampleInterval, with
// DefaultHistory rates per partition.
type LogPageOption func(*logPageConfig)

// logPageConfig is what the LogPageOptions set.
type logPageConfig struct {
	states   []string
	interval time.Duration
	history  int
}

// WithStateDirs adds checkpoint folders (checkpoint.FileStore folders,
// one <topic>-<partition>.position file per partition, as a pipeline's
// Checkpointing(store) writes them) whose positions the page shows with
// their lag. Each must exist and be a directory when NewLogPage runs: it is
// only read, never created. Later calls add to the list; the page shows
// the folders in the order given. Default: none.
func WithStateDirs(dirs ...string) LogPageOption {
	return func(c *logPageConfig) { c.states = append(c.states, dirs...) }
}

// WithSampleInterval sets how often the page samples the log and pushes a
// snapshot to its event streams, overriding DefaultSampleInterval (1 s):
// the time each rate of a sparkline covers. Zero keeps the default;
// NewLogPage refuses a negative interval or one below MinSampleInterval
// (10 ms).
func WithSampleInterval(d time.Duration) LogPageOption {
	return func(c *logPageConfig) { c.interval = d }
}

// WithHistory sets how many rates the page keeps per partition (the
// length of a sparkline), overriding DefaultHistory (300). Zero keeps the
// default; NewLogPage refuses a negative count or one over MaxHistory
// (3600).
func WithHistory(n int) LogPageOption {
	return func(c *logPageConfig) { c.history = n }
}

// LogPage is the live, read-only page of a log directory (see the package
// doc, "The log page"): an http.Handler that serves the page, its
// snapshots and its event stream, and owns the goroutine that samples the
// log. Build it with NewLogPage and Close it when done. It is safe for
// concurrent use.
type LogPage struct {
	dir    string
	cfg    logPageConfig
	lg     *log.Log
	stores []stateFolder
	rates  *rateHistory
	srv    pageServer

	mu      sync.Mutex
	latest  LogSnapshot   // the last sample, with rates
	encoded []byte        // latest as JSON
	version uint64        // counts samples
	changed chan struct{} // closed, and replaced, at the next sample

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	sampler   sync.WaitGroup
}

// NewLogPage opens the log directory dir read-only (log.Open with
// log.ReadOnly: no lock is taken and nothing is written, so it runs beside
// the process that writes the log), checks the state folders of
// WithStateDirs, takes a first sample and starts the goroutine that takes
// one each sample interval. Errors: a missing dir, or one that is not a
// directory, wraps log.ErrNoLog; a state folder that does not exist or is
// not a directory is named (it is never created); an option out of range
// names the option, its value and the limit. Close the page to stop the
// sampling and release the log.
func NewLogPage(dir string, opts ...LogPageOption) (*LogPage, error) {
	cfg := logPageConfig{interval: DefaultSampleInterval, history: DefaultHistory}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var stores []stateFolder
	for _, s := range cfg.states {
		fi, err := os.Stat(s)
		switch {
		case err != nil:
			return nil, fmt.Errorf("web: state folder: %w", err) // the error names the path
		case !fi.IsDir():
			return nil, fmt.Errorf("web: state folder %s is not a directory", s)
		}
		st, err := checkpoint.NewFileStore(s) // s exists: nothing is created
		if err != nil {
			return nil, fmt.Errorf("web: state folder %s: %w", s, err)
		}
		stores = append(stores, stateFolder{name: s, store: st})
	}
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	lp := &LogPage{dir: dir, cfg: cfg, lg: lg, stores: stores, rates: newRateHistory(cfg.history),
		changed: make(chan struct{}), done: make(chan struct{})}
	lp.srv = pageServer{assets: logAssets, files: logPageFiles, done: lp.done, closed: ErrPageClosed,
		interval: cfg.interval, topicKnown: lp.knownTopic, snapshot: lp.snapshotNow, current: lp.current}
	lp.sample()
	lp.sampler.Add(1)
	go lp.sampleEvery()
	return lp, nil
}

// validate refuses options out of range, naming the option and the limit.
func (c *logPageConfig) validate() error {
	switch {
	case c.interval == 0:
		c.interval = DefaultSampleInterval
	case c.interval < MinSampleInterval:
		return fmt.Errorf("web: sample interval %v is below the minimum %v", c.interval, MinSampleInterval)
	}
	switch {
	case c.history == 0:
		c.history = DefaultHistory
	case c.history < 0 || c.history > MaxHistory:
		return fmt.Errorf("web: history of %d rates per partition is outside 1 to %d", c.history, MaxHistory)
	}
	return nil
}

// Snapshot takes a snapshot of the log and the state folders now, with
// the rates of the last samples: what /snapshot.json serves. A topic or
// folder that cannot be read is reported inside the snapshot (an Error
// field), not as an error. After Close every topic reports log.ErrClosed.
func (lp *LogPage) Snapshot() LogSnapshot {
	snap := lp.collect("")
	lp.rates.fill(&snap)
	return snap
}

// Close stops the sampling, ends every open event stream (each returns
// after its current write), closes the log and answers later requests
// with 503. It returns the log's Close error; later calls return nil.
func (lp *LogPage) Close() error {
	var err error
	lp.closeOnce.Do(func() {
		close(lp.done)
		lp.sampler.Wait()
		err = lp.lg.Close()
	})
	return err
}

// sampleEvery samples the log each interval until Close.
func (lp *LogPage) sampleEvery() {
	defer lp.sampler.Done()
	tick := time.NewTicker(lp.cfg.interval)
	defer tick.Stop()
	for {
		select {
		case <-lp.done:
			return
		case <-tick.C:
			lp.sample()
		}
	}
}

// sample takes a snapshot of the whole log, records its high watermarks
// for the rates, and publishes it to the event streams.
func (lp *LogPage) sample() {
	snap := lp.collect("")
	lp.rates.record(&snap)
	lp.rates.fill(&snap)
	b, err := json.Marshal(snap)
	if err != nil { // cannot happen: the snapshot holds strings and numbers
		b = []byte(`{"errors":["encoding the snapshot failed"]}`)
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.latest, lp.encoded = snap, b
	lp.version++
	close(lp.changed)
	lp.changed = make(chan struct{})
}

// current returns the last sample as JSON (only topic's part of it, when
// topic is not ""), its number, and a channel closed at the next sample.
func (lp *LogPage) current(topic string) ([]byte, uint64, <-chan struct{}) {
	lp.mu.Lock()
	snap, b, version, changed := lp.latest, lp.encoded, lp.version, lp.changed
	lp.mu.Unlock()
	if topic != "" {
		var err error
		if b, err = json.Marshal(onlyTopic(snap, topic)); err != nil {
			b = []byte(`{"errors":["encoding the snapshot failed"]}`)
		}
	}
	return b, version, changed
}

// onlyTopic returns snap with only topic's figures and positions.
func onlyTopic(snap LogSnapshot, topic string) LogSnapshot {
	out := snap
	out.Topics, out.Positions = []TopicFigures{}, []PositionFigures{}
	for _, t := range snap.Topics {
		if t.Topic == topic {
			out.Topics = append(out.Topics, t)
		}
	}
	for _, p := range snap.Positions {
		if p.Topic == topic {
			out.Positions = append(out.Positions, p)
		}
	}
	return out
}

//go:embed assets/log
var logAssets embed.FS

// logPageFiles maps the page's static paths to their embedded file and
// content type.
var logPageFiles = map[string][2]string{
	"/":        {"assets/log/index.html", "text/html; charset=utf-8"},
	"/log.js":  {"assets/log/log.js", "text/javascript; charset=utf-8"},
	"/log.css": {"assets/log/log.css", "text/css; charset=utf-8"},
}

// ServeHTTP serves the page (see the package doc for its paths, and for
// how it answers what it does not serve).
func (lp *LogPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lp.srv.ServeHTTP(w, r)
}

// knownTopic says 404 for a topic the log does not have. A topic that
// exists but fails to open (a damaged partition) passes: the snapshot shows
// its error.
func (lp *LogPage) knownTopic(topic string) (int, string) {
	if _, err := lp.lg.Topic(topic); errors.Is(err, log.ErrUnknownTopic) {
		return http.StatusNotFound, fmt.Sprintf("no topic %s in the log directory %s", topic, lp.dir)
	}
	return 0, ""
}

// snapshotNow takes a snapshot now, with the rates of the last samples.
func (lp *LogPage) snapshotNow(topic string) any {
	snap := lp.collect(topic)
	lp.rates.fill(&snap)
	return snap
}
