package scaledemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/kafkatest"
)

// The Kafka names of a run, on the in-process Kafka Run starts.
const (
	topic = "ssh"      // the lines
	group = "sshwatch" // the workers' group
	// throughTopic is sshwatch --repartition's repartition topic in group.
	throughTopic = group + "-by-ip-repartition"
)

// The workers' group timings. A member killed with SIGKILL holds its
// partitions until its session expires, and the kfake this project tests
// with then waits the whole rebalance timeout for it: 2 s each bounds a
// kill's pause to about 4 s, and a loaded 2-core machine still heartbeats
// (every 200 ms) well within 2 s.
const (
	sessionTimeout   = 2 * time.Second
	rebalanceTimeout = 2 * time.Second
)

// repartitionOutOfOrder is the workers' --out-of-order with Repartition. A
// partition of the repartition topic interleaves the lines of every
// worker as each gets to them, so its event times are as far out of order
// as the workers are apart, which after a kill (a partition idle for about
// 4 s while the others go on) is hours of this input's time: a day covers
// any input of one day, and its windows close only at the sentinels.
const repartitionOutOfOrder = 24 * time.Hour

// How the lines are produced: chunk lines at a time, at most ahead lines
// past the group's commits, so that the kill and the join land while
// lines flow; the commits are sampled every poll.
const (
	chunk = 100
	ahead = 300
	poll  = 20 * time.Millisecond
)

// Config is one run. Input, SSHWatch and Dir are required.
type Config struct {
	Input    string // the sshd log (OpenSSH_2k.log)
	SSHWatch string // the sshwatch binary (go build ./examples/sshwatch)
	Dir      string // the run's folder: created, must be empty; every worker's output stays there

	// Workers is how many sshwatch processes start; zero means 3. One of
	// them is killed with SIGKILL once the group committed KillAt of the
	// lines (unless NoKill), and one more starts at JoinAt (unless
	// NoJoin): zero means a third and two thirds. Partitions is the input
	// topic's partition count; zero means 6 (two per worker at the start,
	// and work for the fourth).
	Workers    int
	KillAt     float64
	JoinAt     float64
	NoKill     bool
	NoJoin     bool
	Partitions int

	// Repartition keys the lines by line number, so that an IP's lines
	// are spread over the partitions, and runs the workers with
	// --repartition (and --out-of-order repartitionOutOfOrder): the
	// issue's Repartition case. Otherwise each line is keyed by its
	// source IP and the workers declare that the key follows the
	// partitioning.
	Repartition bool

	Year     int           // the year of the timestamps; zero means 2026
	Seed     uint64        // picks the worker killed; zero means 1
	Stall    time.Duration // how long the group's commits may stay still before the run fails; zero means a minute
	Progress io.Writer     // the events as they happen; nil for none
}

