package torture

// Scenario eos, the supervisor's side: issue 19's seeded fault runs of an
// exactly-once Kafka -> window -> Kafka pipeline. See the package doc,
// "Scenario eos".

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

// ScenarioExactlyOnce is issue 19's fault run: a keyed tumbling-window
// count from one Kafka topic to another under stream.ExactlyOnce, on
// worker processes of one consumer group, with faults drawn from the
// seed (SIGKILLs, members joining and leaving, and Kafka requests
// answered with errors, dropped or delayed); every window's result must
// be in the output, read with read_committed, exactly once, in order, with
// the count an uninterrupted computation gives.
const ScenarioExactlyOnce = "eos"

// The Kafka names of scenario eos, on the in-process Kafka the supervisor
// runs.
const (
	EOSInput  = "eos-in"   // the records, eosPartitions partitions
	EOSOutput = "eos-out"  // the window results
	EOSLate   = "eos-late" // the window's late records (LateTo): none expected
	EOSGroup  = "eos"      // the workers' consumer group
)

// eosPartitions is the partition count of scenario eos's topics, and
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

// maxEOSCrashes bounds the workers' own exits before the run gives up.
const maxEOSCrashes = 10

// eosState is what the supervisor keeps of an eos run.
type eosState struct {
	cluster *kafkatest.Cluster
	admCl   *kgo.Client
	adm     *kadm.Client
	prod    *scaleProducer
	data    *scaleData
	watch   *brokerWatch
	faults  []eosFault
	rep     *EOSReport

	committed map[int32]int64
	lastErr   error
}

