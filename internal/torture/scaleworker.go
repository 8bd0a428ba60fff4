package torture

// Scenario scale, the worker's side: one member of the consumer group,
// running the same pipeline as every other (see the package doc,
// "Scenario scale").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// roleScaleWorker is the child role of scenario scale's workers: "torture
// child scale-worker ..." (the test binary: its arguments without "child").
const roleScaleWorker = "scale-worker"

// scaleWorker is one incarnation of a worker slot: a member of ScaleGroup
// reading ScaleInput and writing ScaleOutput (and late records to
// ScaleLate).
type scaleWorker struct {
	brokers        []string
	home           string // the slot's folder; state/ is its FileStore
	name           string // "w<slot>.<incarnation>", written into every output
	stateless      bool
	window         time.Duration
	outOfOrderness time.Duration
	session        time.Duration
	rebalance      time.Duration
}

// runScaleWorker parses a worker's flags (args after the role), writes its
// ready file once SIGTERM stops it cleanly, and runs it until ctx ends.
func runScaleWorker(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("torture "+roleScaleWorker, flag.ContinueOnError)
	brokers := fl.String("brokers", "", "the Kafka brokers, host:port, comma-separated")
	home := fl.String("home", "", "the worker slot's folder (its FileStore is home/state)")
	name := fl.String("name", "", "the worker's name, written into every result")
	inc := fl.Int("inc", 0, "this incarnation's number (0 for the first start)")
	ready := fl.String("ready", "", "a file to write --inc to once SIGTERM stops the worker cleanly")
	stateless := fl.Bool("stateless", false, "relay every record to the output instead of counting windows")
	window := fl.Duration("window", time.Minute, "the tumbling window's size")
	ooo := fl.Duration("out-of-orderness", 5*time.Second, "the window's OutOfOrderness")
	session := fl.Duration("session-timeout", 2*time.Second, "the group session timeout (kgo.SessionTimeout)")
	rebalance := fl.Duration("rebalance-timeout", 2*time.Second, "the group rebalance timeout (kgo.RebalanceTimeout)")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("torture: %s: %w", roleScaleWorker, err)
	}
	if *brokers == "" || *home == "" || *name == "" {
		return fmt.Errorf("torture: %s: --brokers, --home and --name are required", roleScaleWorker)
	}
	if *ready != "" {
		if err := writeReady(*ready, *inc); err != nil {
			return err
		}
	}
	w := scaleWorker{brokers: strings.Split(*brokers, ","), home: *home, name: *name, stateless: *stateless,
		window: *window, outOfOrderness: *ooo, session: *session, rebalance: *rebalance}
	return w.run(ctx)
}

// run runs the pipeline under stream.Forever, as a service would: a
// retryable source failure (a broker that does not answer for a while)
// builds it again from the group's commits; SIGTERM (ctx) drains it and
// the source leaves the group.
func (w scaleWorker) run(ctx context.Context) error {
	out, err := sink.Kafka(w.brokers, ScaleOutput)
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleScaleWorker, w.name, err)
	}
	defer out.Close()
	late, err := sink.Kafka(w.brokers, ScaleLate)
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleScaleWorker, w.name, err)
	}
	defer late.Close()
	err = stream.Forever(ctx, func() stream.Runner {
		src, err := source.Kafka(w.brokers, ScaleGroup, []string{ScaleInput},
			source.KafkaClientOpts(
				kgo.ClientID(w.name), // the supervisor picks a kill's victim among the group's members by it
				kgo.SessionTimeout(w.session),
				kgo.HeartbeatInterval(w.session/10),
				kgo.RebalanceTimeout(w.rebalance)),
			// The local snapshot cache of the partitions' state: a
			// worker restarted in its folder (a pod with its volume)
			// restores from it plus the changelog's tail.
			source.KafkaStateDir(filepath.Join(w.home, "state")))
		if err != nil {
			return failedRunner{err}
		}
		in := stream.From(src, stream.WithName(ScaleGroup), stream.WithDrainTimeout(w.rebalance))
		if w.stateless {
			return stream.MapTo(in, w.relay).To(out).Checkpointing(src)
		}
		// The key is the Kafka record key the generator partitioned by:
		// declared, so that Run accepts the window per partition, whose
		// state (in changelog topics, through the source) follows each
		// partition to the member that owns it.
		counts := stream.Window(stream.KeyBy(in, recordKey).FollowsPartitioning(), stream.Tumbling(w.window), stream.Count[log.Record](),
			stream.OutOfOrderness(w.outOfOrderness), stream.LateTo[log.Record](late))
		return stream.MapTo(counts, w.result).To(out).Checkpointing(src)
	})
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w", roleScaleWorker, w.name, err)
	}
	return nil
}