func (c *Config) defaults() error {
	switch {
	case c.Input == "" || c.SSHWatch == "" || c.Dir == "":
		return errors.New("scaledemo: Config.Input, SSHWatch and Dir are required")
	case c.KillAt < 0 || c.KillAt > 1 || c.JoinAt < 0 || c.JoinAt > 1:
		return fmt.Errorf("scaledemo: KillAt %v, JoinAt %v: fractions of the lines, from 0 to 1", c.KillAt, c.JoinAt)
	}
	c.Workers = cmpOr(c.Workers, 3)
	c.Partitions = cmpOr(c.Partitions, 6)
	c.Year = cmpOr(c.Year, 2026)
	c.Seed = cmpOr(c.Seed, 1)
	c.Stall = cmpOr(c.Stall, time.Minute)
	c.KillAt = cmpOr(c.KillAt, 1.0/3)
	c.JoinAt = cmpOr(c.JoinAt, 2.0/3)
	if c.Workers < 2 && !c.NoKill {
		return fmt.Errorf("scaledemo: %d workers: one is killed, so at least 2", c.Workers)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// run is the state of one Run.
type run struct {
	cfg     Config
	rep     *Report
	in      *input
	started time.Time
	rng     *rand.Rand

	cluster *kafkatest.Cluster
	admCl   *kgo.Client
	adm     *kadm.Client
	prod    *kgo.Client

	workers  []*worker
	produced int             // lines produced
	ends     map[int32]int64 // the input topic's end offsets, as the producer was told
	lastSum  int64           // the commits' sum when last sampled
	lastMove time.Time       // when it last changed
}

// Run runs the demo (see the package doc) and returns its report; an
// error is a run that could not go on (a worker that exited by itself, a
// stall, Kafka failing), with the report so far. A run that went through
// and found the alerts different returns a report whose Pass is false and
// a nil error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, started: time.Now(), rng: rand.New(rand.NewPCG(cfg.Seed, 0x7373)), ends: make(map[int32]int64)} // "ss"
	r.rep = &Report{Input: cfg.Input, Partitions: cfg.Partitions, Workers: cfg.Workers, Repartition: cfg.Repartition}
	if err := r.setup(); err != nil {
		return r.rep, err
	}
	defer r.close()
	var err error
	if r.in, err = readInput(cfg.Input, cfg.Year, cfg.Repartition); err != nil {
		return r.rep, err
	}
	r.rep.Lines = len(r.in.lines)
	if err := r.reference(ctx); err != nil {
		return r.rep, err
	}
	if err := r.startKafka(); err != nil {
		return r.rep, err
	}
	t0 := time.Now()
	if err := r.drive(ctx); err != nil {
		r.dumpAll()
		r.killAll()
		return r.rep, err
	}
	r.rep.Distributed = time.Since(t0)
	if err := r.stopAll(ctx); err != nil {
		r.killAll()
		return r.rep, err
	}
	err = r.check()
	r.rep.Total = time.Since(r.started)
	return r.rep, err
}

// setup makes the run folder.
func (r *run) setup() error {
	if entries, err := os.ReadDir(r.cfg.Dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("scaledemo: the run folder %s is not empty", r.cfg.Dir)
	}
	if err := os.MkdirAll(r.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("scaledemo: %w", err)
	}
	return nil
}

// reference runs sshwatch on one process over the file, as a user would:
// its alerts and windows are what the workers must give together.
func (r *run) reference(ctx context.Context) error {
	dir := filepath.Join(r.cfg.Dir, "one-process")
	t0 := time.Now()
	out, err := r.sshwatch(ctx, "--input", r.cfg.Input, "--dir", dir, "--json", "--year", strconv.Itoa(r.cfg.Year)).Output()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return fmt.Errorf("scaledemo: sshwatch on one process: %w: %s", err, ee.Stderr)
		}
		return fmt.Errorf("scaledemo: sshwatch on one process: %w", err)
	}
	r.rep.Reference = time.Since(t0)
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, "one-process.alerts"), out, 0o644); err != nil {
		return fmt.Errorf("scaledemo: %w", err)
	}
	r.event("sshwatch on one process over the file: %d alert lines in %v", strings.Count(string(out), "\n"), r.rep.Reference.Round(time.Millisecond))
	return nil
}

// startKafka starts the in-process Kafka with the input topic, and the
// supervisor's clients.
func (r *run) startKafka() error {
	kc, err := kafkatest.Start(kafkatest.Partitions(r.cfg.Partitions), kafkatest.Topics(topic),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("scaledemo: start the in-process Kafka: %w", err)
	}
	r.cluster = kc
	if r.admCl, err = kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...)); err != nil {
		return fmt.Errorf("scaledemo: admin client: %w", err)
	}
	r.adm = kadm.NewClient(r.admCl)
	// kgo's default partitioner is Kafka's: murmur2 of the key.
	if r.prod, err = kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...), kgo.DefaultProduceTopic(topic)); err != nil {
		return fmt.Errorf("scaledemo: producer: %w", err)
	}
	r.event("in-process Kafka at %s: topic %s, %d partitions, lines keyed by %s", strings.Join(kc.Brokers(), ","), topic, r.cfg.Partitions, r.keyedBy())
	return nil
}

