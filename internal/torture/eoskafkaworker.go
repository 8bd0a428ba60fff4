package torture

// Scenario eos-kafka, the worker's side: one member of EOSKafkaGroup running the
// Kafka -> window -> Kafka pipeline under stream.ExactlyOnce (see the
// package doc, "Scenario eos-kafka").

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// roleEOSKafkaWorker is the child role of scenario eos-kafka's workers: "torture
// child eos-kafka-worker ...".
const roleEOSKafkaWorker = "eos-kafka-worker"

// EOSKafkaClientLogEnv, set (to anything) in the environment of scenario eos-kafka's
// workers, makes each write franz-go's log at level info to its stderr
// (the run folder's worker-N.stderr): the group's joins, assignments and
// transactions, for a seed that fails.
const EOSKafkaClientLogEnv = "STROM_TORTURE_KGO_LOG"

// eosKafkaStatsEvery is how often a worker writes its transaction counts.
const eosKafkaStatsEvery = 20 * time.Millisecond

// eosKafkaWorker is one incarnation of a worker slot of scenario eos-kafka.
type eosKafkaWorker struct {
	brokers        []string
	home           string // the slot's folder: state/ is the source's KafkaStateDir, txn-INC its counts
	name           string // "w<slot>.<incarnation>", the client id and what every result names
	txnID          string // the slot's transactional id, the same for every incarnation
	inc            int
	window         time.Duration
	outOfOrderness time.Duration
	session        time.Duration
	rebalance      time.Duration
	// plantDuplicates writes every result twice (into the same
	// transaction): a planted fault, for the harness's own test.
	plantDuplicates bool
}

// runEOSKafkaWorker parses a worker's flags (args after the role), writes its
// ready file once SIGTERM stops it cleanly, and runs it until ctx ends.
func runEOSKafkaWorker(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("torture "+roleEOSKafkaWorker, flag.ContinueOnError)
	brokers := fl.String("brokers", "", "the Kafka brokers, host:port, comma-separated")
	home := fl.String("home", "", "the worker slot's folder")
	name := fl.String("name", "", "the worker's name, its client id, written into every result")
	txnID := fl.String("txn-id", "", "the slot's transactional id (source.KafkaTransactionalID)")
	inc := fl.Int("inc", 0, "this incarnation's number (0 for the first start)")
	ready := fl.String("ready", "", "a file to write --inc to once SIGTERM stops the worker cleanly")
	window := fl.Duration("window", time.Minute, "the tumbling window's size")
	ooo := fl.Duration("out-of-orderness", 5*time.Second, "the window's OutOfOrderness")
	session := fl.Duration("session-timeout", time.Second, "the group session timeout (kgo.SessionTimeout)")
	rebalance := fl.Duration("rebalance-timeout", time.Second, "the group rebalance timeout (kgo.RebalanceTimeout)")
	plant := fl.Bool("plant-duplicates", false, "write every result twice (a planted fault, for the harness's own test)")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSKafkaWorker, err)
	}
	if *brokers == "" || *home == "" || *name == "" || *txnID == "" {
		return fmt.Errorf("torture: %s: --brokers, --home, --name and --txn-id are required", roleEOSKafkaWorker)
	}
	if *ready != "" {
		if err := writeReady(*ready, *inc); err != nil {
			return err
		}
	}
	w := eosKafkaWorker{brokers: strings.Split(*brokers, ","), home: *home, name: *name, txnID: *txnID, inc: *inc,
		window: *window, outOfOrderness: *ooo, session: *session, rebalance: *rebalance, plantDuplicates: *plant}
	return w.run(ctx)
}

