package torture

// Scenario eos-log, the supervisor's side: issue 19's "log to log" case.
// See the package doc, "Scenario eos-log".

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
)

// ScenarioEOSLog is issue 19's exactly-once into the log: a worker process
// runs a log -> Aggregate -> log pipeline under stream.ExactlyOnce, its
// sink.LogSink the transactor, and is SIGKILLed at seeded moments; every
// key's running count must be in the output once (eoslog.go).
const ScenarioEOSLog = "eos-log"

// ScenarioEOSKafkaLog is ScenarioEOSLog from Kafka: the worker is a member
// of a consumer group reading the input from an in-process Kafka, and
// copies every record into the log (stateless: a consumer group's state
// needs a changelog store, which a LogSink is not); every record must be
// in the output once, in order per key.
const ScenarioEOSKafkaLog = "eos-kafka-log"

// eosLogStall is how long a running worker may write no output before the
// supervisor restarts it (waitOutputs).
const eosLogStall = 60 * time.Second

// EOSLogGroup is scenario eos-kafka-log's consumer group.
const EOSLogGroup = "eos-log"

// eosLogSegmentBytes is the segment size of scenario eos-log's log: 16 KiB,
// a few hundred records of the output, so a rolled back transaction often
// spans segments and the truncation deletes some.
const eosLogSegmentBytes = 16 << 10

// eosLogEarlyMax bounds the wait of an early kill after the worker's
// start.
const eosLogEarlyMax = 150 * time.Millisecond

// EOSLogReport is scenario eos-log's run and checks.
type EOSLogReport struct {
	FromKafka bool          // ScenarioEOSKafkaLog: the input is on Kafka, the pipeline stateless
	Records   int           // input records, written before the worker started
	Keys      int           // distinct keys among them
	Work      time.Duration // the worker's sleep per record

	Kills            int   // SIGKILLs that landed on the running worker
	EarlyKills       int   // of which drawn at a moment after its start, not at an output count
	KillsUncommitted int   // of which left outputs past the committed ends
	RolledBack       int64 // outputs past the committed ends at the kills, truncated by the next start
	Missed           int   // kills whose worker had already exited (a violation: the run did not get its kills)
	Reruns           int   // pipelines a worker built again in its process (a source failure, an aborted transaction; from Kafka)
	// StallRestarts counts workers restarted because they wrote no output
	// for eosLogStall while running (see waitOutputs).
	StallRestarts int

	Outputs    int64 // records in the output at the end
	Lost       int   // results missing from the output: a (key, count), or an input record
	Duplicated int   // results in the output more than once (extra copies)
	OutOfOrder int   // results of a key below one before them in the output
	Phantoms   int   // outputs that are no result: an unknown key, a count out of 1..N, an unknown record
}

// eosLogInput is what the supervisor wrote as scenario eos-log's input:
// each key's records, and the partitions' ends.
type eosLogInput struct {
	want    map[string]int64 // each key's record count
	ordinal []int64          // the record of each id ("i<id>"): its place among its key's records, from 1
	keys    []string         // the key of each id
	ends    []int64          // each input partition's end offset
}

// eosLogDefaults fills in scenario eos-log's zero settings.
func (c *Config) eosLogDefaults() {
	if c.Kills <= 0 {
		c.Kills = 5
	}
	if c.Records <= 0 {
		c.Records = max(20_000, 100*c.Kills)
	}
	if c.Keys <= 0 {
		c.Keys = 50
	}
	if c.Work <= 0 {
		c.Work = 100 * time.Microsecond
	}
}

