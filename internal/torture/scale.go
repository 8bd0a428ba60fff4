package torture

// Scenario scale, the supervisor's side: issue 18's churn case. See the
// package doc, "Scenario scale".

import (
	"context"
	"errors"
	"fmt"
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

// ScenarioScale is issue 18's churn case: a keyed tumbling-window count
// over a Kafka topic of ScalePartitions partitions, run by worker processes
// of one consumer group that join, leave, and are killed with SIGKILL by a
// seeded schedule; every (window, key) result emitted must carry the count
// computed from the records, and every one must be emitted.
const ScenarioScale = "scale"

// The Kafka names of scenario scale, on the in-process Kafka the
// supervisor runs.
const (
	ScaleInput  = "scale-in"   // the records, ScalePartitions partitions
	ScaleOutput = "scale-out"  // the window results (or the relayed records)
	ScaleLate   = "scale-late" // the window's late records (LateTo)
	ScaleGroup  = "scale"      // the workers' consumer group
)

// The workers' group timings. A SIGKILLed member holds its partitions
// until its session expires, and with the kfake this project tests with
// the rebalance that follows waits the whole rebalance timeout (see
// backRebalance): 2 s each bounds a kill's pause to about 4 s, and 2 s is
// long enough that a loaded 2-core machine does not miss heartbeats
// (every 200 ms).
const (
	scaleSession   = 2 * time.Second
	scaleRebalance = 2 * time.Second
)

// scalePoll is how often the supervisor samples the group's commits, and
// scaleQuiet how long the output must stay the same after every partition
// was committed to its end before the workers are stopped: results are
// emitted when the sentinels are absorbed and written at once, and a
// commit is taken after that, so they reach Kafka well within it.
const (
	scalePoll  = 20 * time.Millisecond
	scaleQuiet = time.Second
)

// scaleEventDelay bounds the seeded wait between producing a chunk and
// the event that follows it: a worker reads a chunk within tens of
// milliseconds and commits every 200 ms (the default checkpoint
// interval), so an event within 150 ms finds records read and not yet
// committed.
const scaleEventDelay = 150 * time.Millisecond

// maxScaleCrashes bounds the workers' own exits (each a violation, after
// which the slot is started again) before the run gives up.
const maxScaleCrashes = 20

// scaleEvent is one step of the schedule: when the group has committed at
// least at records (summed over partitions), the membership changes to
// members workers, or (members == 0) a running worker is killed.
type scaleEvent struct {
	at      int64
	members int
}

// scaleState is what the supervisor keeps of a scale run.
type scaleState struct {
	cluster *kafkatest.Cluster
	adm     *kadm.Client
	admCl   *kgo.Client
	prod    *scaleProducer
	data    *scaleData
	rep     *ScaleReport

	events    []scaleEvent
	committed map[int32]int64 // the group's commits as last sampled
	lastErr   error           // the last failed request to Kafka, for a stall's message
	lastGroup string          // the group as last described, for a stall's message
}

// scaleDefaults fills in scenario scale's defaults.
func (c *Config) scaleDefaults() {
	if c.Records <= 0 {
		c.Records = 120_000
	}
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if c.ScalePartitions <= 0 {
		c.ScalePartitions = 12
	}
	if len(c.Members) == 0 {
		c.Members = []int{1, 3, 2, 3}
	}
	switch {
	case c.Kills == 0:
		c.Kills = 3
	case c.Kills < 0:
		c.Kills = 0 // none: the uninterrupted baseline
	}
}

// scaleWorkerArgs are a worker's arguments for its next incarnation.
func (s *supervisor) scaleWorkerArgs(c *child) []string {
	args := []string{roleScaleWorker,
		"--brokers", strings.Join(s.scale.cluster.Brokers(), ","),
		"--home", filepath.Join(s.cfg.Dir, c.name),
		"--name", workerName(c),
		"--inc", strconv.Itoa(c.inc),
		"--ready", s.readyPath(c),
		"--window", scaleWindow.String(),
		"--out-of-orderness", scaleOutOfOrderness.String(),
		"--session-timeout", scaleSession.String(),
		"--rebalance-timeout", scaleRebalance.String(),
	}
	if s.cfg.Stateless {
		args = append(args, "--stateless")
	}
	return args
}

// runScale runs scenario scale: it starts the in-process Kafka, produces
// the records as the group keeps up, drives the membership schedule and
// the kills, waits until every partition is committed to its end and the
// output is quiet, stops the workers with SIGTERM and checks the output.
// A group whose commits stop advancing for CatchUp is a violation, and
// the output is checked all the same.
func (s *supervisor) runScale(ctx context.Context) error {
	if err := s.setupScale(); err != nil {
		return err
	}
	defer s.closeScale()
	defer s.killAll()
	if err := s.driveScale(ctx); err != nil {
		return err
	}
	if err := s.stopScaleWorkers(ctx); err != nil {
		return err
	}
	return s.checkScale(ctx)
}

// setupScale makes the run folder, starts Kafka with the three topics,
// generates the records and plans the schedule.
func (s *supervisor) setupScale() error {
	dir := s.cfg.Dir
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("torture: run folder %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	rep := &ScaleReport{
		Stateless: s.cfg.Stateless, Records: s.cfg.Records, Keys: s.cfg.Keys, Partitions: s.cfg.ScalePartitions,
		Members: s.cfg.Members, KillsPlanned: s.cfg.Kills,
		Window: scaleWindow, OutOfOrderness: scaleOutOfOrderness, Disorder: scaleDisorder,
	}
	s.sum.Scale = rep
	sc := &scaleState{rep: rep, committed: make(map[int32]int64)}
	s.scale = sc
	kc, err := kafkatest.Start(kafkatest.Partitions(s.cfg.ScalePartitions), kafkatest.Topics(ScaleInput, ScaleOutput, ScaleLate),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("torture: scale: start the in-process Kafka: %w", err)
	}
	sc.cluster = kc
	if sc.admCl, err = kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...)); err != nil {
		return fmt.Errorf("torture: scale: admin client: %w", err)
	}
	sc.adm = kadm.NewClient(sc.admCl)
	if sc.prod, err = newScaleProducer(kc.Brokers(), ScaleInput); err != nil {
		return err
	}
	sc.data = genScaleData(s.cfg.Seed, s.cfg.Records, s.cfg.Keys)
	sc.events = s.planScale()
	for slot := range slices.Max(s.cfg.Members) {
		c := &child{name: fmt.Sprintf("worker-%d", slot), role: roleScaleWorker, partition: int32(slot)}
		if err := os.MkdirAll(filepath.Join(dir, c.name, "state"), 0o755); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		s.children = append(s.children, c)
	}
	return nil
}