// run runs the pipeline under stream.Forever, as a service would, and
// writes the transactions its sources committed and aborted to
// txn-INC every eosKafkaStatsEvery (and at the end).
func (w eosKafkaWorker) run(ctx context.Context) error {
	out, err := sink.Kafka(w.brokers, EOSKafkaOutput)
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleEOSKafkaWorker, w.name, err)
	}
	defer out.Close()
	late, err := sink.Kafka(w.brokers, EOSKafkaLate)
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleEOSKafkaWorker, w.name, err)
	}
	defer late.Close()
	st := &eosKafkaWorkerStats{path: eosKafkaStatsPath(w.home, w.inc)}
	statsDone := make(chan struct{})
	statsCtx, stopStats := context.WithCancel(context.Background())
	go func() {
		defer close(statsDone)
		st.loop(statsCtx)
	}()
	defer func() {
		stopStats()
		<-statsDone
	}()
	clientOpts := []kgo.Opt{
		kgo.ClientID(w.name),
		kgo.SessionTimeout(w.session),
		kgo.HeartbeatInterval(w.session / 10),
		kgo.RebalanceTimeout(w.rebalance),
	}
	if os.Getenv(EOSKafkaClientLogEnv) != "" {
		clientOpts = append(clientOpts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	err = stream.Forever(ctx, func() stream.Runner {
		src, err := source.Kafka(w.brokers, EOSKafkaGroup, []string{EOSKafkaInput},
			source.KafkaTransactionalID(w.txnID),
			source.KafkaClientOpts(clientOpts...),
			source.KafkaStateDir(filepath.Join(w.home, "state")))
		if err != nil {
			return failedRunner{err}
		}
		st.use(src)
		in := stream.From(src, stream.WithName(EOSKafkaGroup), stream.ExactlyOnce(), stream.WithDrainTimeout(w.rebalance))
		counts := stream.Window(stream.KeyBy(in, recordKey).FollowsPartitioning(), stream.Tumbling(w.window), stream.Count[log.Record](),
			stream.OutOfOrderness(w.outOfOrderness), stream.LateTo[log.Record](late))
		if w.plantDuplicates {
			return stream.FlatMap(counts, func(ctx context.Context, r stream.WindowResult[string, int64]) ([]log.Record, error) {
				rec, err := w.result(ctx, r)
				return []log.Record{rec, rec}, err
			}).To(out).Checkpointing(src)
		}
		return stream.MapTo(counts, w.result).To(out).Checkpointing(src)
	})
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleEOSKafkaWorker, w.name, err)
	}
	return nil
}

// result encodes a window's count as an output record: keyed by the
// window's key, so that every result of a key goes to one partition of
// EOSKafkaOutput, in the order the worker wrote them; the value is
// scaleResult's "start end key count worker".
func (w eosKafkaWorker) result(_ context.Context, r stream.WindowResult[string, int64]) (log.Record, error) {
	res := scaleResult{Start: r.Start.UnixMilli(), End: r.End.UnixMilli(), Key: r.Key, Count: r.Value, Worker: w.name}
	return log.Record{Key: []byte(r.Key), Value: res.encode(), Timestamp: res.End}, nil
}

// eosKafkaStatsPath is the file incarnation inc of the slot in home writes its
// transaction counts to.
func eosKafkaStatsPath(home string, inc int) string {
	return filepath.Join(home, "txn-"+strconv.Itoa(inc))
}

// eosKafkaWorkerStats sums the transaction counts of the sources a worker's
// stream.Forever built, and writes them as "commits aborts" to path
// (replaced whole) when they change: a SIGKILL loses at most the last
// eosKafkaStatsEvery of them.
type eosKafkaWorkerStats struct {
	path string

	mu        sync.Mutex
	cur       *source.KafkaSource
	base      source.KafkaStats // the sources before cur, summed
	written   [2]int64
	wroteOnce bool
}

// use makes src the source counted from now on, after adding the last
// one's counts to the base.
func (st *eosKafkaWorkerStats) use(src *source.KafkaSource) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cur != nil {
		s := st.cur.Stats()
		st.base.Transactions += s.Transactions
		st.base.Aborts += s.Aborts
	}
	st.cur = src
}

func (st *eosKafkaWorkerStats) loop(ctx context.Context) {
	tick := time.NewTicker(eosKafkaStatsEvery)
	defer tick.Stop()
	for {
		st.write()
		select {
		case <-ctx.Done():
			st.write()
			return
		case <-tick.C:
		}
	}
}

func (st *eosKafkaWorkerStats) write() {
	st.mu.Lock()
	n := [2]int64{st.base.Transactions, st.base.Aborts}
	if st.cur != nil {
		s := st.cur.Stats()
		n[0] += s.Transactions
		n[1] += s.Aborts
	}
	same := st.wroteOnce && n == st.written
	st.written, st.wroteOnce = n, true
	st.mu.Unlock()
	if same {
		return
	}
	tmp := st.path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d", n[0], n[1]), 0o644); err == nil {
		_ = os.Rename(tmp, st.path)
	}
}

// readEOSKafkaStats reads the counts an incarnation wrote; a missing or torn
// file counts nothing.
func readEOSKafkaStats(path string) (commits, aborts int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0
	}
	c, err1 := strconv.ParseInt(f[0], 10, 64)
	a, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return c, a
}