func (r *run) keyedBy() string {
	if r.cfg.Repartition {
		return "line number (an IP's lines spread over the partitions)"
	}
	return "source IP"
}

func (r *run) close() {
	if r.prod != nil {
		r.prod.Close()
	}
	if r.admCl != nil {
		r.admCl.Close()
	}
	if r.cluster != nil {
		r.cluster.Close()
	}
}

// event prints an event of the run, with the time since it started and the
// lines committed.
func (r *run) event(format string, args ...any) {
	line := fmt.Sprintf("%5.1fs  %s", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...))
	r.rep.Events = append(r.rep.Events, line)
	fmt.Fprintln(r.cfg.Progress, line)
}

// drive starts the workers, produces the lines as the group keeps up,
// kills one worker and starts another as the commits pass KillAt and
// JoinAt, then produces the sentinels once every line is committed, and
// returns once every partition (of the repartition topic too) is
// committed to its end.
func (r *run) drive(ctx context.Context) error {
	for range r.cfg.Workers {
		if err := r.startWorker(); err != nil {
			return err
		}
	}
	r.event("started %d sshwatch processes in group %s: %s", r.cfg.Workers, group, strings.Join(r.names(), ", "))
	n := len(r.in.lines)
	killAt, joinAt := int64(r.cfg.KillAt*float64(n)), int64(r.cfg.JoinAt*float64(n))
	killed, joined := r.cfg.NoKill, r.cfg.NoJoin
	r.lastMove = time.Now()
	for {
		committed, err := r.sample(ctx)
		if err != nil {
			return err
		}
		switch {
		case !killed && committed >= killAt:
			if !r.settled(ctx) {
				break // the event waits for a settled group, and the lines for the event
			}
			if err := r.produceChunk(ctx); err != nil {
				return err
			}
			if err := r.killOne(committed); err != nil {
				return err
			}
			killed = true
			continue
		case killed && !joined && committed >= joinAt:
			if !r.settled(ctx) {
				break
			}
			if err := r.produceChunk(ctx); err != nil {
				return err
			}
			if err := r.startWorker(); err != nil {
				return err
			}
			r.rep.Joins++
			joined = true
			r.event("%4d/%d lines committed: started %s (%d workers)", committed, n, r.workers[len(r.workers)-1].name, len(r.running()))
			continue
		case r.produced < n && int64(r.produced)-committed < ahead:
			if err := r.produceChunk(ctx); err != nil {
				return err
			}
			continue
		case r.produced == n && killed && joined:
			return r.finish(ctx)
		}
		if err := r.pause(ctx); err != nil {
			return err
		}
	}
}

// finish waits until every line is committed, produces the sentinels,
// and waits until they and everything before them are committed, in the
// input topic and (with Repartition) in the repartition topic.
func (r *run) finish(ctx context.Context) error {
	n := int64(len(r.in.lines))
	if err := r.await(ctx, "every line committed", func() (bool, error) {
		committed, err := r.sample(ctx)
		return committed == n && r.committedToEnd(ctx, topic, r.ends), err
	}); err != nil {
		return err
	}
	after := time.Minute
	if r.cfg.Repartition {
		after += repartitionOutOfOrder
	}
	lines, keys, err := sentinels(r.in, r.cfg.Partitions, after)
	if err != nil {
		return err
	}
	if err := r.produce(ctx, lines, keys); err != nil {
		return err
	}
	r.event("%4d/%d lines committed: produced %d sentinels (failed attempts %v after the last line, one per partition) to close the last windows", n, n, len(lines), after)
	return r.await(ctx, "the sentinels committed", func() (bool, error) {
		if _, err := r.sample(ctx); err != nil {
			return false, err
		}
		if !r.committedToEnd(ctx, topic, r.ends) {
			return false, nil
		}
		if !r.cfg.Repartition {
			return true, nil
		}
		ends, err := r.listEnds(ctx, throughTopic)
		if err != nil {
			return false, err
		}
		return r.committedToEnd(ctx, throughTopic, ends), nil
	})
}