// runEOSLog runs scenario eos-log: it writes the input, starts the worker,
// kills it Kills times at moments drawn from the seed (each restarted at
// once), lets the last incarnation run to the end of the input (it must
// exit 0), and checks the output against the counts of the input.
func (s *supervisor) runEOSLog(ctx context.Context) error {
	rep := &EOSLogReport{FromKafka: s.cfg.Scenario == ScenarioEOSKafkaLog, Records: s.cfg.Records, Keys: s.cfg.Keys, Work: s.cfg.Work}
	s.sum.EOSLog = rep
	defer func() {
		if s.cluster != nil {
			s.cluster.Close()
		}
	}()
	in, err := s.setupEOSLog(ctx)
	if err != nil {
		return err
	}
	ro, err := log.Open(logDir(s.cfg.Dir), log.ReadOnly())
	if err != nil {
		return fmt.Errorf("torture: eos-log: open the log read-only: %w", err)
	}
	defer ro.Close()
	out, err := ro.Topic(EOSLogOutput)
	if err != nil {
		return fmt.Errorf("torture: eos-log: %w", err)
	}
	defer s.killAll()
	c := &child{name: "eos-log-worker", role: roleEOSLogWorker, partition: -1}
	s.children = append(s.children, c)
	if err := s.start(c); err != nil {
		return err
	}
	// The moments: each kill at a count of outputs written (committed or
	// not), spread over the run, plus a wait; one in four instead a wait
	// after the worker's start, so some land while it starts (reads the
	// transaction file, truncates, restores the state).
	at := make([]int64, s.cfg.Kills)
	for i := range at {
		at[i] = int64(float64(s.cfg.Records) * (0.05 + 0.8*s.rng.Float64()))
	}
	slices.Sort(at)
	for i, n := range at {
		early := s.rng.IntN(4) == 0
		wait := s.cfg.MinInterval + time.Duration(s.rng.Int64N(int64(s.cfg.MaxInterval-s.cfg.MinInterval)+1))
		if early {
			// From the start: a process start, the log's open and the
			// recovery take tens of milliseconds.
			wait = time.Duration(s.rng.Int64N(int64(eosLogEarlyMax) + 1))
			rep.EarlyKills++
		} else if err := s.waitOutputs(ctx, c, out, n, rep); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case <-time.After(wait):
		}
		landed, err := s.killEOSLog(c)
		if err != nil {
			return err
		}
		if !landed {
			rep.Missed++
			s.violate("eos-log: kill %d (at %d outputs, early %v) missed: the worker had exited (see %s.stderr)", i+1, n, early, c.name)
			break
		}
		rep.Kills++
		tail, err := uncommitted(out)
		if err != nil {
			return err
		}
		if tail > 0 {
			rep.KillsUncommitted++
			rep.RolledBack += tail
		}
		s.sum.Restarts++
		if err := s.start(c); err != nil {
			return err
		}
	}
	if err := s.finishEOSLog(ctx, c, out); err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(s.cfg.Dir, c.name+".stderr")); err == nil {
		rep.Reruns = strings.Count(string(b), ", again")
	}
	if err := ro.Close(); err != nil {
		return fmt.Errorf("torture: eos-log: %w", err)
	}
	if err := s.verifyLog(); err != nil {
		return err
	}
	return s.checkEOSLog(in)
}

