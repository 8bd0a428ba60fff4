package torture

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// EOSKafkaReport is what a scenario eos-kafka run did and found (Summary.EOSKafka).
type EOSKafkaReport struct {
	Records    int // input records, sentinels excluded
	Keys       int // distinct keys drawn
	Partitions int // of each topic

	Faults  map[string]int // the faults injected, by kind and answer ("kill", "endtxn/CONCURRENT_TRANSACTIONS", "heartbeat/drop", ...)
	Unfired int            // broker faults whose request never came (disarmed)
	Kills   int            // workers killed with SIGKILL (kill and kill-in-commit; each replaced at once)
	Joins   int            // workers started (the first included)
	Leaves  int            // workers stopped with SIGTERM by a rebalance fault
	Crashes int            // workers that exited by themselves (each a violation; started again)
	Ghosts  int            // members of killed workers the in-process Kafka kept, removed by the supervisor (see eosGhostAfter)
	Stalled bool           // the group's commits stopped advancing for Config.CatchUp

	Commits       int64 // transactions the workers' sources committed (as last written before each exit)
	Aborts        int64 // transactions they aborted (asked, or refused by a rebalance or a stale membership)
	BrokerCommits int   // EndTxn commits the broker was sent (retries included)
	BrokerAborts  int   // EndTxn aborts the broker was sent

	Events []string // the faults as they happened

	Check *EOSKafkaCheck // nil when the run stopped before its check

	watch *brokerWatch // logs the events too
}

// note adds an event.
func (r *EOSKafkaReport) note(sum *Summary, what string) {
	r.Events = append(r.Events, fmt.Sprintf("%6.2fs  %s", time.Since(sum.started).Seconds(), what))
	if r.watch != nil {
		r.watch.note(what)
	}
}

// FaultCount is the number of faults injected.
func (r *EOSKafkaReport) FaultCount() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// Line is the run's one-line summary.
func (r *EOSKafkaReport) Line(seed uint64, pass bool) string {
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	faults := faultsString(r.Faults)
	if r.Check == nil {
		return fmt.Sprintf("eos-kafka: seed %d: %s: not checked (the run stopped before its check); faults %s", seed, verdict, faults)
	}
	c := r.Check
	return fmt.Sprintf("eos-kafka: seed %d: %s: lost %d, duplicated %d, out-of-order %d (wrong %d, unknown %d, late %d) of %d results; faults %s; aborts %d",
		seed, verdict, c.Lost, c.Duplicated, c.OutOfOrder, c.Wrong, c.Unknown, c.Late, c.Expected, faults, r.Aborts)
}

// faultsString lists faults by kind, sorted: "3 (endtxn/drop 1, kill 2)".
func faultsString(faults map[string]int) string {
	n := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		n += faults[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, faults[k]))
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}

// lines writes the report below the summary's head line.
func (r *EOSKafkaReport) lines(b *strings.Builder, s *Summary) {
	fmt.Fprintf(b, "  %s\n", r.Line(s.Seed, len(s.Violations) == 0))
	fmt.Fprintf(b, "  setup       kfake, %s of %d partitions, %d records over %d keys; workers: source.Kafka(group %s, a transactional id per slot) → KeyBy(key) → Window(Tumbling(%v), Count, OutOfOrderness(%v)) → sink.Kafka(%s), stream.ExactlyOnce\n",
		EOSKafkaInput, r.Partitions, r.Records, r.Keys, EOSKafkaGroup, scaleWindow, scaleOutOfOrderness, EOSKafkaOutput)
	fmt.Fprintf(b, "  workers     %d started, %d stopped (SIGTERM), %d killed (SIGKILL, replaced), %d exited by themselves; %d ghosts removed from the group\n", r.Joins, r.Leaves, r.Kills, r.Crashes, r.Ghosts)
	fmt.Fprintf(b, "  faults      %s; %d not fired\n", faultsString(r.Faults), r.Unfired)
	for _, e := range r.Events {
		fmt.Fprintf(b, "    %s\n", e)
	}
	fmt.Fprintf(b, "  txns        %d committed, %d aborted by the workers' sources; the broker was sent %d EndTxn commits, %d aborts\n", r.Commits, r.Aborts, r.BrokerCommits, r.BrokerAborts)
	if c := r.Check; c != nil {
		fmt.Fprintf(b, "  results     %d committed, %d expected; %d sentinel results ignored\n", c.Results, c.Expected, c.Sentinels)
		fmt.Fprintf(b, "  lost        %d\n", c.Lost)
		fmt.Fprintf(b, "  duplicated  %d\n", c.Duplicated)
		fmt.Fprintf(b, "  out-of-order %d\n", c.OutOfOrder)
		fmt.Fprintf(b, "  wrong       %d counts, %d unknown windows, %d malformed, %d late records committed to %s\n", c.Wrong, c.Unknown, c.Malformed, c.Late, EOSKafkaLate)
	}
}

