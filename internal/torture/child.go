package torture

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// Topic is the topic every run writes and reads; Partitions is its
// partition count, one consumer each.
const (
	Topic      = "torture"
	Partitions = 3
)

// The scenarios: the consumer's pipeline.
const (
	// ScenarioPlain consumes with stream.ConsumeForever and one sequential
	// handler.
	ScenarioPlain = "plain"
	// ScenarioPipeline consumes with stream.Forever and a pipeline of a
	// parallel Filter (one record in four dropped), a parallel Map and a
	// parallel Tap, so records finish out of order.
	ScenarioPipeline = "pipeline"
	// ScenarioSlow is issue 17's slow consumer: stream.ConsumeForever with
	// default options over a partition written beforehand, a handler that
	// sleeps a fixed time per record, killed every 0.2 to 1 s until it
	// reaches the end (slow.go).
	ScenarioSlow = "slow"
)

// Child runs one child role, as the supervisor starts it: args are
// "publish", "consume", "scale-worker" or "eos-worker" followed by that role's flags (see the supervisor's
// childArgs). It returns when SIGTERM or SIGINT arrives and the role has
// stopped cleanly, or with the role's error.
func Child(args []string) error {
	if len(args) == 0 {
		return errors.New("torture: child: no role (publish or consume)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if args[0] == roleScaleWorker {
		return runScaleWorker(ctx, args[1:])
	}
	if args[0] == roleEOSKafkaWorker {
		return runEOSKafkaWorker(ctx, args[1:])
	}
	if args[0] == roleEOSLogWorker {
		return runEOSLogWorker(ctx, args[1:])
	}
	fl := flag.NewFlagSet("torture "+args[0], flag.ContinueOnError)
	dir := fl.String("dir", "", "the run folder")
	seed := fl.Uint64("seed", 0, "this incarnation's random seed")
	inc := fl.Int("inc", 0, "this incarnation's number (0 for the first start)")
	mode := fl.String("mode", "mmap", "the log's write path: mmap or file (publish)")
	segBytes := fl.Int64("segment-bytes", 256<<10, "segment size in bytes (publish)")
	appenders := fl.Int("appenders", 4, "concurrent AckSynced appenders (publish)")
	rate := fl.Int("rate", 2000, "records per second, about, all appenders together (publish)")
	partition := fl.Int("partition", 0, "the partition to consume (consume)")
	scenario := fl.String("scenario", ScenarioPlain, "the consumer's pipeline: plain, pipeline or slow (consume)")
	work := fl.Duration("work", 300*time.Microsecond, "the most work a stage does per record; in scenario slow, the handler's sleep per record (consume)")
	home := fl.String("home", "", "the consumer's folder, for its journal and state (consume; default consumer-PARTITION in --dir)")
	firstCheckpoint := fl.String("first-checkpoint", "", "a file to write, at the first Save of a position above 0, the time since the first handler call (consume, scenario slow)")
	interval := fl.Duration("checkpoint-interval", 5*time.Millisecond, "how often positions are saved (consume)")
	forget := fl.Int64("forget-every", 0, "journal no finish of offsets divisible by this (consume; a planted fault, for the harness's own test)")
	ready := fl.String("ready", "", "a file to write --inc to once SIGTERM stops the child cleanly")
	if err := fl.Parse(args[1:]); err != nil {
		return fmt.Errorf("torture: child %s: %w", args[0], err)
	}
	if *dir == "" {
		return fmt.Errorf("torture: child %s: --dir is required", args[0])
	}
	if *ready != "" {
		if err := writeReady(*ready, *inc); err != nil {
			return err
		}
	}
	switch args[0] {
	case "publish":
		m, err := log.ParseMode(*mode)
		if err != nil {
			return fmt.Errorf("torture: publish: %w", err)
		}
		p := publisher{dir: *dir, seed: *seed, inc: *inc, mode: m, segmentBytes: *segBytes, appenders: *appenders, rate: *rate}
		return p.run(ctx)
	case "consume":
		c := consumer{dir: *dir, home: *home, partition: int32(*partition), scenario: *scenario, work: *work, interval: *interval,
			forgetEvery: *forget, firstCheckpoint: *firstCheckpoint}
		return c.run(ctx)
	default:
		return fmt.Errorf("torture: child: unknown role %q (publish or consume)", args[0])
	}
}

// writeReady replaces path with inc, whole (a temporary file renamed over
// it), telling the supervisor that this incarnation handles SIGTERM: before
// signal.NotifyContext, SIGTERM would kill it as SIGKILL does.
func writeReady(path string, inc int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(inc)), 0o644); err != nil {
		return fmt.Errorf("torture: child: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("torture: child: %w", err)
	}
	return nil
}