func (s *supervisor) closeScale() {
	sc := s.scale
	if sc.prod != nil {
		sc.prod.close()
	}
	if sc.admCl != nil {
		sc.admCl.Close()
	}
	if sc.cluster != nil {
		sc.cluster.Close()
	}
}

// planScale draws the schedule from the seed: the i-th membership change
// (of Members[1:]) when the group has committed about i/len(Members) of
// the records (give or take a quarter of that share), and Kills kills
// anywhere between 5% and 95% of them.
func (s *supervisor) planScale() []scaleEvent {
	n, l := int64(s.cfg.Records), int64(len(s.cfg.Members))
	var evs []scaleEvent
	for i, m := range s.cfg.Members[1:] {
		at := n*int64(i+1)/l + s.rng.Int64N(n/(2*l)+1) - n/(4*l)
		evs = append(evs, scaleEvent{at: at, members: m})
	}
	for range s.cfg.Kills {
		evs = append(evs, scaleEvent{at: n/20 + s.rng.Int64N(n*9/10+1)})
	}
	slices.SortStableFunc(evs, func(a, b scaleEvent) int { return int(a.at - b.at) })
	return evs
}

// driveScale produces the records at most a twentieth of them ahead of the
// group's commits (so that every change of membership and every kill
// lands while records flow), fires the schedule's events as the commits
// pass them, produces the sentinels once every event fired, and returns
// once every partition is committed to its end and the output stayed the
// same for scaleQuiet (or the commits stalled: a violation).
func (s *supervisor) driveScale(ctx context.Context) error {
	sc := s.scale
	n := int64(s.cfg.Records)
	ahead := max(n/20, 100)
	chunk := max(ahead/4, 1)
	gap := n / int64(10*(len(sc.events)+1))
	if err := s.setMembers(ctx, s.cfg.Members[0], 0); err != nil {
		return err
	}
	var produced int64
	sentinels := false
	lastCommitted, lastChange := int64(-1), time.Now()
	lastEventAt := -gap
	for {
		if err := s.reviveScale(); err != nil {
			return err
		}
		committed := s.sampleScale(ctx)
		if committed != lastCommitted {
			lastCommitted, lastChange = committed, time.Now()
		}
		if time.Since(lastChange) > s.cfg.CatchUp {
			sc.rep.Stalled = true
			s.violate("scale: the group's commits did not advance for %v: %d of %d records committed (%s); %d events of the schedule not fired; the group when last described: %s; last error asking Kafka: %v (see worker-*.stderr)",
				s.cfg.CatchUp, committed, n+int64(s.cfg.ScalePartitions)*boolInt(sentinels), s.commitsString(), len(sc.events), sc.lastGroup, sc.lastErr)
			return nil
		}
		// One event at a time, each once the group settled after the
		// last (so a kill lands on a worker that owns partitions, not on
		// one still joining) and the commits moved on by gap since it (at
		// the end of the records, when they can no longer move, at once).
		// The workers keep up with the records, so, for the event to land
		// while they handle records not yet committed, a chunk is produced
		// first and the event follows it by up to scaleEventDelay.
		if len(sc.events) > 0 && committed >= sc.events[0].at && (committed >= lastEventAt+gap || produced == n && committed >= n) {
			if owners, ok := s.groupSettled(ctx); ok {
				ev := sc.events[0]
				sc.events = sc.events[1:]
				lastEventAt = committed
				if produced < n {
					to := min(produced+chunk, n)
					if err := sc.prod.produce(ctx, sc.data, int(produced), int(to)); err != nil {
						return err
					}
					produced = to
				}
				if err := s.pauseScale(ctx, time.Duration(s.rng.Int64N(int64(scaleEventDelay)+1))); err != nil {
					return err
				}
				if err := s.fireScale(ctx, ev, committed, owners); err != nil {
					return err
				}
				continue
			}
		}
		for produced < n && produced-committed < ahead {
			to := min(produced+chunk, n)
			if err := sc.prod.produce(ctx, sc.data, int(produced), int(to)); err != nil {
				return err
			}
			produced = to
		}
		if produced == n && len(sc.events) == 0 && !sentinels {
			if err := sc.prod.produceSentinels(ctx, sc.data, s.cfg.ScalePartitions); err != nil {
				return err
			}
			sentinels = true
			sc.rep.note(s.sum, committed, n, "every record produced and every event fired: one sentinel per partition, event time +1h")
		}
		if sentinels && s.committedToEnd() {
			sc.rep.note(s.sum, committed, n, "every partition committed to its end")
			return s.awaitQuietOutput(ctx)
		}
		if err := s.pauseScale(ctx, scalePoll); err != nil {
			return err
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// pauseScale waits d, restarting any worker that exits by itself
// meanwhile (a violation).
func (s *supervisor) pauseScale(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case e := <-s.exits:
			if err := s.scaleExited(e); err != nil {
				return err
			}
		case <-timer.C:
			return nil
		}
	}
}

// scaleExited records a worker's exit; one the supervisor did not cause
// is a violation (exited), and the slot starts again.
func (s *supervisor) scaleExited(e exit) error {
	s.exited(e)
	return s.reviveScale()
}

// reviveScale starts again every slot whose worker exited without being
// signalled (seen here or by a wait for another worker).
func (s *supervisor) reviveScale() error {
	for _, c := range s.children {
		if c.cmd == nil || c.running || c.signalled {
			continue
		}
		s.sum.Scale.Crashes++
		if s.sum.Scale.Crashes > maxScaleCrashes {
			return fmt.Errorf("torture: scale: workers exited by themselves %d times (see worker-*.stderr)", s.sum.Scale.Crashes)
		}
		s.sum.Restarts++
		if err := s.start(c); err != nil {
			return err
		}
	}
	return nil
}

// sampleScale fetches the group's commits and returns their sum; a failed
// fetch keeps the last ones (a stall reports the error).
func (s *supervisor) sampleScale(ctx context.Context) int64 {
	sc := s.scale
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := sc.adm.FetchOffsets(fctx, ScaleGroup)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		// Nobody joined yet: no commits.
	case err != nil:
		sc.lastErr = err
	default:
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == ScaleInput && o.Err == nil && o.At >= 0 {
				sc.committed[o.Partition] = o.At
			}
		})
	}
	var sum int64
	for _, at := range sc.committed {
		sum += at
	}
	return sum
}