// eosDefaults fills in scenario eos's defaults.
func (c *Config) eosDefaults() error {
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

// eosTxnID is the transactional id of a worker slot, the same for each of
// its incarnations.
func eosTxnID(slot int32) string { return fmt.Sprintf("%s-slot-%d", EOSGroup, slot) }

// eosWorkerArgs are a worker's arguments for its next incarnation.
func (s *supervisor) eosWorkerArgs(c *child) []string {
	args := []string{roleEOSWorker,
		"--brokers", strings.Join(s.eos.cluster.Brokers(), ","),
		"--home", filepath.Join(s.cfg.Dir, c.name),
		"--name", workerName(c),
		"--txn-id", eosTxnID(c.partition),
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

// runEOS runs scenario eos: it starts the in-process Kafka, produces the
// records in chunks, one fault after each chunk but the first, waits
// after each until the group committed every record produced, produces
// one sentinel per partition that closes every window, stops the workers
// with SIGTERM and checks the output.
func (s *supervisor) runEOS(ctx context.Context) error {
	if err := s.setupEOS(); err != nil {
		return err
	}
	defer s.closeEOS()
	defer s.killAll()
	if err := s.driveEOS(ctx); err != nil {
		return err
	}
	if err := s.stopEOSWorkers(ctx); err != nil {
		return err
	}
	return s.checkEOS(ctx)
}

// setupEOS makes the run folder, starts Kafka with the three topics,
// generates the records and draws the faults.
func (s *supervisor) setupEOS() error {
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
	es := &eosState{committed: make(map[int32]int64)}
	es.faults = planEOSFaults(s.rng, n, s.cfg.FaultKinds)
	es.rep = &EOSReport{Records: s.cfg.Records, Keys: s.cfg.Keys, Partitions: eosPartitions, Faults: make(map[string]int)}
	s.eos = es
	s.sum.EOS = es.rep
	kc, err := kafkatest.Start(kafkatest.Partitions(eosPartitions), kafkatest.Topics(EOSInput, EOSOutput, EOSLate),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("torture: eos: start the in-process Kafka: %w", err)
	}
	es.cluster = kc
	if es.watch, err = watchBroker(kc.Kfake(), filepath.Join(dir, "broker.log")); err != nil {
		return err
	}
	es.rep.watch = es.watch
	if es.admCl, err = kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...)); err != nil {
		return fmt.Errorf("torture: eos: admin client: %w", err)
	}
	es.adm = kadm.NewClient(es.admCl)
	if es.prod, err = newScaleProducer(kc.Brokers(), EOSInput); err != nil {
		return err
	}
	es.data = genScaleData(s.cfg.Seed, s.cfg.Records, s.cfg.Keys)
	for slot := range int32(eosSlots) {
		c := &child{name: fmt.Sprintf("worker-%d", slot), role: roleEOSWorker, partition: slot}
		if err := os.MkdirAll(filepath.Join(dir, c.name, "state"), 0o755); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		s.children = append(s.children, c)
	}
	return nil
}

func (s *supervisor) closeEOS() {
	es := s.eos
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

// driveEOS produces the records in len(faults)+1 chunks; before each
// chunk but the first it arms that chunk's fault when it is a broker
// fault, after the chunk it fires a kill or a change of membership; then
// it waits until the group committed every record produced. Last come
// the sentinels, and the wait until they are committed too.
func (s *supervisor) driveEOS(ctx context.Context) error {
	es := s.eos
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
		from, to := n*i/chunks, n*(i+1)/chunks
		if err := es.prod.produce(ctx, es.data, from, to); err != nil {
			return err
		}
		if f != nil {
			es.rep.Faults[f.String()]++
			if err := s.fireEOS(ctx, *f, bf, to); err != nil {
				return err
			}
		}
		if ok, err := s.awaitEOSCommits(ctx, fmt.Sprintf("records 0 to %d", to)); err != nil || !ok {
			return err
		}
	}
	if err := es.prod.produceSentinels(ctx, es.data, eosPartitions); err != nil {
		return err
	}
	es.rep.note(s.sum, "every record produced: one sentinel per partition, event time +1h")
	_, err := s.awaitEOSCommits(ctx, "the sentinels")
	return err
}

// fireEOS fires f after the chunk ending at record to was produced: a
// kill or a change of membership now, a broker fault when its request
// comes (or not, after eosFireWait).
func (s *supervisor) fireEOS(ctx context.Context, f eosFault, bf *brokerFault, to int) error {
	es := s.eos
	switch f.kind {
	case FaultKill:
		if err := s.pauseEOS(ctx, f.delay); err != nil {
			return err
		}
		running := s.runningWorkers()
		if len(running) == 0 {
			return nil
		}
		return s.killEOSWorker(running[s.rng.IntN(len(running))], to)
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
	fired, err := s.awaitEOS(ctx, eosFireWait, func() bool {
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
		if eosTxnID(w.partition) == id {
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
		return s.restartEOSWorker(c, fmt.Sprintf("%s: SIGKILL with its commit held, the commit let through, then", f), to)
	}
	inits, wake := es.watch.initsOf(id)
	if err := s.killQuiet(c); err != nil {
		return err
	}
	if err := s.restartEOSWorker(c, fmt.Sprintf("%s: SIGKILL with its commit held,", f), to); err != nil {
		return err
	}
	// The held commit is let through once the new incarnation's
	// InitProducerID fenced the killed one: it arrives from a zombie.
	for {
		n, next := es.watch.initsOf(id)
		if n > inits {
			break
		}
		ok, err := s.awaitEOS(ctx, eosFireWait, func() bool {
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

// killEOSWorker SIGKILLs c, waits for it to be gone and starts it again
// in the same slot (same folder, same transactional id).
func (s *supervisor) killEOSWorker(c *child, to int) error {
	if err := s.killQuiet(c); err != nil {
		return err
	}
	return s.restartEOSWorker(c, "kill: SIGKILL", to)
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
	s.eos.rep.Kills++
	s.sum.ConsumerKills++
	return nil
}

// restartEOSWorker starts c's next incarnation after a kill.
func (s *supervisor) restartEOSWorker(c *child, what string, to int) error {
	old := workerName(c)
	s.sum.Restarts++
	if err := s.start(c); err != nil {
		return err
	}
	at := ""
	if to > 0 {
		at = fmt.Sprintf(" (after record %d)", to)
	}
	s.eos.rep.note(s.sum, fmt.Sprintf("%s %s, replaced by %s%s", what, old, workerName(c), at))
	return nil
}

// pauseEOS waits d, restarting any worker that exits by itself meanwhile.
func (s *supervisor) pauseEOS(ctx context.Context, d time.Duration) error {
	_, err := s.awaitEOS(ctx, d, func() bool { return false })
	return err
}

// awaitEOS polls cond every eosPoll until it holds (true) or timeout
// passed (false), restarting any worker that exits by itself meanwhile.
func (s *supervisor) awaitEOS(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
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
		if err := s.reviveEOS(); err != nil {
			return false, err
		}
	}
}

// reviveEOS starts again every slot whose worker exited without being
// signalled (a violation, recorded by exited).
func (s *supervisor) reviveEOS() error {
	for _, c := range s.children {
		if c.cmd == nil || c.running || c.signalled {
			continue
		}
		s.eos.rep.Crashes++
		if s.eos.rep.Crashes > maxEOSCrashes {
			return fmt.Errorf("torture: eos: workers exited by themselves %d times (see worker-*.stderr)", s.eos.rep.Crashes)
		}
		s.sum.Restarts++
		if err := s.start(c); err != nil {
			return err
		}
	}
	return nil
}

// awaitEOSCommits waits until the group committed every record produced
// so far (what names them, for a stall's message). Commits that do not
// move for CatchUp are a violation (false).
func (s *supervisor) awaitEOSCommits(ctx context.Context, what string) (bool, error) {
	es := s.eos
	last, since, ghosted := int64(-1), time.Now(), time.Now()
	for {
		sum := s.sampleEOS(ctx)
		if s.committedEOSToEnd() {
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
			s.violate("eos: the group's commits did not advance for %v waiting for %s: %s; last error asking Kafka: %v (see worker-*.stderr)",
				s.cfg.CatchUp, what, s.eosCommitsString(), es.lastErr)
			return false, nil
		}
		if _, err := s.awaitEOS(ctx, eosPoll, func() bool { return false }); err != nil {
			return false, err
		}
	}
}

// evictGhosts removes from the group, with a LeaveGroup, every member
// whose client id names no running incarnation (see eosGhostAfter).
func (s *supervisor) evictGhosts(ctx context.Context) {
	es := s.eos
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := es.adm.DescribeGroups(dctx, EOSGroup)
	if err != nil {
		es.lastErr = err
		return
	}
	g, ok := groups[EOSGroup]
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
		req.Group = EOSGroup
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

// sampleEOS fetches the group's commits and returns their sum; a failed
// fetch keeps the last ones.
func (s *supervisor) sampleEOS(ctx context.Context) int64 {
	es := s.eos
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := es.adm.FetchOffsets(fctx, EOSGroup)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
	case err != nil:
		es.lastErr = err
	default:
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == EOSInput && o.Err == nil && o.At >= 0 {
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

// committedEOSToEnd reports whether every partition's commit is at what
// was produced to it.
func (s *supervisor) committedEOSToEnd() bool {
	es := s.eos
	for p := range int32(eosPartitions) {
		if es.committed[p] < es.prod.ends[p] {
			return false
		}
	}
	return true
}

func (s *supervisor) eosCommitsString() string {
	es := s.eos
	var b strings.Builder
	for p := range int32(eosPartitions) {
		if p > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "p%d %d/%d", p, es.committed[p], es.prod.ends[p])
	}
	return b.String()
}

// stopEOSWorkers stops every running worker with SIGTERM; each must exit
// 0.
func (s *supervisor) stopEOSWorkers(ctx context.Context) error {
	for _, c := range s.runningWorkers() {
		if err := s.stopWorker(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