// finishEOSLog lets the last incarnation run to the end of the input: from
// the log it exits by itself, from Kafka it follows the group, so once it
// committed every record it gets SIGTERM. It must exit 0.
func (s *supervisor) finishEOSLog(ctx context.Context, c *child, out *log.Topic) error {
	if !c.running {
		return nil // a kill missed: the violation is recorded
	}
	if s.cfg.Scenario == ScenarioEOSKafkaLog {
		deadline := time.Now().Add(s.cfg.CatchUp)
		for {
			ends, _, err := sink.CommittedEnds(out)
			if err != nil {
				return fmt.Errorf("torture: eos-log: %w", err)
			}
			if total(ends) >= int64(s.cfg.Records) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("torture: eos-log: the worker did not commit %d records within %v: %d (see %s.stderr)", s.cfg.Records, s.cfg.CatchUp, total(ends), c.name)
			}
			select {
			case e := <-s.exits:
				s.exited(e)
				if !c.running {
					return fmt.Errorf("torture: eos-log: the worker exited (%v) before committing every record (see %s.stderr)", c.exitErr, c.name)
				}
			case <-ctx.Done():
				return fmt.Errorf("torture: %w", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		if err := s.terminate(ctx, c); err != nil {
			return err
		}
	}
	s.mu.Lock()
	c.signalled = true // its own exit is expected
	err, ok := s.wait(c, s.cfg.CatchUp)
	s.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("torture: eos-log: the worker did not reach the end of the input within %v (see %s.stderr)", s.cfg.CatchUp, c.name)
	case err != nil:
		s.violate("eos-log: the worker's last run failed: %v (see %s.stderr)", err, c.name)
	}
	return nil
}

// setupEOSLog makes the run folder and the log with the output topic,
// and writes the input: Records records, each keyed by one of Keys keys
// drawn from the seed ("u007"), its value its id ("i<id>"), to the topic
// EOSLogInput of Partitions partitions in the log, or, in
// ScenarioEOSKafkaLog, in an in-process Kafka it starts. Kafka's
// partitioner puts a key in one partition, in order, in both.
func (s *supervisor) setupEOSLog(ctx context.Context) (*eosLogInput, error) {
	dir := s.cfg.Dir
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("torture: run folder %s is not empty", dir)
	}
	lg, err := log.Open(logDir(dir), log.CreateIfMissing(), log.WithMode(s.cfg.Mode), log.WithSegmentBytes(eosLogSegmentBytes))
	if err != nil {
		return nil, fmt.Errorf("torture: create the log: %w", err)
	}
	defer lg.Close()
	if _, err = lg.CreateTopic(EOSLogOutput, Partitions); err != nil {
		return nil, fmt.Errorf("torture: eos-log: %w", err)
	}
	in := &eosLogInput{want: make(map[string]int64, s.cfg.Keys), ordinal: make([]int64, s.cfg.Records), keys: make([]string, s.cfg.Records)}
	recs := make([]log.Record, s.cfg.Records)
	for i := range recs {
		k := fmt.Sprintf("u%03d", s.rng.IntN(s.cfg.Keys))
		in.want[k]++
		in.ordinal[i], in.keys[i] = in.want[k], k
		recs[i] = log.Record{Key: []byte(k), Value: fmt.Appendf(nil, "i%d", i)}
	}
	if s.cfg.Scenario == ScenarioEOSKafkaLog {
		if in.ends, err = s.produceEOSLog(ctx, recs); err != nil {
			return nil, err
		}
	} else {
		t, err := lg.CreateTopic(EOSLogInput, Partitions)
		if err != nil {
			return nil, fmt.Errorf("torture: eos-log: %w", err)
		}
		if err := t.AppendBatch(ctx, recs); err != nil {
			return nil, fmt.Errorf("torture: eos-log: write the input: %w", err)
		}
		in.ends = nexts(t)
	}
	if err := lg.Close(); err != nil {
		return nil, fmt.Errorf("torture: eos-log: close the log: %w", err)
	}
	return in, nil
}

// produceEOSLog starts the in-process Kafka (sessions as short as 100
// ms, so a killed member's partitions are given back soon) with the
// topic EOSLogInput and produces recs to it in order, returning each
// partition's end offset.
func (s *supervisor) produceEOSLog(ctx context.Context, recs []log.Record) ([]int64, error) {
	kc, err := kafkatest.Start(kafkatest.Partitions(Partitions), kafkatest.Topics(EOSLogInput),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		return nil, fmt.Errorf("torture: eos-log: start the in-process Kafka: %w", err)
	}
	s.cluster = kc
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers()...), kgo.DefaultProduceTopic(EOSLogInput))
	if err != nil {
		return nil, fmt.Errorf("torture: eos-log: producer: %w", err)
	}
	defer cl.Close()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Key: r.Key, Value: r.Value}
	}
	res := cl.ProduceSync(ctx, krs...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("torture: eos-log: produce the input: %w", err)
	}
	ends := make([]int64, Partitions)
	for _, pr := range res {
		ends[pr.Record.Partition] = max(ends[pr.Record.Partition], pr.Record.Offset+1)
	}
	return ends, nil
}

// eosLogWorkerArgs are the worker's flags: the log, a transaction interval
// of 5 to 50 ms and sink.Synced or not, drawn per incarnation.
func (s *supervisor) eosLogWorkerArgs(c *child) []string {
	interval := time.Duration(5+s.rng.IntN(46)) * time.Millisecond
	args := []string{roleEOSLogWorker, "--dir", logDir(s.cfg.Dir), "--mode", s.cfg.Mode.String(),
		"--segment-bytes", strconv.Itoa(eosLogSegmentBytes), "--interval", interval.String(),
		"--work", s.cfg.Work.String(), "--synced=" + strconv.FormatBool(s.rng.IntN(2) == 0), // a bool flag takes its value after "="
		"--inc", strconv.Itoa(c.inc), "--ready", s.readyPath(c)}
	if s.cluster != nil {
		args = append(args, "--brokers", strings.Join(s.cluster.Brokers(), ","))
	}
	return args
}