// committedToEnd reports whether every partition's commit is its end
// offset (sentinel included).
func (s *supervisor) committedToEnd() bool {
	sc := s.scale
	for p := range int32(s.cfg.ScalePartitions) {
		if sc.committed[p] < sc.prod.ends[p] {
			return false
		}
	}
	return true
}

// commitsString lists each partition's commit and end offset.
func (s *supervisor) commitsString() string {
	sc := s.scale
	var b strings.Builder
	for p := range int32(s.cfg.ScalePartitions) {
		if p > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "p%d %d/%d", p, sc.committed[p], sc.prod.ends[p])
	}
	return b.String()
}

// fireScale changes the membership or kills a running worker (chosen
// from the seed) and starts its replacement in the same slot: the same
// folder, as a restarted pod keeps its volume.
func (s *supervisor) fireScale(ctx context.Context, ev scaleEvent, committed int64, owners map[string]bool) error {
	if ev.members > 0 {
		return s.setMembers(ctx, ev.members, committed)
	}
	running := slices.DeleteFunc(s.runningWorkers(), func(c *child) bool { return !owners[workerName(c)] })
	if len(running) == 0 {
		return nil
	}
	c := running[s.rng.IntN(len(running))]
	c.signalled = true
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("torture: kill %s: %w", c.name, err)
	}
	if _, ok := s.wait(c, 30*time.Second); !ok {
		return fmt.Errorf("torture: %s did not exit within 30s of SIGKILL", c.name)
	}
	s.sum.ConsumerKills++
	s.sum.Scale.Kills++
	s.sum.Restarts++
	old := c.inc
	if err := s.start(c); err != nil {
		return err
	}
	s.sum.Scale.note(s.sum, committed, int64(s.cfg.Records), fmt.Sprintf("SIGKILL w%d.%d, replaced by w%d.%d", c.partition, old, c.partition, c.inc))
	return nil
}

