package torture

// Scenario eos-kafka, the supervisor's side: issue 19's seeded fault runs of an
// exactly-once Kafka -> window -> Kafka pipeline. See the package doc,
// "Scenario eos-kafka".

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/kafkatest"
)

// ScenarioEOSKafka is issue 19's fault run: a keyed tumbling-window
// count from one Kafka topic to another under stream.ExactlyOnce, on
// worker processes of one consumer group, with faults drawn from the
// seed (SIGKILLs, members joining and leaving, and Kafka requests
// answered with errors, dropped or delayed); every window's result must
// be in the output, read with read_committed, exactly once, in order, with
// the count an uninterrupted computation gives.
const ScenarioEOSKafka = "eos-kafka"

// The Kafka names of scenario eos-kafka, on the in-process Kafka the supervisor
// runs.
const (
	EOSKafkaInput  = "eos-kafka-in"   // the records, eosPartitions partitions
	EOSKafkaOutput = "eos-kafka-out"  // the window results
	EOSKafkaLate   = "eos-kafka-late" // the window's late records (LateTo): none expected
	EOSKafkaGroup  = "eos-kafka"      // the workers' consumer group
)

// eosPartitions is the partition count of scenario eos-kafka's topics, and
// eosSlots its worker slots: slot 0 runs from the start, slot 1 joins and
// leaves (FaultRebalance).
const (
	eosPartitions = 4
	eosSlots      = 2
)

// The workers' group timings: a killed member holds its partitions until
// its session expires (or the rebalance that its replacement's join
// starts gives up on it), so 1 s bounds a kill's pause to about a second,
// and heartbeats every 100 ms leave a loaded machine nine chances.
const (
	eosSession   = time.Second
	eosRebalance = time.Second
)

// eosFireWait bounds how long an armed broker fault waits for the request
// it answers (a worker sends one within a transaction interval of the
// chunk it answers, or a heartbeat interval); one that did not fire by
// then is disarmed and counted.
const eosFireWait = 10 * time.Second

// eosPoll is how often the supervisor samples the group's commits while
// it waits on them.
const eosPoll = 10 * time.Millisecond

// eosGhostAfter is how long the group's commits may stay still before the
// supervisor looks for ghosts: members of killed incarnations that the
// in-process Kafka keeps. kfake starts a member's session timer when the
// response to its JoinGroup is delivered, so a worker killed with its
// JoinGroup in flight stays a member, with its partitions, for good, where
// Kafka expires it after its session timeout (1 s here). The supervisor
// then does what Kafka would, with a LeaveGroup naming the ghost.
const eosGhostAfter = 3 * eosSession

// eosSettleWait bounds how long a kill waits for the group to settle
// (Stable, every running worker a member with partitions) before the
// chunk it follows is produced. The kill then lands while the chunk is
// read, counted, written or committed, not in a join: kfake mishandles
// members killed in their JoinGroup or SyncGroup (a ghost, see
// eosGhostAfter; or a JoinGroup of a live member never answered, which
// leaves it stuck with a transaction open until the transaction timeout).
const eosSettleWait = 5 * time.Second

// maxEOSKafkaCrashes bounds the workers' own exits before the run gives up.
const maxEOSKafkaCrashes = 10

// eosKafkaState is what the supervisor keeps of an eos run.
type eosKafkaState struct {
	cluster *kafkatest.Cluster
	admCl   *kgo.Client
	adm     *kadm.Client
	prod    *scaleProducer
	data    *scaleData
	watch   *brokerWatch
	faults  []eosFault
	rep     *EOSKafkaReport

	committed map[int32]int64
	lastErr   error
	lastGroup string // the group as last described, for a note
}

// eosKafkaDefaults fills in scenario eos-kafka's defaults.
func (c *Config) eosKafkaDefaults() error {
	if c.Records <= 0 {
		c.Records = 400
	}
	if c.Keys <= 0 {
		c.Keys = 16
	}
	if c.CatchUp <= 0 {
		c.CatchUp = time.Minute
	}
	return faultKindsValid(c.FaultKinds)
}

// eosKafkaTxnID is the transactional id of a worker slot, the same for each of
// its incarnations.
func eosKafkaTxnID(slot int32) string { return fmt.Sprintf("%s-slot-%d", EOSKafkaGroup, slot) }

