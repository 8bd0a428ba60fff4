package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
)

// Config is one torture run.
type Config struct {
	// Dir is the run folder: the log, the journals, the consumers'
	// checkpoint folders and each child's stderr. It must be empty or not
	// exist; Run creates it.
	Dir string
	// Scenario is the consumers' pipeline, ScenarioPlain or
	// ScenarioPipeline, or ScenarioRelay: a relay to Kafka instead of the
	// consumers (ScenarioRelayExactlyOnce: exactly once), or ScenarioSlow: one slow consumer of a partition
	// written beforehand, without a publisher, or ScenarioScale: workers
	// of a consumer group on an in-process Kafka, without the log, or
	// ScenarioEOSKafka: such workers under stream.ExactlyOnce, with
	// faults drawn from the seed.
	Scenario string
	// Mode is the log's write path; zero means log.DefaultMode.
	Mode log.Mode
	// Kills is how many children to kill -9 (each is restarted at once).
	// In ScenarioSlow it is the most kills the consumer may take before it
	// must have reached the end of the partition; zero means 100 there.
	// In ScenarioScale it is the SIGKILLs of the schedule; zero means 3,
	// below zero none.
	Kills int
	// Seed seeds every random choice of the supervisor (which child, when)
	// and the seeds it gives the children; zero picks one at random. The
	// seed reproduces the choices, not the scheduling of the processes.
	Seed uint64
	// MinInterval and MaxInterval bound the random wait before each kill;
	// zero means 30 ms and 200 ms (200 ms and 1 s in ScenarioSlow).
	MinInterval, MaxInterval time.Duration
	// SegmentBytes is the publisher's segment size in bytes; zero means
	// 256 KiB, small enough that segments roll every couple of thousand
	// records, and kills land in rolls too.
	SegmentBytes int64
	// Rate is about how many records a second the publisher appends; zero
	// means 2000.
	Rate int
	// SampleEvery is how often the supervisor reads every position file;
	// zero means 5 ms (50 ms in ScenarioRelayExactlyOnce, where each
	// sample reads the positions topic from its start).
	SampleEvery time.Duration
	// CatchUp bounds the wait, after the publisher stopped, for the
	// consumers to save the high watermark; zero means 2 minutes. In
	// ScenarioScale it bounds how long the group's commits may stay
	// still before the run is reported stalled, and in
	// ScenarioEOSKafka too (zero means a minute there).
	CatchUp time.Duration
	// Command returns the command that runs Child(args): the torture
	// binary itself, or a test binary. Required.
	Command func(args ...string) *exec.Cmd
	// RelayCommand returns the command that runs examples/relay with args.
	// Required for ScenarioRelay and ScenarioRelayExactlyOnce.
	RelayCommand func(args ...string) *exec.Cmd
	// Progress, when not nil, receives a line every 50 kills.
	Progress io.Writer
	// Records is ScenarioSlow's partition size in records, written before
	// the consumer starts; zero means 5000. In ScenarioScale it is the
	// input records, sentinels excluded; zero means 120,000; in
	// ScenarioEOSKafka the same, zero meaning 400.
	Records int
	// RecordBytes is the size in bytes of each of those records' values;
	// zero means 100.
	RecordBytes int
	// Work is ScenarioSlow's handler time per record (a sleep); zero means
	// 1 ms.
	Work time.Duration
	// ProbeWork is the handler time per record of ScenarioSlow's
	// first-checkpoint probe; zero means 2 ms.
	ProbeWork time.Duration
	// Keys is ScenarioScale's number of distinct keys; zero means 1000
	// (16 in ScenarioEOSKafka).
	Keys int
	// ScalePartitions is ScenarioScale's input partition count; zero
	// means 12.
	ScalePartitions int
	// Members is ScenarioScale's membership schedule: how many workers
	// run, in turn; nil means 1, 3, 2, 3.
	Members []int
	// Stateless makes ScenarioScale's workers relay every record to the
	// output instead of counting windows: the check is then that every
	// input record reached the output at least once.
	Stateless bool
	// Faults is ScenarioEOSKafka's number of faults per run; zero
	// draws 3 to 5 from the seed.
	Faults int
	// FaultKinds are the kinds of fault ScenarioEOSKafka draws from
	// (EOSKafkaFaultKinds); nil means all of them.
	FaultKinds []string
	// PlantDuplicates plants a fault in ScenarioEOSKafka's workers:
	// they write every result twice, so the run must fail with every
	// result duplicated. Only the harness's own test sets it.
	PlantDuplicates bool
	// ForgetEvery, when above zero, plants a fault in the consumers: they
	// journal no finish of an offset divisible by it, so the run must fail
	// with losses and skips. Only the harness's own test sets it.
	ForgetEvery int64
}