// recordKey is the window's key: the record's Kafka key, which is also
// what partitions the input (so a key's records stay in one partition).
func recordKey(r log.Record) string { return string(r.Key) }

// result encodes a window's count as an output record (see scaleResult).
func (w scaleWorker) result(_ context.Context, r stream.WindowResult[string, int64]) (log.Record, error) {
	res := scaleResult{Start: r.Start.UnixMilli(), End: r.End.UnixMilli(), Key: r.Key, Count: r.Value, Worker: w.name}
	return log.Record{Key: []byte(r.Key), Value: res.encode(), Timestamp: res.End}, nil
}

// relay copies an input record to the output, naming where it was read
// (scenario scale's stateless variant; see scaleRelayed).
func (w scaleWorker) relay(_ context.Context, r log.Record) (log.Record, error) {
	rel := scaleRelayed{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Timestamp: r.Timestamp, Worker: w.name}
	return log.Record{Key: r.Key, Value: rel.encode(), Timestamp: r.Timestamp}, nil
}

// failedRunner is a pipeline that could not be built: its Run returns the
// error, which stream.Forever returns.
type failedRunner struct{ err error }

func (f failedRunner) Run(context.Context) error { return f.err }

// scaleResult is one output record of the stateful pipeline: the count of
// Key's records in the window [Start, End) (Unix milliseconds), emitted by
// Worker. Its value is "start end key count worker", space-separated.
type scaleResult struct {
	Start, End int64
	Key        string
	Count      int64
	Worker     string
}

func (r scaleResult) encode() []byte {
	return fmt.Appendf(nil, "%d %d %s %d %s", r.Start, r.End, r.Key, r.Count, r.Worker)
}

// errMalformed is wrapped by the error of an output value that does not
// parse.
var errMalformed = errors.New("torture: malformed output value")

func parseScaleResult(b []byte) (scaleResult, error) {
	f := strings.Fields(string(b))
	if len(f) != 5 {
		return scaleResult{}, fmt.Errorf("%w: %q: want 5 fields, got %d", errMalformed, b, len(f))
	}
	var r scaleResult
	var err1, err2, err3 error
	r.Start, err1 = strconv.ParseInt(f[0], 10, 64)
	r.End, err2 = strconv.ParseInt(f[1], 10, 64)
	r.Count, err3 = strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return scaleResult{}, fmt.Errorf("%w: %q: %w", errMalformed, b, err)
	}
	r.Key, r.Worker = f[2], f[4]
	return r, nil
}

// scaleRelayed is one output record of the stateless variant: the input
// record at Partition/Offset, with its Key and Timestamp (milliseconds),
// relayed by Worker. Its value is "partition offset key timestamp worker".
type scaleRelayed struct {
	Partition int32
	Offset    int64
	Key       string
	Timestamp int64
	Worker    string
}

func (r scaleRelayed) encode() []byte {
	return fmt.Appendf(nil, "%d %d %s %d %s", r.Partition, r.Offset, r.Key, r.Timestamp, r.Worker)
}

func parseScaleRelayed(b []byte) (scaleRelayed, error) {
	f := strings.Fields(string(b))
	if len(f) != 5 {
		return scaleRelayed{}, fmt.Errorf("%w: %q: want 5 fields, got %d", errMalformed, b, len(f))
	}
	var r scaleRelayed
	p, err1 := strconv.ParseInt(f[0], 10, 32)
	off, err2 := strconv.ParseInt(f[1], 10, 64)
	ts, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return scaleRelayed{}, fmt.Errorf("%w: %q: %w", errMalformed, b, err)
	}
	r.Partition, r.Offset, r.Key, r.Timestamp, r.Worker = int32(p), off, f[2], ts, f[4]
	return r, nil
}