// Paths of a run folder.
func logDir(dir string) string         { return filepath.Join(dir, "log") }
func ackJournalPath(dir string) string { return filepath.Join(dir, "publisher.journal") }
func consumerDir(dir string, p int32) string {
	return filepath.Join(dir, fmt.Sprintf("consumer-%d", p))
}
func stateDir(dir string, p int32) string { return homeStateDir(consumerDir(dir, p)) }
func handledJournalPath(dir string, p int32) string {
	return homeJournalPath(consumerDir(dir, p))
}
func homeStateDir(home string) string    { return filepath.Join(home, "state") }
func homeJournalPath(home string) string { return filepath.Join(home, "handled.journal") }

// publisher appends records with AckSynced and journals each append before
// it starts (kindWrite) and after it returned (kindAck, with the partition
// and offset it was told).
type publisher struct {
	dir          string
	seed         uint64
	inc          int
	mode         log.Mode
	segmentBytes int64
	appenders    int
	rate         int
}

func (p publisher) run(ctx context.Context) error {
	lg, err := log.Open(logDir(p.dir), log.WithMode(p.mode), log.WithSegmentBytes(p.segmentBytes))
	if err != nil {
		return fmt.Errorf("torture: publish: %w", err)
	}
	topic, err := lg.WriteTopic(Topic)
	if err != nil {
		lg.Close()
		return fmt.Errorf("torture: publish: %w", err)
	}
	j, err := openJournal(ackJournalPath(p.dir))
	if err != nil {
		lg.Close()
		return err
	}
	defer j.close()
	// Each appender waits a random 0 to 2*appenders/rate between appends, so
	// together they append about rate records a second (less what the
	// appends take).
	maxWait := time.Duration(0)
	if p.rate > 0 {
		maxWait = 2 * time.Duration(p.appenders) * time.Second / time.Duration(p.rate)
	}
	errs := make(chan error, p.appenders)
	var wg sync.WaitGroup
	for a := range p.appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(p.seed, uint64(a)))
			for seq := 0; ctx.Err() == nil; seq++ {
				// The id names the record across every incarnation: no two
				// appends ever carry the same one.
				id := fmt.Sprintf("%d.%d.%d", p.inc, a, seq)
				rec := log.Record{
					Key:   fmt.Appendf(nil, "user-%d", rng.IntN(1000)),
					Value: []byte(id + " " + strings.Repeat("x", rng.IntN(200))),
				}
				if err := j.add(entry{kind: kindWrite, partition: -1, offset: -1, id: id}); err != nil {
					errs <- err
					return
				}
				// Not ctx: an append in flight when SIGTERM arrives finishes.
				part, off, err := topic.AppendAck(context.Background(), log.AckSynced, rec)
				if err != nil {
					errs <- fmt.Errorf("torture: publish %s: %w", id, err)
					return
				}
				if err := j.add(entry{kind: kindAck, partition: part, offset: off, id: id}); err != nil {
					errs <- err
					return
				}
				if maxWait > 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(maxWait))))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	err = <-errs
	if cerr := lg.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("torture: publish: close the log: %w", cerr)
	}
	return err
}

// consumer consumes one partition with the real source, pipeline and
// FileStore, and journals every record its last stage finished (or its
// filter dropped) before that stage's function returns, and every Save.
type consumer struct {
	dir       string
	home      string // the folder of the journal and the state; "" means consumerDir(dir, partition)
	partition int32
	scenario  string
	work      time.Duration
	interval  time.Duration
	// forgetEvery > 0 plants a fault: the finishes of offsets divisible by
	// it are not journalled, as if the handler had never run, so the
	// supervisor must report them lost and every position past them a skip.
	forgetEvery int64
	// firstCheckpoint, when set (scenario slow), names the file the
	// consumer writes the time from its first handler call to its first
	// Save of a position above 0 to (firstCheckpointProbe).
	firstCheckpoint string
}