// await polls cond until it holds, failing on a stall, a worker that
// exited by itself or ctx's end.
func (r *run) await(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			r.event("%s", what)
			return nil
		}
		if err := r.pause(ctx); err != nil {
			return fmt.Errorf("%w (waiting for %s)", err, what)
		}
	}
}

// pause waits one poll, failing when a worker exited by itself or the
// commits stalled.
func (r *run) pause(ctx context.Context) error {
	for _, w := range r.workers {
		if w.exited() && !w.signalled {
			return fmt.Errorf("scaledemo: %s exited by itself: %v (see %s)", w.name, w.err, w.stderrPath)
		}
	}
	if time.Since(r.lastMove) > r.cfg.Stall {
		return fmt.Errorf("scaledemo: the group's commits did not move for %v: %s; %s", r.cfg.Stall, r.commitsString(ctx), r.describe(ctx))
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("scaledemo: %w", ctx.Err())
	case <-time.After(poll):
		return nil
	}
}

// produceChunk produces the next chunk of lines, if any are left.
func (r *run) produceChunk(ctx context.Context) error {
	to := min(r.produced+chunk, len(r.in.lines))
	if err := r.produce(ctx, r.in.lines[r.produced:to], r.in.keys[r.produced:to]); err != nil {
		return err
	}
	r.produced = to
	return nil
}

// produce writes lines keyed by keys, in order (the idempotent producer
// keeps a partition's records in the order produced), and records the
// partitions' end offsets.
func (r *run) produce(ctx context.Context, lines []string, keys [][]byte) error {
	recs := make([]*kgo.Record, len(lines))
	for i := range lines {
		recs[i] = &kgo.Record{Key: keys[i], Value: []byte(lines[i])}
	}
	res := r.prod.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("scaledemo: produce %d lines: %w", len(lines), err)
	}
	for _, pr := range res {
		r.ends[pr.Record.Partition] = max(r.ends[pr.Record.Partition], pr.Record.Offset+1)
	}
	return nil
}