func (c *Config) defaults() error {
	if c.Command == nil {
		return errors.New("torture: Config.Command is required")
	}
	if c.Dir == "" {
		return errors.New("torture: Config.Dir is required")
	}
	minWait, maxWait := 30*time.Millisecond, 200*time.Millisecond
	sample := 5 * time.Millisecond
	switch c.Scenario {
	case ScenarioPlain, ScenarioPipeline:
	case ScenarioRelay, ScenarioRelayExactlyOnce:
		if c.RelayCommand == nil {
			return fmt.Errorf("torture: scenario %s needs Config.RelayCommand", c.Scenario)
		}
		if c.Scenario == ScenarioRelayExactlyOnce {
			sample = 50 * time.Millisecond
		}
	case ScenarioSlow:
		// Issue 17's figures: 5,000 records of 100 B, 1 ms per record, a
		// kill every 0.2 to 1 s, at most 100 kills; the probe's 2 ms.
		minWait, maxWait = 200*time.Millisecond, time.Second
		if c.Kills <= 0 {
			c.Kills = 100
		}
		if c.Records <= 0 {
			c.Records = 5000
		}
		if c.RecordBytes <= 0 {
			c.RecordBytes = 100
		}
		if c.Work <= 0 {
			c.Work = time.Millisecond
		}
		if c.ProbeWork <= 0 {
			c.ProbeWork = 2 * time.Millisecond
		}
	case ScenarioEOSLog, ScenarioEOSKafkaLog:
		c.eosLogDefaults()
		minWait, maxWait = 0, 30*time.Millisecond
	case ScenarioScale:
		c.scaleDefaults()
		if slices.Min(c.Members) < 1 {
			return fmt.Errorf("torture: scenario scale: every step of Members needs a worker, got %v", c.Members)
		}
	case ScenarioEOSKafka:
		if err := c.eosKafkaDefaults(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("torture: unknown scenario %q (plain, pipeline, relay, relay-eos, slow, scale, eos-log, eos-kafka-log or eos-kafka)", c.Scenario)
	}
	if c.Mode == 0 {
		c.Mode = log.DefaultMode
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.MinInterval <= 0 {
		c.MinInterval = minWait
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = maxWait
	}
	if c.MaxInterval < c.MinInterval {
		return fmt.Errorf("torture: MaxInterval %v is below MinInterval %v", c.MaxInterval, c.MinInterval)
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 256 << 10
	}
	if c.Rate <= 0 {
		c.Rate = 2000
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = sample
	}
	if c.CatchUp <= 0 {
		c.CatchUp = 2 * time.Minute
	}
	return nil
}

// supervisor is the state of one Run.
type supervisor struct {
	cfg Config
	rng *rand.Rand
	sum *Summary

	children []*child // the publisher, then consumer 0, 1, 2 (or the relay)
	exits    chan exit

	mu    sync.Mutex // guards parts, pub and sum's counters below while sampling
	parts [Partitions]*partitionState
	pub   *publisherState

	scale    *scaleState    // ScenarioScale
	eosKafka *eosKafkaState // ScenarioEOSKafka

	cluster *kafkatest.Cluster // ScenarioRelay: the in-process Kafka
	kafka   *kafkaReader       // ScenarioRelay: RelayTopic read back
	back    *backState         // ScenarioRelay: BackTopic and the group's commits
	monitor *sink.KafkaSink    // ScenarioRelayExactlyOnce: reads the relay's committed positions, never begins
}

// Run runs a torture run: it creates the topic in cfg.Dir, starts the
// publisher and one consumer per partition (or the relay) as child
// processes, kills one of them with SIGKILL every MinInterval to
// MaxInterval and restarts it, cfg.Kills times, sampling every position
// file meanwhile; then it stops the publisher, waits for the consumers to
// catch up, stops them with SIGTERM, and checks the log and the journals.
// The Summary is returned also on failure, as far as the run got; the
// error is a *ViolationError listing every violation when the run broke a
// rule, or names what stopped the harness itself (a child that exited by
// itself, a consumer that did not catch up within CatchUp).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &supervisor{
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x746f7274757265)),
		sum:   &Summary{Scenario: cfg.Scenario, Mode: cfg.Mode, Seed: cfg.Seed, Dir: cfg.Dir},
		exits: make(chan exit, 8),
		pub:   &publisherState{t: tailer{path: ackJournalPath(cfg.Dir)}, inFlight: make(map[string]bool)},
	}
	s.sum.started = time.Now()
	err := s.run(ctx)
	s.sum.Took = time.Since(s.sum.started)
	if err != nil {
		return s.sum, err
	}
	if len(s.sum.Violations) > 0 {
		return s.sum, &ViolationError{Seed: cfg.Seed, Violations: s.sum.Violations}
	}
	return s.sum, nil
}