func (c consumer) run(ctx context.Context) error {
	lg, err := log.Open(logDir(c.dir), log.ReadOnly())
	if err != nil {
		return fmt.Errorf("torture: consume %d: %w", c.partition, err)
	}
	defer lg.Close()
	home := c.home
	if home == "" {
		home = consumerDir(c.dir, c.partition)
	}
	fstore, err := checkpoint.NewFileStore(homeStateDir(home))
	if err != nil {
		return fmt.Errorf("torture: consume %d: %w", c.partition, err)
	}
	j, err := openJournal(homeJournalPath(home))
	if err != nil {
		return err
	}
	defer j.close()
	store := &journalStore{fs: fstore, j: j}
	if c.scenario == ScenarioSlow {
		return c.runSlow(ctx, lg, store, j)
	}
	newSource := func() *source.PartitionSource {
		// Small batches (about 8 KiB), so a kill lands inside a batch often.
		return source.Partition(lg, Topic, c.partition, source.FromStore(store), source.MaxBytes(8<<10))
	}
	handled := func(kind byte, r log.Record) error {
		if c.forgetEvery > 0 && r.Offset%c.forgetEvery == 0 {
			return nil
		}
		return j.add(entry{kind: kind, partition: r.Partition, offset: r.Offset, id: recordID(r)})
	}
	policy := stream.WithCheckpointPolicy(stream.CheckpointInterval(c.interval))
	switch c.scenario {
	case ScenarioPlain:
		err = stream.ConsumeForever(ctx, newSource(), store, func(ctx context.Context, r log.Record) error {
			c.doWork(r, 0)
			return handled(kindHandled, r)
		}, policy)
	case ScenarioPipeline:
		err = stream.Forever(ctx, func() stream.Runner {
			return stream.From(newSource()).
				Filter(func(_ context.Context, r log.Record) (bool, error) {
					if keep := hashID(r)%4 != 0; keep {
						return true, nil
					}
					return false, handled(kindFiltered, r)
				}, stream.Parallel(2)).
				Map(func(_ context.Context, r log.Record) (log.Record, error) {
					c.doWork(r, 1)
					return r, nil
				}, stream.Parallel(4)).
				Tap(func(_ context.Context, r log.Record) error {
					c.doWork(r, 2)
					return handled(kindHandled, r)
				}, stream.Parallel(3)).
				Checkpointing(store, stream.CheckpointInterval(c.interval))
		}, policy)
	default:
		return fmt.Errorf("torture: consume %d: unknown scenario %q (plain, pipeline or slow)", c.partition, c.scenario)
	}
	if err != nil {
		return fmt.Errorf("torture: consume %d: %w", c.partition, err)
	}
	return nil
}

// doWork sleeps between 0 and c.work, chosen by the record and the stage, so
// records of a parallel stage finish out of order, the same way on every
// delivery.
func (c consumer) doWork(r log.Record, stage uint64) {
	if c.work <= 0 {
		return
	}
	d := time.Duration((hashID(r) >> (8 * stage)) % uint64(c.work))
	time.Sleep(d)
}

// recordID is the id the publisher gave the record: its value up to the
// first space.
func recordID(r log.Record) string {
	v := string(r.Value)
	if i := strings.IndexByte(v, ' '); i >= 0 {
		return v[:i]
	}
	return v
}

// hashID is an FNV-1a hash of the record's id.
func hashID(r log.Record) uint64 {
	h := fnv.New64a()
	h.Write([]byte(recordID(r)))
	return h.Sum64()
}

// journalStore is the consumer's checkpoint.FileStore, journalling each Save
// before it starts (kindSave) and after it returned nil (kindSaved), so the
// supervisor can check every position a consumer ever tried to save
// against what the journal says it had finished by then. It has only Load
// and Save, not the FileStore's SaveBatch, so that the pipeline saves
// through Save.
type journalStore struct {
	fs *checkpoint.FileStore
	j  *journal
}

// Load loads through the FileStore.
func (s *journalStore) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	return s.fs.Load(ctx, topic, partition)
}

// Save journals the save, then saves through the FileStore.
func (s *journalStore) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	if err := s.j.add(entry{kind: kindSave, partition: partition, offset: pos.Offset, id: "-"}); err != nil {
		return err
	}
	if err := s.fs.Save(ctx, topic, partition, pos); err != nil {
		return err
	}
	return s.j.add(entry{kind: kindSaved, partition: partition, offset: pos.Offset, id: "-"})
}