// sample returns the sum of the group's commits of the input topic (lines
// and sentinels committed), and notes when it moved.
func (r *run) sample(ctx context.Context) (int64, error) {
	commits, err := r.commits(ctx, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, at := range commits {
		sum += at
	}
	if sum != r.lastSum {
		r.lastSum, r.lastMove = sum, time.Now()
	}
	return min(sum, int64(len(r.in.lines))), nil
}

// commits returns the group's commits of t by partition.
func (r *run) commits(ctx context.Context, t string) (map[int32]int64, error) {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := r.adm.FetchOffsets(fctx, group)
	out := make(map[int32]int64)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return out, nil // nobody joined yet
	case err != nil:
		return nil, fmt.Errorf("scaledemo: fetch the group's commits: %w", err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == t && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// listEnds returns t's end offsets by partition.
func (r *run) listEnds(ctx context.Context, t string) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := r.adm.ListEndOffsets(lctx, t)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("scaledemo: list the end offsets of %s: %w", t, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// committedToEnd reports whether the group committed every partition of t
// with records up to its end.
func (r *run) committedToEnd(ctx context.Context, t string, ends map[int32]int64) bool {
	commits, err := r.commits(ctx, t)
	if err != nil {
		return false
	}
	for p, end := range ends {
		if end > 0 && commits[p] < end {
			return false
		}
	}
	return true
}

// commitsString lists the input topic's commits and ends, for a stall's
// message.
func (r *run) commitsString(ctx context.Context) string {
	commits, _ := r.commits(ctx, topic)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d lines produced; commits", r.produced, len(r.in.lines))
	for p := range int32(r.cfg.Partitions) {
		fmt.Fprintf(&b, " p%d %d/%d", p, commits[p], r.ends[p])
	}
	return b.String()
}

// members returns the group's state and its members' assignments: how
// many partitions each was assigned.
func (r *run) members(ctx context.Context) (state string, assigned []int, err error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := r.adm.DescribeGroups(dctx, group)
	if err != nil {
		return "", nil, err
	}
	g, ok := groups[group]
	if !ok || g.Err != nil {
		return "", nil, fmt.Errorf("not described: %v", g.Err)
	}
	for _, m := range g.Members {
		n := 0
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				n += len(t.Partitions)
			}
		}
		assigned = append(assigned, n)
	}
	return g.State, assigned, nil
}

// settled reports whether the group is Stable with every running worker
// in it (two members each with Repartition: one per topic), each member
// assigned partitions: a kill then lands on a worker that owns some.
func (r *run) settled(ctx context.Context) bool {
	state, assigned, err := r.members(ctx)
	per := 1
	if r.cfg.Repartition {
		per = 2
	}
	return err == nil && state == "Stable" && len(assigned) == per*len(r.running()) && !slices.Contains(assigned, 0)
}

func (r *run) describe(ctx context.Context) string {
	state, assigned, err := r.members(ctx)
	if err != nil {
		return fmt.Sprintf("the group: %v", err)
	}
	return fmt.Sprintf("the group: %s, %d members assigned %v partitions, %d workers running", state, len(assigned), assigned, len(r.running()))
}

// killOne kills a running worker, chosen from the seed, with SIGKILL, and
// waits until it is gone. It is not started again: its partitions, and
// their windows, move to the others.
func (r *run) killOne(committed int64) error {
	running := r.running()
	w := running[r.rng.IntN(len(running))]
	if err := w.kill(); err != nil {
		return err
	}
	r.rep.Kills++
	r.event("%4d/%d lines committed: kill -9 %s (pid %d) (%d workers)", committed, len(r.in.lines), w.name, w.cmd.Process.Pid, len(r.running()))
	return nil
}

// stopAll stops every running worker with SIGTERM; each must exit 0.
func (r *run) stopAll(ctx context.Context) error {
	running := r.running()
	for _, w := range running {
		if err := w.terminate(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for _, w := range running {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("scaledemo: %s did not exit within 30s of SIGTERM (see %s)", w.name, w.stderrPath)
		}
		if w.err != nil {
			errs = append(errs, fmt.Errorf("scaledemo: %s's stop by SIGTERM failed: %w (see %s)", w.name, w.err, w.stderrPath))
		}
	}
	r.event("stopped %s with SIGTERM", strings.Join(names(running), ", "))
	return errors.Join(errs...)
}

// dumpAll sends SIGQUIT to every worker still running, on the way out of
// a failed run: the Go runtime prints every goroutine's stack to the
// worker's stderr file, and exits. It waits for them, a few seconds at
// most.
func (r *run) dumpAll() {
	running := r.running()
	for _, w := range running {
		w.signalled = true
		_ = w.cmd.Process.Signal(syscall.SIGQUIT)
	}
	deadline := time.After(10 * time.Second)
	for _, w := range running {
		select {
		case <-w.done:
		case <-deadline:
			return
		}
	}
}

// killAll kills every worker still running, on the way out of a failed run.
func (r *run) killAll() {
	for _, w := range r.running() {
		_ = w.kill()
	}
}

func (r *run) running() []*worker {
	var out []*worker
	for _, w := range r.workers {
		if !w.exited() {
			out = append(out, w)
		}
	}
	return out
}

func (r *run) names() []string { return names(r.workers) }

func names(ws []*worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.name
	}
	return out
}