func (s *supervisor) run(ctx context.Context) error {
	if s.cfg.Scenario == ScenarioSlow {
		return s.runSlow(ctx)
	}
	if s.cfg.Scenario == ScenarioScale {
		return s.runScale(ctx)
	}
	if s.cfg.Scenario == ScenarioEOSKafka {
		return s.runEOSKafka(ctx)
	}
	if s.cfg.Scenario == ScenarioEOSLog || s.cfg.Scenario == ScenarioEOSKafkaLog {
		return s.runEOSLog(ctx)
	}
	defer func() {
		if s.kafka != nil {
			s.kafka.close()
		}
		if s.back != nil {
			s.back.close()
		}
		if s.monitor != nil {
			s.monitor.Close()
		}
		if s.cluster != nil {
			s.cluster.Close()
		}
	}()
	if err := s.setup(); err != nil {
		return err
	}
	defer s.killAll()
	for _, c := range s.children {
		if err := s.start(c); err != nil {
			return err
		}
	}
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go s.sampler(stopSampler, samplerDone)
	err := s.warmUp(ctx)
	if err == nil {
		err = s.killLoop(ctx)
	}
	if err == nil {
		err = s.finish(ctx)
	}
	close(stopSampler)
	<-samplerDone
	if err != nil {
		return err
	}
	return s.check()
}

// setup makes the run folder and the topic.
func (s *supervisor) setup() error {
	dir := s.cfg.Dir
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("torture: run folder %s is not empty", dir)
	}
	eos := s.cfg.Scenario == ScenarioRelayExactlyOnce
	relay := s.cfg.Scenario == ScenarioRelay || eos
	if relay {
		if err := os.MkdirAll(filepath.Join(relayDir(dir), "state"), 0o755); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		kc, err := kafkatest.Start(kafkatest.Partitions(Partitions), kafkatest.Topics(RelayTopic),
			kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(backSession/3)))
		if err != nil {
			return fmt.Errorf("torture: start the in-process Kafka: %w", err)
		}
		s.cluster = kc
		if s.kafka, err = newKafkaReader(kc.Brokers(), eos); err != nil {
			return err
		}
		if eos {
			// Load before BeginTransactions reads the committed
			// positions from the positions topic each time, and fences
			// nobody.
			if s.monitor, err = sink.Kafka(kc.Brokers(), RelayTopic, sink.KafkaTransactionalID(RelayTransactionalID)); err != nil {
				return fmt.Errorf("torture: %w", err)
			}
		}
	}
	for p := range int32(Partitions) {
		st := &partitionState{p: p, who: fmt.Sprintf("consumer-%d", p)}
		sdir := stateDir(dir, p)
		if relay {
			st.who = "the relay"
			st.src, sdir = kafkaView{s.kafka, p}, filepath.Join(relayDir(dir), "state")
		} else {
			st.src = &tailer{path: handledJournalPath(dir, p)}
		}
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		if eos {
			st.store = s.monitor
		} else {
			store, err := checkpoint.NewFileStore(sdir)
			if err != nil {
				return fmt.Errorf("torture: %w", err)
			}
			st.store = store
		}
		s.parts[p] = st
	}
	lg, err := log.Open(logDir(dir), log.CreateIfMissing(), log.WithMode(s.cfg.Mode), log.WithSegmentBytes(s.cfg.SegmentBytes))
	if err != nil {
		return fmt.Errorf("torture: create the log: %w", err)
	}
	if _, err := lg.CreateTopic(Topic, Partitions); err != nil {
		lg.Close()
		return fmt.Errorf("torture: create the topic: %w", err)
	}
	if err := lg.Close(); err != nil {
		return fmt.Errorf("torture: close the log after creating the topic: %w", err)
	}
	s.children = append(s.children, &child{name: "publisher", role: rolePublisher, partition: -1})
	if eos {
		s.children = append(s.children, &child{name: "relay", role: roleRelay, partition: -1})
		return nil
	}
	if relay {
		if s.back, err = newBackState(dir); err != nil {
			return err
		}
		s.children = append(s.children,
			&child{name: "relay", role: roleRelay, partition: -1},
			&child{name: "relay-back", role: roleRelayBack, partition: -1})
		return nil
	}
	for p := range int32(Partitions) {
		s.children = append(s.children, &child{name: fmt.Sprintf("consumer-%d", p), role: roleConsumer, partition: p})
	}
	return nil
}

