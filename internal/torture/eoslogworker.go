package torture

// Scenario eos-log, the worker's side: a log -> Aggregate -> log pipeline
// under stream.ExactlyOnce, its LogSink the transactor (see the package
// doc, "Scenario eos-log").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// roleEOSLogWorker is the child role of scenario eos-log's worker:
// "torture child eos-log-worker ..." (the test binary: its arguments
// without "child").
const roleEOSLogWorker = "eos-log-worker"

// The topics of scenario eos-log.
const (
	EOSLogInput  = "eos-in"  // the input, written by the supervisor first
	EOSLogOutput = "eos-out" // every key's running count, written exactly once
)

// eosLogWorker is one incarnation of scenario eos-log's worker.
type eosLogWorker struct {
	dir      string // the log directory
	mode     log.Mode
	segBytes int64
	interval time.Duration // stream.TransactionInterval
	work     time.Duration // the Map's sleep per record, pacing the run
	synced   bool          // sink.Synced
	brokers  []string      // ScenarioEOSKafkaLog: read the input from Kafka, as a member of EOSLogGroup
	inc      int           // the incarnation, in the Kafka client's id
}

// runEOSLogWorker parses the worker's flags (args after the role) and runs
// it: to the end of the input (source.Replay), when it returns nil, or
// until SIGKILL.
func runEOSLogWorker(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("torture "+roleEOSLogWorker, flag.ContinueOnError)
	dir := fl.String("dir", "", "the log directory")
	mode := fl.String("mode", "mmap", "the log's write path: mmap or file")
	segBytes := fl.Int64("segment-bytes", 64<<10, "segment size in bytes")
	interval := fl.Duration("interval", 20*time.Millisecond, "stream.TransactionInterval")
	work := fl.Duration("work", 100*time.Microsecond, "the Map's sleep per record")
	synced := fl.Bool("synced", false, "write with sink.Synced")
	brokers := fl.String("brokers", "", "read the input from these Kafka brokers (host:port, comma-separated) as a member of the group "+EOSLogGroup+", until SIGTERM")
	inc := fl.Int("inc", 0, "this incarnation's number (0 for the first start)")
	ready := fl.String("ready", "", "a file to write --inc to once SIGTERM stops the worker cleanly")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("torture: %s: unexpected arguments %q", roleEOSLogWorker, fl.Args())
	}
	if *ready != "" {
		if err := writeReady(*ready, *inc); err != nil {
			return err
		}
	}
	m, err := log.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
	}
	if *dir == "" {
		return fmt.Errorf("torture: %s: --dir is required", roleEOSLogWorker)
	}
	w := eosLogWorker{dir: *dir, mode: m, segBytes: *segBytes, interval: *interval, work: *work, synced: *synced, inc: *inc}
	if *brokers != "" {
		w.brokers = strings.Split(*brokers, ",")
	}
	return w.run(ctx)
}

// run runs the pipeline once, to the end of the input:
//
//	source.Topic(EOSLogInput, FromStore(out), Replay) → Map (sleep work)
//	→ KeyBy(record key) → Aggregate(Count) → MapTo(key, "count")
//	→ To(out) Checkpointing(out), under ExactlyOnce(TransactionInterval)
//
// where out is sink.Log(EOSLogOutput): every input record makes one
// output, its key's count so far, so the output of an uninterrupted run
// holds counts 1 to N of every key once each, in order. From Kafka it
// runs, until ctx ends (SIGTERM), drained then:
//
//	source.Kafka(brokers, EOSLogGroup, EOSLogInput) → Map (sleep work, copy
//	key and value) → To(out) Checkpointing(out), under ExactlyOnce
func (w eosLogWorker) run(ctx context.Context) error {
	lg, err := log.Open(w.dir, log.WithMode(w.mode), log.WithSegmentBytes(w.segBytes))
	if err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
	}
	defer lg.Close()
	t, err := lg.WriteTopic(EOSLogOutput)
	if err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
	}
	var opts []sink.LogOption
	if w.synced {
		opts = append(opts, sink.Synced())
	}
	out := sink.Log(t, opts...)
	eos := stream.ExactlyOnce(stream.TransactionInterval(w.interval))
	work := func(_ context.Context, r log.Record) (log.Record, error) {
		if w.work > 0 {
			time.Sleep(w.work)
		}
		return log.Record{Key: r.Key, Value: r.Value}, nil
	}
	if w.brokers != nil {
		return w.runKafka(ctx, out, eos, work)
	}
	src := source.Topic(lg, EOSLogInput, source.FromStore(out), source.Replay(), source.MaxBytes(4<<10))
	s := stream.From(src, eos).Map(work)
	counts := stream.Aggregate(stream.KeyBy(s, func(r log.Record) string { return string(r.Key) }), stream.Count[log.Record]())
	err = stream.MapTo(counts, func(_ context.Context, kv stream.KV[string, int64]) (log.Record, error) {
		return log.Record{Key: []byte(kv.Key), Value: strconv.AppendInt(nil, kv.Value, 10)}, nil
	}).To(out).Checkpointing(out).Run(ctx)
	if err != nil {
		return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
	}
	return nil
}

// runKafka runs the Kafka pipeline under stream.Forever, as a service
// would: a retryable source failure (a JoinGroup that timed out while the
// group waited for a killed member) builds it again. A transaction the
// group's rebalance aborted (stream.ErrTransactionAborted: a LogSink
// cannot rewind a running pipeline) does too: each new Run starts from
// the committed transaction. Each such restart is written to stderr.
func (w eosLogWorker) runKafka(ctx context.Context, out *sink.LogSink, eos stream.Option, work func(context.Context, log.Record) (log.Record, error)) error {
	for {
		err := stream.Forever(ctx, func() stream.Runner {
			src, err := source.Kafka(w.brokers, EOSLogGroup, []string{EOSLogInput}, source.KafkaClientOpts(
				kgo.ClientID(fmt.Sprintf("eos-log-worker.%d", w.inc)),
				kgo.SessionTimeout(500*time.Millisecond),
				kgo.HeartbeatInterval(50*time.Millisecond),
				kgo.RebalanceTimeout(time.Second)),
				source.KafkaMaxRecords(64)) // batches of about the log source's 4 KiB
			if err != nil {
				return failedRunner{err}
			}
			return stream.From(src, eos, stream.WithDrainTimeout(5*time.Second)).Map(work).To(out).Checkpointing(out)
		}, stream.OnSourceError(func(err error, failures int) {
			fmt.Fprintf(os.Stderr, "torture: %s: source failure %d, again: %v\n", roleEOSLogWorker, failures, err)
		}))
		if errors.Is(err, stream.ErrTransactionAborted) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "torture: %s: an aborted transaction, again: %v\n", roleEOSLogWorker, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("torture: %s: %w", roleEOSLogWorker, err)
		}
		return nil
	}
}