// EOSKafkaTotals is what RunEOSKafka's seeds did and found, summed.
type EOSKafkaTotals struct {
	Seeds  int            // runs
	Failed []uint64       // the seeds that failed (a violation or a harness error), in the order they ended
	Faults map[string]int // faults injected, by kind (the part of the fault's name before "/")
	Detail map[string]int // faults injected, by kind and answer

	// Summed over the seeds' checks (EOSKafkaCheck): results expected
	// and committed, and the failures by kind (each must be 0).
	Expected, Results               int
	Lost, Duplicated, OutOfOrder    int
	Wrong, Unknown, Malformed, Late int
	// Summed over the seeds' reports (EOSKafkaReport): broker faults
	// not fired, SIGKILLs, workers' own exits, stalled runs, ghost
	// members removed.
	Unfired, Kills, Crashes, Stalled, Ghosts int
	Aborts, Commits                          int64         // transactions the workers' sources aborted and committed
	BrokerAborts                             int           // EndTxn aborts the broker was sent
	Took                                     time.Duration // all seeds, wall time
	Errors                                   int           // seeds whose run failed to set up or finish (no check)
}

// add sums one seed's report.
func (t *EOSKafkaTotals) add(r *EOSKafkaReport) {
	for k, n := range r.Faults {
		t.Detail[k] += n
		kind, _, _ := strings.Cut(k, "/")
		t.Faults[kind] += n
	}
	t.Unfired += r.Unfired
	t.Kills += r.Kills
	t.Crashes += r.Crashes
	t.Ghosts += r.Ghosts
	if r.Stalled {
		t.Stalled++
	}
	t.Aborts += r.Aborts
	t.Commits += r.Commits
	t.BrokerAborts += r.BrokerAborts
	if c := r.Check; c != nil {
		t.Expected += c.Expected
		t.Results += c.Results
		t.Lost += c.Lost
		t.Duplicated += c.Duplicated
		t.OutOfOrder += c.OutOfOrder
		t.Wrong += c.Wrong
		t.Unknown += c.Unknown
		t.Malformed += c.Malformed
		t.Late += c.Late
	}
}

// Line is the one-line summary of every seed.
func (t *EOSKafkaTotals) Line() string {
	verdict := "PASS"
	if len(t.Failed) > 0 {
		verdict = fmt.Sprintf("FAIL (%d seeds)", len(t.Failed))
	}
	return fmt.Sprintf("eos-kafka: %d seeds: %s: lost %d, duplicated %d, out-of-order %d (wrong %d, unknown %d, late %d) of %d results; faults %s, %d not fired; aborts %d (of %d transactions); %d worker crashes, %d stalls, %d ghost members removed, %d harness errors; %v",
		t.Seeds, verdict, t.Lost, t.Duplicated, t.OutOfOrder, t.Wrong, t.Unknown, t.Late, t.Expected,
		faultsString(t.Faults), t.Unfired, t.Aborts, t.Commits+t.Aborts, t.Crashes, t.Stalled, t.Ghosts, t.Errors, t.Took.Round(100*time.Millisecond))
}

// SeedResult is one seed's run, as RunEOSKafka hands it to its
// callback.
type SeedResult struct {
	Seed    uint64
	Summary *Summary // nil when the run could not start
	Err     error    // Run's error: a *ViolationError, or what stopped the harness
}

// RunEOSKafka runs scenario eos-kafka once per seed, first to first+n-1,
// parallel runs at a time, each in its own folder cfg.Dir/seed-N (removed
// when it passed, unless keep), and sums them. done, when not nil, is
// called after each run, one call at a time. The error is ctx's, or a
// setup error of cfg; failed seeds are in EOSKafkaTotals.Failed. first must
// not be 0 (Run's "draw a seed").
func RunEOSKafka(ctx context.Context, cfg Config, first uint64, n, parallel int, keep bool, done func(SeedResult)) (*EOSKafkaTotals, error) {
	if first == 0 {
		return nil, errors.New("torture: RunEOSKafka: seed 0 (pick one, as the command does)")
	}
	cfg.Scenario = ScenarioEOSKafka
	check := cfg
	check.Dir = filepath.Join(cfg.Dir, "check")
	if err := check.defaults(); err != nil {
		return nil, err
	}
	parallel = max(parallel, 1)
	t := &EOSKafkaTotals{Faults: make(map[string]int), Detail: make(map[string]int)}
	start := time.Now()
	seeds := make(chan uint64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				c := cfg
				c.Seed = seed
				c.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("seed-%d", seed))
				sum, err := Run(ctx, c)
				mu.Lock()
				t.Seeds++
				if sum != nil && sum.EOSKafka != nil {
					t.add(sum.EOSKafka)
				}
				if err != nil {
					t.Failed = append(t.Failed, seed)
					if sum == nil || sum.EOSKafka == nil || sum.EOSKafka.Check == nil {
						t.Errors++
					}
				} else if !keep {
					os.RemoveAll(c.Dir)
				}
				if done != nil {
					done(SeedResult{Seed: seed, Summary: sum, Err: err})
				}
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case seeds <- first + uint64(i):
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(seeds)
	wg.Wait()
	t.Took = time.Since(start)
	return t, err
}
