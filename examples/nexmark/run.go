package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// Query is one Nexmark query as the command runs it. A new query is one
// function building its pipeline (func(Inputs) *stream.Stream[T], as Q0)
// and one line in queries.
type Query struct {
	// Name is the --query name: "q0".
	Name string
	// Topics are the topics the query reads; its events are their records.
	Topics []string
	// FlinkPerCore is Flink 1.13's published throughput on the
	// nexmark/nexmark setup, in events/s per core (issue 22); 0 if none.
	FlinkPerCore float64
	// run builds the pipeline on in, ending in a sink that counts into out,
	// and runs it with checkpoints to in.Store.
	run func(ctx context.Context, in Inputs, out *Output) error
}

// queries are the queries built so far, in the order --query all runs them.
var queries = []Query{
	define("q0", Q0, 155.0e3, TopicBid),
	define("q1", Q1, 157.9e3, TopicBid),
	define("q2", Q2, 175.2e3, TopicBid),
	define("q3", Q3, 152.12e3, TopicPerson, TopicAuction),
	define("q4", Q4, 34.33e3, TopicAuction, TopicBid),
	define("q5", Q5, 22.1e3, TopicBid),
	define("q7", Q7, 12.3e3, TopicBid),
	define("q8", Q8, 146.14e3, TopicPerson, TopicAuction),
	define("q9", Q9, 14.24e3, TopicAuction, TopicBid),
	define("q11", Q11, 39.7e3, TopicBid),
	define("q12", Q12, 75.7e3, TopicBid),
}

// lookup returns the query named name.
func lookup(name string) (Query, bool) {
	for _, q := range queries {
		if q.Name == name {
			return q, true
		}
	}
	return Query{}, false
}

// define makes a Query of a pipeline builder: the built stream goes to a
// sink that counts its values into an Output (and writes each as a line to
// Output.W when set), checkpointing to the Inputs' store every
// stream.DefaultCheckpointInterval (200 ms) and once at the end.
func define[T any](name string, build func(Inputs) *stream.Stream[T], flink float64, topics ...string) Query {
	return Query{Name: name, Topics: topics, FlinkPerCore: flink, run: func(ctx context.Context, in Inputs, out *Output) error {
		return build(in).
			To(sink.Func(func(_ context.Context, vs []T) error {
				out.N += int64(len(vs))
				if out.W == nil {
					return nil
				}
				for _, v := range vs {
					if _, err := fmt.Fprintf(out.W, "%+v\n", v); err != nil {
						return fmt.Errorf("nexmark: write %s output: %w", name, err)
					}
				}
				return nil
			})).
			Checkpointing(in.Store, stream.CheckpointInterval(stream.DefaultCheckpointInterval)).
			Run(ctx)
	}}
}

// Output is where a query's results go: N counts them; W, if not nil,
// receives each as one line ("%+v").
type Output struct {
	N int64
	W io.Writer
}

// Result is one measured run of a query.
type Result struct {
	Query        string
	Events       int64         // records the query read (all of its topics)
	Outputs      int64         // values that reached the sink
	Wall         time.Duration // from the pipeline's build to Run's return
	CPU          time.Duration // the process's user + system CPU time over the same span
	FlinkPerCore float64
}

// EventsPerSec returns the events per wall-clock second.
func (r Result) EventsPerSec() float64 { return float64(r.Events) / r.Wall.Seconds() }

// CPUPerMillion returns the CPU seconds spent per million events.
func (r Result) CPUPerMillion() float64 { return r.CPU.Seconds() / (float64(r.Events) / 1e6) }

// PerCore returns the events per CPU second: events/s per core, the figure
// compared with Flink's.
func (r Result) PerCore() float64 { return float64(r.Events) / r.CPU.Seconds() }

// String returns the command's one line for the run.
func (r Result) String() string {
	return fmt.Sprintf("%s events=%d outputs=%d wall=%.3fs events/s=%.0f cpu-s/M-events=%.3f events/s/core=%.0f",
		r.Query, r.Events, r.Outputs, r.Wall.Seconds(), r.EventsPerSec(), r.CPUPerMillion(), r.PerCore())
}

// RunQuery runs q over the log in dir, opened read-only as a consumer in
// another process would, checkpointing to a new checkpoint.FileStore in
// stateDir (one that holds a position of q's topics is an error: the run
// would start there), and measures it. The topics are opened (their recovery walk
// done) before the clock starts, as a long-running consumer would have
// them. The run must read every record of q's topics: a saved position
// short of a topic's high watermark is an error. w may be nil.
func RunQuery(ctx context.Context, q Query, dir, stateDir string, w io.Writer, opts ...RunOption) (Result, error) {
	in := Inputs{}
	for _, o := range opts {
		o(&in)
	}
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		return Result{}, fmt.Errorf("nexmark: %s: open log: %w", q.Name, err)
	}
	defer lg.Close()
	hwm := make([]int64, len(q.Topics))
	var events int64
	for i, name := range q.Topics {
		t, err := lg.Topic(name)
		if err != nil {
			return Result{}, fmt.Errorf("nexmark: %s: topic %s in %s: %w", q.Name, name, dir, err)
		}
		p, err := t.Partition(0)
		if err != nil {
			return Result{}, fmt.Errorf("nexmark: %s: topic %s partition 0: %w", q.Name, name, err)
		}
		hwm[i] = p.HighWatermark()
		events += hwm[i] - p.StartOffset()
	}
	store, err := checkpoint.NewFileStore(stateDir)
	if err != nil {
		return Result{}, fmt.Errorf("nexmark: %s: %w", q.Name, err)
	}
	for _, name := range q.Topics {
		// A saved position would make the run start there and read less
		// than the events it counts.
		if pos, ok, err := store.Load(ctx, name, 0); err != nil || ok {
			return Result{}, fmt.Errorf("nexmark: %s: store %s must be new, holds topic %s position %d (%v)", q.Name, stateDir, name, pos.Offset, err)
		}
	}
	out := &Output{W: w}
	runtime.GC() // the generator's garbage is not the query's
	cpu0, wall0 := cpuTime(), time.Now()
	in.Log, in.Store = lg, store
	err = q.run(ctx, in, out)
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", ctx.Err()) // Run stops without error when its context ends
	}
	if err != nil {
		return Result{}, fmt.Errorf("nexmark: %s: %w", q.Name, err)
	}
	for i, name := range q.Topics {
		pos, ok, err := store.Load(ctx, name, 0)
		if err != nil || !ok || pos.Offset != hwm[i] {
			return Result{}, fmt.Errorf("nexmark: %s: topic %s: saved position %d (found %v, %v), want the high watermark %d", q.Name, name, pos.Offset, ok, err, hwm[i])
		}
	}
	return Result{Query: q.Name, Events: events, Outputs: out.N, Wall: wall, CPU: cpu, FlinkPerCore: q.FlinkPerCore}, nil
}

// RunOption configures RunQuery.
type RunOption func(*Inputs)

// WithConfig tells RunQuery the generator Config the events were made
// with (Inputs.Gen; default the zero Config, whose fields are the
// defaults). The joins size their bounds from it: a run over events of
// another Rate without it may miss pairs.
func WithConfig(cfg Config) RunOption { return func(in *Inputs) { in.Gen = cfg } }

// cpuTime returns the process's user plus system CPU time, all threads
// (getrusage(RUSAGE_SELF)).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("nexmark: getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