// waitOutputs waits until the output topic holds at least n records,
// committed or not, and fails when the worker exits first.
func (s *supervisor) waitOutputs(ctx context.Context, c *child, out *log.Topic, n int64, rep *EOSLogReport) error {
	last, moved := int64(-1), time.Now()
	for {
		got := total(nexts(out))
		if got >= n {
			return nil
		}
		switch {
		case got != last:
			last, moved = got, time.Now()
		case c.running && time.Since(moved) > eosLogStall:
			// A worker that wrote nothing for this long while running: seen
			// once from Kafka (a group member polling for 11 minutes with no
			// partitions, 2026-12-03, the pinned kfake; the brief says it can
			// leave partitions without an owner under churn). Restart it, as
			// an operator would a stuck pod, and count it in the report.
			landed, err := s.killEOSLog(c)
			if err != nil {
				return err
			}
			if landed {
				rep.StallRestarts++
				s.sum.Restarts++
				if err := s.start(c); err != nil {
					return err
				}
			}
			moved = time.Now()
		}
		select {
		case e := <-s.exits:
			s.exited(e)
			if !c.running {
				return fmt.Errorf("torture: eos-log: the worker exited (%v) before writing %d outputs (see %s.stderr)", c.exitErr, n, c.name)
			}
		case <-ctx.Done():
			return fmt.Errorf("torture: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// killEOSLog sends the worker SIGKILL and waits for it to be gone; landed
// is false when it had exited by itself before.
func (s *supervisor) killEOSLog(c *child) (landed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.signalled = true
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	exitErr, ok := s.wait(c, 10*time.Second)
	if !ok {
		return false, fmt.Errorf("torture: %s did not exit within 10s of SIGKILL", c.name)
	}
	var ee *exec.ExitError
	if errors.As(exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, nil
}

// nexts returns the next offset of every partition of t.
func nexts(t *log.Topic) []int64 {
	ends := make([]int64, t.Partitions())
	for i := range ends {
		p, _ := t.Partition(int32(i))
		ends[i] = p.HighWatermark()
	}
	return ends
}

func total(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// uncommitted returns how many records the output holds past its
// committed ends: what the killed worker wrote in its open transaction.
func uncommitted(out *log.Topic) (int64, error) {
	ends, found, err := sink.CommittedEnds(out)
	if err != nil {
		return 0, fmt.Errorf("torture: eos-log: %w", err)
	}
	if !found {
		return 0, nil // killed before its first BeginTransactions wrote the file
	}
	var n int64
	for i, next := range nexts(out) {
		n += max(next-ends[i], 0)
	}
	return n, nil
}

// checkEOSLog reads the output and counts, against the input, the results
// lost, duplicated, out of order and phantom; each kind found is a
// violation. A result is a key and a number, which must be 1 to N (the
// key's records) and come once each, in increasing order: from the log the
// output's value is the key's count so far; from Kafka it is the input
// record's id, whose place among its key's records is the number. It
// also wants the committed ends at the partitions' ends, and the
// committed positions at the input's ends.
func (s *supervisor) checkEOSLog(in *eosLogInput) error {
	rep := s.sum.EOSLog
	lg, err := log.Open(logDir(s.cfg.Dir), log.ReadOnly())
	if err != nil {
		return fmt.Errorf("torture: eos-log: %w", err)
	}
	defer lg.Close()
	out, err := lg.Topic(EOSLogOutput)
	if err != nil {
		return fmt.Errorf("torture: eos-log: %w", err)
	}
	// result returns the key and number r stands for; ok is false for a
	// phantom.
	result := func(r log.Record) (k string, n int64, ok bool) {
		k = string(r.Key)
		if !rep.FromKafka {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			return k, n, err == nil && n >= 1 && n <= in.want[k]
		}
		id, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "i"))
		if err != nil || id < 0 || id >= len(in.keys) || in.keys[id] != k {
			return k, 0, false
		}
		return k, in.ordinal[id], true
	}
	seen := make(map[string]map[int64]int, len(in.want))
	last := make(map[string]int64, len(in.want))
	var firstBad []string
	note := func(format string, args ...any) {
		if len(firstBad) < 5 {
			firstBad = append(firstBad, fmt.Sprintf(format, args...))
		}
	}
	for p := range int32(out.Partitions()) {
		recs, err := readAll(out, p)
		if err != nil {
			return err
		}
		for _, r := range recs {
			rep.Outputs++
			k, n, ok := result(r)
			if !ok {
				rep.Phantoms++
				note("phantom %s=%q at partition %d offset %d", k, r.Value, p, r.Offset)
				continue
			}
			if seen[k] == nil {
				seen[k] = make(map[int64]int)
			}
			seen[k][n]++
			if seen[k][n] > 1 {
				rep.Duplicated++
				note("duplicate %s=%q at partition %d offset %d", k, r.Value, p, r.Offset)
			}
			if n < last[k] {
				rep.OutOfOrder++
				note("%s=%q (result %d) after result %d at partition %d offset %d", k, r.Value, n, last[k], p, r.Offset)
			}
			last[k] = n
		}
	}
	for k, n := range in.want {
		for i := int64(1); i <= n; i++ {
			if seen[k][i] == 0 {
				rep.Lost++
				note("lost result %d of %s", i, k)
			}
		}
	}
	if rep.Lost+rep.Duplicated+rep.OutOfOrder+rep.Phantoms > 0 {
		s.violate("eos-log: %d lost, %d duplicated, %d out of order, %d phantoms; first: %s",
			rep.Lost, rep.Duplicated, rep.OutOfOrder, rep.Phantoms, strings.Join(firstBad, "; "))
	}
	ends, found, err := sink.CommittedEnds(out)
	switch {
	case err != nil:
		s.violate("eos-log: %v", err)
	case !found:
		s.violate("eos-log: no transaction file in %s", out.Dir())
	case !slices.Equal(ends, nexts(out)):
		s.violate("eos-log: committed ends %v, the partitions end at %v", ends, nexts(out))
	}
	store := sink.Log(out)
	for i, end := range in.ends {
		pos, found, err := store.Load(context.Background(), EOSLogInput, int32(i))
		if err != nil || !found || pos.Offset != end {
			s.violate("eos-log: committed position of %s/%d: %v (found %v, err %v), the partition ends at %d", EOSLogInput, i, pos, found, err, end)
		}
	}
	return nil
}

// readAll returns every record of partition p of t.
func readAll(t *log.Topic, p int32) ([]log.Record, error) {
	part, err := t.Partition(p)
	if err != nil {
		return nil, fmt.Errorf("torture: eos-log: %w", err)
	}
	r := part.Replay(part.StartOffset())
	var all []log.Record
	for {
		recs, err := r.Next(context.Background(), 1<<20)
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return nil, fmt.Errorf("torture: eos-log: read %s/%d: %w", t.Name(), p, err)
		}
		all = append(all, recs...)
	}
}

// lines writes scenario eos-log's facts.
func (r *EOSLogReport) lines(b *strings.Builder, s *Summary) {
	if r.FromKafka {
		fmt.Fprintf(b, "  setup       %d records over %d keys in %d partitions (Kafka topic %s, in-process), written first; a worker process, a member of group %s, copies them to %s under stream.ExactlyOnce, its sink.LogSink the transactor, %v of work a record\n",
			r.Records, r.Keys, Partitions, EOSLogInput, EOSLogGroup, EOSLogOutput, r.Work)
	} else {
		fmt.Fprintf(b, "  setup       %d records over %d keys in %d partitions (%s), written first; a worker process runs %s -> Aggregate(count per key) -> %s under stream.ExactlyOnce, its sink.LogSink the transactor, %v of work a record\n",
			r.Records, r.Keys, Partitions, EOSLogInput, EOSLogInput, EOSLogOutput, r.Work)
	}
	fmt.Fprintf(b, "  kills       %d (%d early, at a start; %d with outputs past the committed ends: %d records rolled back at the next start), %d missed\n",
		r.Kills, r.EarlyKills, r.KillsUncommitted, r.RolledBack, r.Missed)
	fmt.Fprintf(b, "  restarts    %d (and %d pipelines built again in the worker; %d restarts of a worker stalled %v without output)\n", s.Restarts, r.Reruns, r.StallRestarts, eosLogStall)
	fmt.Fprintf(b, "  output      %d records: %d lost, %d duplicated, %d out of order, %d phantoms\n",
		r.Outputs, r.Lost, r.Duplicated, r.OutOfOrder, r.Phantoms)
	fmt.Fprintf(b, "  torn        %d log tails\n", s.TornTails)
}