// violate records a violation.
func (s *supervisor) violate(format string, args ...any) {
	s.sum.Violations = append(s.sum.Violations, fmt.Sprintf(format, args...))
}

// warmUp waits until the publisher has been acked a record in every
// partition, so that the first kill lands in a running system rather than
// in the children's first start (later kills may land in a start: a
// restarted child is as eligible as any).
func (s *supervisor) warmUp(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		err := s.advancePublisher()
		var seen [Partitions]bool
		n := 0
		for _, a := range s.pub.acks {
			if a.partition >= 0 && a.partition < Partitions && !seen[a.partition] {
				seen[a.partition] = true
				n++
			}
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if n == Partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("torture: the publisher was not acked a record in every partition within 30s of its start (see %s)", filepath.Join(s.cfg.Dir, "publisher.stderr"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case e := <-s.exits:
			s.mu.Lock()
			s.exited(e)
			s.mu.Unlock()
			return fmt.Errorf("torture: %s exited by itself: %v (see %s)", e.c.name, e.err, filepath.Join(s.cfg.Dir, e.c.name+".stderr"))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// killLoop kills and restarts children until cfg.Kills kills.
func (s *supervisor) killLoop(ctx context.Context) error {
	for s.sum.Kills() < s.cfg.Kills {
		wait := s.cfg.MinInterval + time.Duration(s.rng.Int64N(int64(s.cfg.MaxInterval-s.cfg.MinInterval)+1))
		timer := time.NewTimer(wait)
	sleep:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("torture: %w", ctx.Err())
			case e := <-s.exits:
				s.mu.Lock()
				s.exited(e)
				s.mu.Unlock()
				timer.Stop()
				return fmt.Errorf("torture: %s exited by itself: %v (see %s)", e.c.name, e.err, filepath.Join(s.cfg.Dir, e.c.name+".stderr"))
			case <-timer.C:
				break sleep
			}
		}
		c := s.children[s.rng.IntN(len(s.children))]
		if err := s.kill(c); err != nil {
			return err
		}
		if p := s.cfg.Progress; p != nil && s.sum.Kills()%50 == 0 {
			fmt.Fprintf(p, "torture: %s: %d kills of %d, %v\n", s.cfg.Scenario, s.sum.Kills(), s.cfg.Kills, time.Since(s.startTime()).Round(time.Second))
		}
	}
	return nil
}

func (s *supervisor) startTime() time.Time { return s.sum.started }

// kill sends SIGKILL to c, waits for it to be gone, reads what its journal
// says it was doing, samples a consumer's position before anything else
// can change it, and restarts it.
func (s *supervisor) kill(c *child) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.signalled = true
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("torture: kill %s: %w", c.name, err)
	}
	if _, ok := s.wait(c, 30*time.Second); !ok {
		return fmt.Errorf("torture: %s did not exit within 30s of SIGKILL", c.name)
	}
	switch c.role {
	case rolePublisher:
		s.sum.PublisherKills++
		n, err := s.publisherKilled()
		if err != nil {
			return err
		}
		if n > 0 {
			s.sum.PublisherKillsMidAppend++
		}
	case roleRelay:
		s.sum.RelayKills++
		for _, st := range s.parts {
			if err := s.samplePosition(st, "right after the relay was killed"); err != nil {
				return err
			}
		}
	case roleRelayBack:
		s.sum.BackKills++
		if err := s.sampleCommits("right after the relay back was killed"); err != nil {
			return err
		}
	default:
		s.sum.ConsumerKills++
		st := s.parts[c.partition]
		if err := s.samplePosition(st, "right after its consumer was killed"); err != nil {
			return err
		}
		switch st.last {
		case kindSave:
			s.sum.KillsMidSave++
		case kindHandled, kindFiltered:
			s.sum.KillsMidBatch++
		default:
			s.sum.KillsOther++
		}
	}
	s.sum.Restarts++
	return s.start(c)
}