// eosKafkaWorkerArgs are a worker's arguments for its next incarnation.
func (s *supervisor) eosKafkaWorkerArgs(c *child) []string {
	args := []string{roleEOSKafkaWorker,
		"--brokers", strings.Join(s.eosKafka.cluster.Brokers(), ","),
		"--home", filepath.Join(s.cfg.Dir, c.name),
		"--name", workerName(c),
		"--txn-id", eosKafkaTxnID(c.partition),
		"--inc", strconv.Itoa(c.inc),
		"--ready", s.readyPath(c),
		"--window", scaleWindow.String(),
		"--out-of-orderness", scaleOutOfOrderness.String(),
		"--session-timeout", eosSession.String(),
		"--rebalance-timeout", eosRebalance.String(),
	}
	if s.cfg.PlantDuplicates {
		args = append(args, "--plant-duplicates")
	}
	return args
}

// runEOSKafka runs scenario eos-kafka: it starts the in-process Kafka, produces the
// records in chunks, one fault after each chunk but the first, waits
// after each until the group committed every record produced, produces
// one sentinel per partition that closes every window, stops the workers
// with SIGTERM and checks the output.
func (s *supervisor) runEOSKafka(ctx context.Context) error {
	if err := s.setupEOSKafka(); err != nil {
		return err
	}
	defer s.closeEOSKafka()
	defer s.killAll()
	if err := s.driveEOSKafka(ctx); err != nil {
		return err
	}
	if err := s.stopEOSKafkaWorkers(ctx); err != nil {
		return err
	}
	return s.checkEOSKafka(ctx)
}

// setupEOSKafka makes the run folder, starts Kafka with the three topics,
// generates the records and draws the faults.
func (s *supervisor) setupEOSKafka() error {
	dir := s.cfg.Dir
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("torture: run folder %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	n := s.cfg.Faults
	if n <= 0 {
		n = 3 + s.rng.IntN(3)
	}
	es := &eosKafkaState{committed: make(map[int32]int64)}
	es.faults = planEOSFaults(s.rng, n, s.cfg.FaultKinds)
	es.rep = &EOSKafkaReport{Records: s.cfg.Records, Keys: s.cfg.Keys, Partitions: eosPartitions, Faults: make(map[string]int)}
	s.eosKafka = es
	s.sum.EOSKafka = es.rep
	kc, err := kafkatest.Start(kafkatest.Partitions(eosPartitions), kafkatest.Topics(EOSKafkaInput, EOSKafkaOutput, EOSKafkaLate),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("torture: eos-kafka: start the in-process Kafka: %w", err)
	}
	es.cluster = kc
	if es.watch, err = watchBroker(kc.Kfake(), filepath.Join(dir, "broker.log")); err != nil {
		return err
	}
	es.rep.watch = es.watch
	if es.admCl, err = kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...)); err != nil {
		return fmt.Errorf("torture: eos-kafka: admin client: %w", err)
	}
	es.adm = kadm.NewClient(es.admCl)
	if es.prod, err = newScaleProducer(kc.Brokers(), EOSKafkaInput); err != nil {
		return err
	}
	es.data = genScaleData(s.cfg.Seed, s.cfg.Records, s.cfg.Keys)
	for slot := range int32(eosSlots) {
		c := &child{name: fmt.Sprintf("worker-%d", slot), role: roleEOSKafkaWorker, partition: slot}
		if err := os.MkdirAll(filepath.Join(dir, c.name, "state"), 0o755); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		s.children = append(s.children, c)
	}
	return nil
}

func (s *supervisor) closeEOSKafka() {
	es := s.eosKafka
	if es.watch != nil {
		es.watch.close()
	}
	if es.prod != nil {
		es.prod.close()
	}
	if es.admCl != nil {
		es.admCl.Close()
	}
	if es.cluster != nil {
		es.cluster.Close()
	}
}