// groupSettled describes the group and reports whether it is Stable with
// as many members as workers run, each assigned partitions; owners are
// their names (ClientIDs).
func (s *supervisor) groupSettled(ctx context.Context) (owners map[string]bool, ok bool) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := s.scale.adm.DescribeGroups(dctx, ScaleGroup)
	if err != nil {
		s.scale.lastErr = err
		return nil, false
	}
	g, found := groups[ScaleGroup]
	if !found || g.Err != nil {
		s.scale.lastGroup = fmt.Sprintf("not described (%v)", g.Err)
		return nil, false
	}
	var names []string
	for _, m := range g.Members {
		names = append(names, m.ClientID)
	}
	s.scale.lastGroup = fmt.Sprintf("%s, members %v, %d workers running", g.State, names, len(s.runningWorkers()))
	if g.State != "Stable" || len(g.Members) != len(s.runningWorkers()) {
		return nil, false
	}
	owners = make(map[string]bool)
	for _, m := range g.Members {
		a, isConsumer := m.Assigned.AsConsumer()
		if !isConsumer || len(a.Topics) == 0 {
			return nil, false
		}
		owners[m.ClientID] = true
	}
	return owners, true
}

// workerName is the name of c's current incarnation: "w<slot>.<inc>",
// its Kafka client ID and what its results name.
func workerName(c *child) string { return fmt.Sprintf("w%d.%d", c.partition, c.inc) }