// sampler samples every position file every cfg.SampleEvery until stop is
// closed.
func (s *supervisor) sampler(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(s.cfg.SampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		for _, st := range s.parts {
			if err := s.samplePosition(st, "while running"); err != nil {
				s.violate("%v", err)
			}
		}
		if s.back != nil {
			if err := s.sampleCommits("while running"); err != nil {
				s.violate("%v", err)
			}
		}
		s.mu.Unlock()
	}
}

// finish stops the publisher, waits until every consumer saved its
// partition's high watermark, and stops the consumers; each must exit 0.
func (s *supervisor) finish(ctx context.Context) error {
	pub := s.children[0]
	if err := s.terminate(ctx, pub); err != nil {
		return err
	}
	s.mu.Lock()
	err, ok := s.wait(pub, 30*time.Second)
	s.mu.Unlock()
	if !ok {
		return errors.New("torture: the publisher did not exit within 30s of SIGTERM")
	}
	if err != nil {
		s.mu.Lock()
		s.violate("the publisher's clean stop failed: %v (see publisher.stderr)", err)
		s.mu.Unlock()
	}
	hw, err := highWatermarks(s.cfg.Dir)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.CatchUp)
	for p := range int32(Partitions) {
		st := s.parts[p]
		for {
			s.mu.Lock()
			err := s.samplePosition(st, "while catching up")
			pos, found := st.pos, st.found
			s.mu.Unlock()
			if err != nil {
				return err
			}
			if hw[p] == 0 || (found && pos >= hw[p]) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("torture: partition %d: %s did not catch up within %v: position %d (found %v), high watermark %d", p, st.who, s.cfg.CatchUp, pos, found, hw[p])
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("torture: %w", ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for s.back != nil {
		s.mu.Lock()
		err := s.kafka.sync()
		if err == nil {
			err = s.sampleCommits("while catching up")
		}
		done := err == nil && s.caughtUpBack()
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			committed := fmt.Sprint(s.back.committed)
			group := s.describeBackGroup()
			s.dumpStacks()
			return fmt.Errorf("torture: the relay back did not commit all of %s within %v: commits %v; group %s (the relays' goroutines are dumped at the end of relay.stderr and relay-back.stderr)", RelayTopic, s.cfg.CatchUp, committed, group)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, c := range s.children[1:] {
		if err := s.terminate(ctx, c); err != nil {
			return err
		}
	}
	for _, c := range s.children[1:] {
		s.mu.Lock()
		err, ok := s.wait(c, 30*time.Second)
		if ok && err != nil {
			s.violate("%s's clean stop failed: %v (see %s.stderr)", c.name, err, c.name)
		}
		s.mu.Unlock()
		if !ok {
			return fmt.Errorf("torture: %s did not exit within 30s of SIGTERM", c.name)
		}
	}
	return nil
}

// highWatermarks opens the log read-only and returns each partition's next
// offset.
func highWatermarks(dir string) ([Partitions]int64, error) {
	var hw [Partitions]int64
	lg, err := log.Open(logDir(dir), log.ReadOnly())
	if err != nil {
		return hw, fmt.Errorf("torture: open the log read-only: %w", err)
	}
	defer lg.Close()
	t, err := lg.Topic(Topic)
	if err != nil {
		return hw, fmt.Errorf("torture: %w", err)
	}
	for p := range int32(Partitions) {
		part, err := t.Partition(p)
		if err != nil {
			return hw, fmt.Errorf("torture: %w", err)
		}
		hw[p] = part.HighWatermark()
	}
	return hw, nil
}