// driveEOSKafka produces the records in len(faults)+1 chunks; before each
// chunk but the first it arms that chunk's fault when it is a broker
// fault, after the chunk it fires a kill or a change of membership; then
// it waits until the group committed every record produced. Last come
// the sentinels, and the wait until they are committed too.
func (s *supervisor) driveEOSKafka(ctx context.Context) error {
	es := s.eosKafka
	if err := s.start(s.children[0]); err != nil {
		return err
	}
	es.rep.Joins++
	n := len(es.data.recs)
	chunks := len(es.faults) + 1
	for i := range chunks {
		var f *eosFault
		var bf *brokerFault
		if i > 0 {
			f = &es.faults[i-1]
			if f.kind != FaultKill && f.kind != FaultRebalance {
				bf = armBrokerFault(es.cluster.Kfake(), *f)
			}
		}
		if f != nil && (f.kind == FaultKill || f.kind == FaultKillInCommit) {
			if err := s.awaitEOSKafkaSettled(ctx); err != nil {
				return err
			}
		}
		from, to := n*i/chunks, n*(i+1)/chunks
		if err := es.prod.produce(ctx, es.data, from, to); err != nil {
			return err
		}
		if f != nil {
			es.rep.Faults[f.String()]++
			if err := s.fireEOSKafka(ctx, *f, bf, to); err != nil {
				return err
			}
		}
		if ok, err := s.awaitEOSKafkaCommits(ctx, fmt.Sprintf("records 0 to %d", to)); err != nil || !ok {
			return err
		}
	}
	if err := es.prod.produceSentinels(ctx, es.data, eosPartitions); err != nil {
		return err
	}
	es.rep.note(s.sum, "every record produced: one sentinel per partition, event time +1h")
	_, err := s.awaitEOSKafkaCommits(ctx, "the sentinels")
	return err
}

// fireEOSKafka fires f after the chunk ending at record to was produced: a
// kill or a change of membership now, a broker fault when its request
// comes (or not, after eosFireWait).
func (s *supervisor) fireEOSKafka(ctx context.Context, f eosFault, bf *brokerFault, to int) error {
	es := s.eosKafka
	switch f.kind {
	case FaultKill:
		if err := s.pauseEOSKafka(ctx, f.delay); err != nil {
			return err
		}
		running := s.runningWorkers()
		if len(running) == 0 {
			return nil
		}
		return s.killEOSKafkaWorker(running[s.rng.IntN(len(running))], to)
	case FaultRebalance:
		c := s.children[1]
		if c.running {
			if err := s.stopWorker(ctx, c); err != nil {
				return err
			}
			es.rep.Leaves++
			es.rep.note(s.sum, fmt.Sprintf("rebalance: SIGTERM %s (leaves) after record %d", workerName(c), to))
			return nil
		}
		if err := s.start(c); err != nil {
			return err
		}
		es.rep.Joins++
		es.rep.note(s.sum, fmt.Sprintf("rebalance: start %s (joins) after record %d", workerName(c), to))
		return nil
	}
	fired, err := s.awaitEOSKafka(ctx, eosFireWait, func() bool {
		select {
		case <-bf.fired:
			return true
		default:
			return false
		}
	})
	if err != nil {
		bf.disarm()
		return err
	}
	if !fired {
		bf.disarm()
		es.rep.Unfired++
		es.rep.note(s.sum, fmt.Sprintf("%s: not fired within %v of record %d", f, eosFireWait, to))
		return nil
	}
	if f.kind != FaultKillInCommit {
		es.rep.note(s.sum, fmt.Sprintf("%s: fired after record %d", f, to))
		return nil
	}
	defer bf.disarm()
	id := <-bf.held
	var c *child
	for _, w := range s.children {
		if eosKafkaTxnID(w.partition) == id {
			c = w
		}
	}
	if c == nil || !c.running {
		es.rep.note(s.sum, fmt.Sprintf("%s: commit of %s held, its worker not running", f, id))
		return nil
	}
	if !f.fenceFirst {
		// The commit goes through from a dead worker: its transaction
		// commits, and the next incarnation goes on from it.
		if err := s.killQuiet(c); err != nil {
			return err
		}
		bf.disarm()
		return s.restartEOSKafkaWorker(c, fmt.Sprintf("%s: commit held, SIGKILL, commit let through:", f), to)
	}
	inits, wake := es.watch.initsOf(id)
	if err := s.killQuiet(c); err != nil {
		return err
	}
	if err := s.restartEOSKafkaWorker(c, fmt.Sprintf("%s: commit held (let through after the new incarnation's InitProducerID), SIGKILL", f), to); err != nil {
		return err
	}
	// The held commit is let through once the new incarnation's
	// InitProducerID fenced the killed one: it arrives from a zombie.
	for {
		n, next := es.watch.initsOf(id)
		if n > inits {
			break
		}
		ok, err := s.awaitEOSKafka(ctx, eosFireWait, func() bool {
			select {
			case <-wake:
				return true
			default:
				return false
			}
		})
		if err != nil {
			return err
		}
		if !ok {
			es.rep.note(s.sum, fmt.Sprintf("%s: the new incarnation sent no InitProducerID within %v", f, eosFireWait))
			return nil
		}
		wake = next
	}
	return nil
}

