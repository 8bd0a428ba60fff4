package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// drainTimeout bounds how long the records in flight may go on after a
// signal, in Kafka mode.
const drainTimeout = 10 * time.Second

// stateDir is, in --dir, the local snapshot cache of the changelogs in
// Kafka mode (source.KafkaStateDir).
const stateDir = "state"

// throughName names the repartition topic of --repartition: GROUP-by-ip-repartition.
const throughName = "by-ip"

// watchKafka runs the window pipeline over a Kafka topic as one member of
// the consumer group cfg.group, until ctx ends (a signal): the same
// pipeline as over the log (pipeline), with source.Kafka instead of
// source.Topic and the source as the checkpoint store, which keeps the
// window's state per partition in a changelog topic, so that a partition
// and its windows move together between the group's processes. Results go
// to cfg.dir's windows.jsonl when cfg.dir is set, which also keeps the
// local snapshot cache of the windows' changelogs.
//
// The window is keyed by the attempt's source IP. Without cfg.repartition
// the topic's records must be keyed by it (the key follows the
// partitioning: every line of an IP reaches one process); with it, the
// attempts go through a repartition topic keyed by IP first
// (stream.Repartition over KafkaSource.Through), whatever the topic's keys.
func watchKafka(ctx context.Context, cfg config, stdout, stderr io.Writer) (*summary, error) {
	var windows io.Writer = io.Discard
	if cfg.dir != "" {
		if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
			return nil, err
		}
		wf, err := openWindows(filepath.Join(cfg.dir, windowsFile))
		if err != nil {
			return nil, err
		}
		defer wf.Close()
		windows = wf
	}
	var clientOpts []kgo.Opt
	if cfg.sessionTimeout > 0 {
		clientOpts = append(clientOpts, kgo.SessionTimeout(cfg.sessionTimeout), kgo.HeartbeatInterval(cfg.sessionTimeout/10))
	}
	if cfg.rebalanceTimeout > 0 {
		clientOpts = append(clientOpts, kgo.RebalanceTimeout(cfg.rebalanceTimeout))
	}
	opts := []source.KafkaOption{source.KafkaClientOpts(clientOpts...)}
	if cfg.dir != "" {
		// A local snapshot cache of the windows' changelogs: a partition
		// that comes back to this process (or to one started again on
		// this --dir) restores from it and the changelog's tail.
		opts = append(opts, source.KafkaStateDir(filepath.Join(cfg.dir, stateDir)))
	}
	brokers := strings.Split(cfg.brokers, ",")
	where := func(f stream.Failure) string {
		return fmt.Sprintf("a line (%s/%d offset %d)", f.Topic, f.Partition, f.Offset)
	}
	sum := &summary{}
	fmt.Fprintf(stderr, "sshwatch: reading the Kafka topic %s as a member of the group %s at %s (SIGTERM stops it)\n",
		cfg.topic, cfg.group, cfg.brokers)
	// A source failure the client does not heal by itself (brokers gone
	// past KafkaTimeout) rebuilds the pipeline from the group's commits.
	err := stream.Forever(ctx, func() stream.Runner {
		src, err := source.Kafka(brokers, cfg.group, []string{cfg.topic}, opts...)
		if err != nil {
			return failed{err}
		}
		byIP := func(as *stream.Stream[attempt]) *stream.Keyed[string, attempt] {
			// The producer keyed each line by its source IP: Kafka's
			// partitioner put every line of an IP in one partition.
			return stream.KeyBy(as, attemptIP).FollowsPartitioning()
		}
		if cfg.repartition {
			via, err := src.Through(throughName)
			if err != nil {
				return failed{err}
			}
			byIP = func(as *stream.Stream[attempt]) *stream.Keyed[string, attempt] {
				return stream.Repartition(as, attemptIP, via)
			}
		}
		// On SIGTERM the records in flight finish (within drainTimeout),
		// their positions and windows are saved, and the member leaves
		// the group: its partitions move to the others at once.
		in := stream.From(src, stream.WithDrainTimeout(drainTimeout))
		return pipeline(in, byIP, cfg.year, cfg, sum, where, windows, stdout, stderr).Checkpointing(src)
	})
	return sum, err
}

// failed is a pipeline that could not be built: stream.Forever returns its
// error.
type failed struct{ err error }

func (f failed) Run(context.Context) error { return f.err }