// runningWorkers returns the slots whose worker runs.
func (s *supervisor) runningWorkers() []*child {
	var out []*child
	for _, c := range s.children {
		if c.running {
			out = append(out, c)
		}
	}
	return out
}

// setMembers starts stopped slots (lowest first) or stops running
// workers (chosen from the seed) with SIGTERM until m run; a stopped
// worker must exit 0 (it drains, commits and leaves the group).
func (s *supervisor) setMembers(ctx context.Context, m int, committed int64) error {
	running := s.runningWorkers()
	var did []string
	for len(running) < m {
		for _, c := range s.children {
			if c.running {
				continue
			}
			if err := s.start(c); err != nil {
				return err
			}
			s.sum.Scale.Joins++
			did = append(did, "start "+workerName(c))
			running = append(running, c)
			break
		}
	}
	for len(running) > m {
		i := s.rng.IntN(len(running))
		c := running[i]
		running = slices.Delete(running, i, i+1)
		if err := s.stopWorker(ctx, c); err != nil {
			return err
		}
		s.sum.Scale.Leaves++
		did = append(did, "SIGTERM "+workerName(c))
	}
	s.sum.Scale.note(s.sum, committed, int64(s.cfg.Records), fmt.Sprintf("%d workers: %s", m, strings.Join(did, ", ")))
	return nil
}

// stopWorker sends c SIGTERM once it handles it and waits for its exit,
// which must be clean.
func (s *supervisor) stopWorker(ctx context.Context, c *child) error {
	if err := s.terminate(ctx, c); err != nil {
		return err
	}
	err, ok := s.wait(c, 30*time.Second)
	if !ok {
		return fmt.Errorf("torture: %s did not exit within 30s of SIGTERM (see %s.stderr)", c.name, c.name)
	}
	if err != nil {
		s.violate("%s's clean stop failed: %v (see %s.stderr)", c.name, err, c.name)
	}
	return nil
}

// awaitQuietOutput waits until the output topic's end offsets stayed the
// same for scaleQuiet: the results the sentinels closed are written.
func (s *supervisor) awaitQuietOutput(ctx context.Context) error {
	var last kadm.ListedOffsets
	since := time.Now()
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ends, err := s.scale.adm.ListEndOffsets(lctx, ScaleOutput)
		cancel()
		if err != nil {
			return fmt.Errorf("torture: scale: list the end offsets of %s: %w", ScaleOutput, err)
		}
		if !sameEnds(last, ends) {
			last, since = ends, time.Now()
		} else if time.Since(since) >= scaleQuiet {
			return nil
		}
		if err := s.pauseScale(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func sameEnds(a, b kadm.ListedOffsets) bool {
	if a == nil || b == nil {
		return false
	}
	same := true
	b.Each(func(o kadm.ListedOffset) {
		if x, ok := a.Lookup(o.Topic, o.Partition); !ok || x.Offset != o.Offset || x.Err != nil || o.Err != nil {
			same = false
		}
	})
	return same
}

// stopScaleWorkers stops every running worker with SIGTERM; each must
// exit 0.
func (s *supervisor) stopScaleWorkers(ctx context.Context) error {
	for _, c := range s.runningWorkers() {
		if err := s.terminate(ctx, c); err != nil {
			return err
		}
	}
	for _, c := range s.children {
		if !c.signalled || !c.running {
			continue
		}
		err, ok := s.wait(c, 30*time.Second)
		if !ok {
			return fmt.Errorf("torture: %s did not exit within 30s of SIGTERM (see %s.stderr)", c.name, c.name)
		}
		if err != nil {
			s.violate("%s's clean stop failed: %v (see %s.stderr)", c.name, err, c.name)
		}
	}
	return nil
}