// killEOSKafkaWorker SIGKILLs c, waits for it to be gone and starts it again
// in the same slot (same folder, same transactional id).
func (s *supervisor) killEOSKafkaWorker(c *child, to int) error {
	if err := s.killQuiet(c); err != nil {
		return err
	}
	return s.restartEOSKafkaWorker(c, "kill: SIGKILL", to)
}

// killQuiet SIGKILLs c and waits for it to be gone.
func (s *supervisor) killQuiet(c *child) error {
	c.signalled = true
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("torture: kill %s: %w", c.name, err)
	}
	if _, ok := s.wait(c, 30*time.Second); !ok {
		return fmt.Errorf("torture: %s did not exit within 30s of SIGKILL", c.name)
	}
	s.eosKafka.rep.Kills++
	s.sum.ConsumerKills++
	return nil
}

// restartEOSKafkaWorker starts c's next incarnation after a kill.
func (s *supervisor) restartEOSKafkaWorker(c *child, what string, to int) error {
	old := workerName(c)
	s.sum.Restarts++
	if err := s.start(c); err != nil {
		return err
	}
	at := ""
	if to > 0 {
		at = fmt.Sprintf(" (after record %d)", to)
	}
	s.eosKafka.rep.note(s.sum, fmt.Sprintf("%s %s, replaced by %s%s", what, old, workerName(c), at))
	return nil
}

// pauseEOSKafka waits d, restarting any worker that exits by itself meanwhile.
func (s *supervisor) pauseEOSKafka(ctx context.Context, d time.Duration) error {
	_, err := s.awaitEOSKafka(ctx, d, func() bool { return false })
	return err
}

// awaitEOSKafka polls cond every eosPoll until it holds (true) or timeout
// passed (false), restarting any worker that exits by itself meanwhile.
func (s *supervisor) awaitEOSKafka(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(eosPoll)
	defer tick.Stop()
	for {
		if cond() {
			return true, nil
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("torture: %w", ctx.Err())
		case e := <-s.exits:
			s.exited(e)
		case <-tick.C:
		}
		// A wait for another worker may have seen the exit too.
		if err := s.reviveEOSKafka(); err != nil {
			return false, err
		}
	}
}

// reviveEOSKafka starts again every slot whose worker exited without being
// signalled (a violation, recorded by exited).
func (s *supervisor) reviveEOSKafka() error {
	for _, c := range s.children {
		if c.cmd == nil || c.running || c.signalled {
			continue
		}
		s.eosKafka.rep.Crashes++
		if s.eosKafka.rep.Crashes > maxEOSKafkaCrashes {
			return fmt.Errorf("torture: eos-kafka: workers exited by themselves %d times (see worker-*.stderr)", s.eosKafka.rep.Crashes)
		}
		s.sum.Restarts++
		if err := s.start(c); err != nil {
			return err
		}
	}
	return nil
}

// awaitEOSKafkaCommits waits until the group committed every record produced
// so far (what names them, for a stall's message). Commits that do not
// move for CatchUp are a violation (false).
func (s *supervisor) awaitEOSKafkaCommits(ctx context.Context, what string) (bool, error) {
	es := s.eosKafka
	last, since, ghosted := int64(-1), time.Now(), time.Now()
	for {
		sum := s.sampleEOSKafka(ctx)
		if s.committedEOSKafkaToEnd() {
			return true, nil
		}
		if sum != last {
			last, since, ghosted = sum, time.Now(), time.Now()
		} else if time.Since(ghosted) > eosGhostAfter {
			ghosted = time.Now()
			s.evictGhosts(ctx)
		}
		if time.Since(since) > s.cfg.CatchUp {
			es.rep.Stalled = true
			s.violate("eos-kafka: the group's commits did not advance for %v waiting for %s: %s; last error asking Kafka: %v (see worker-*.stderr)",
				s.cfg.CatchUp, what, s.eosKafkaCommitsString(), es.lastErr)
			return false, nil
		}
		if _, err := s.awaitEOSKafka(ctx, eosPoll, func() bool { return false }); err != nil {
			return false, err
		}
	}
}

// awaitEOSKafkaSettled waits, at most eosSettleWait, until the group is
// Stable with every running worker a member that owns partitions (see
// eosSettleWait).
func (s *supervisor) awaitEOSKafkaSettled(ctx context.Context) error {
	settled, err := s.awaitEOSKafka(ctx, eosSettleWait, func() bool { return s.eosKafkaSettled(ctx) })
	if err == nil && !settled {
		s.eosKafka.rep.note(s.sum, fmt.Sprintf("the group did not settle within %v: %s", eosSettleWait, s.eosKafka.lastGroup))
	}
	return err
}

// eosKafkaSettled describes the group and reports whether it is Stable
// with as many members as workers run, each assigned partitions.
func (s *supervisor) eosKafkaSettled(ctx context.Context) bool {
	es := s.eosKafka
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := es.adm.DescribeGroups(dctx, EOSKafkaGroup)
	if err != nil {
		es.lastErr = err
		return false
	}
	g, ok := groups[EOSKafkaGroup]
	if !ok || g.Err != nil {
		return false
	}
	es.lastGroup = fmt.Sprintf("%s with %d members, %d workers running", g.State, len(g.Members), len(s.runningWorkers()))
	if g.State != "Stable" || len(g.Members) != len(s.runningWorkers()) {
		return false
	}
	for _, m := range g.Members {
		if a, isConsumer := m.Assigned.AsConsumer(); !isConsumer || len(a.Topics) == 0 {
			return false
		}
	}
	return true
}

// evictGhosts removes from the group, with a LeaveGroup, every member
// whose client id names no running incarnation (see eosGhostAfter).
func (s *supervisor) evictGhosts(ctx context.Context) {
	es := s.eosKafka
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := es.adm.DescribeGroups(dctx, EOSKafkaGroup)
	if err != nil {
		es.lastErr = err
		return
	}
	g, ok := groups[EOSKafkaGroup]
	if !ok || g.Err != nil {
		return
	}
	running := make(map[string]bool)
	for _, c := range s.runningWorkers() {
		running[workerName(c)] = true
	}
	for _, m := range g.Members {
		if running[m.ClientID] {
			continue
		}
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = EOSKafkaGroup
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID = m.MemberID
		reason := "torture: a ghost of a killed worker"
		rm.Reason = &reason
		req.Members = append(req.Members, rm)
		if _, err := req.RequestWith(dctx, es.admCl); err != nil {
			es.lastErr = err
			continue
		}
		es.rep.Ghosts++
		es.rep.note(s.sum, fmt.Sprintf("the group kept %s (killed, gone), with partitions, in state %s: removed with a LeaveGroup", m.ClientID, g.State))
	}
}

// sampleEOSKafka fetches the group's commits and returns their sum; a failed
// fetch keeps the last ones.
func (s *supervisor) sampleEOSKafka(ctx context.Context) int64 {
	es := s.eosKafka
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := es.adm.FetchOffsets(fctx, EOSKafkaGroup)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
	case err != nil:
		es.lastErr = err
	default:
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == EOSKafkaInput && o.Err == nil && o.At >= 0 {
				es.committed[o.Partition] = o.At
			}
		})
	}
	var sum int64
	for _, at := range es.committed {
		sum += at
	}
	return sum
}

// committedEOSKafkaToEnd reports whether every partition's commit is at what
// was produced to it.
func (s *supervisor) committedEOSKafkaToEnd() bool {
	es := s.eosKafka
	for p := range int32(eosPartitions) {
		if es.committed[p] < es.prod.ends[p] {
			return false
		}
	}
	return true
}

func (s *supervisor) eosKafkaCommitsString() string {
	es := s.eosKafka
	var b strings.Builder
	for p := range int32(eosPartitions) {
		if p > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "p%d %d/%d", p, es.committed[p], es.prod.ends[p])
	}
	return b.String()
}

// stopEOSKafkaWorkers stops every running worker with SIGTERM; each must exit
// 0.
func (s *supervisor) stopEOSKafkaWorkers(ctx context.Context) error {
	for _, c := range s.runningWorkers() {
		if err := s.stopWorker(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
