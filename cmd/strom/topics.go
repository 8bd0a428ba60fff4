package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newTopicsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Create, list and describe topics",
		Long:  `Create, list and describe the topics of a log directory.`,
		Example: `  strom topics create events --partitions 3
  strom topics list
  strom topics describe events --json`,
		Args: unknownCommand,
		RunE: showHelp,
	}
	cmd.AddCommand(newTopicsCreateCmd(a), newTopicsListCmd(a), newTopicsDescribeCmd(a))
	return cmd
}

type createFlags struct {
	partitions     int
	retentionBytes int64
	retention      time.Duration
	timestampType  string
	cleanupPolicy  string
}

func newTopicsCreateCmd(a *app) *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic",
		Long: `Create TOPIC with --partitions partitions (fixed at creation), and the log
directory when it does not exist yet (the only command that creates one).
Creating a topic that exists with the same partition count succeeds and sets
the retention bounds given; another count is an error.

Topic names follow Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], not "." or "..".
--retention-bytes and --retention bound what each partition keeps (see
"strom retention"); unlimited when not given. Negative values are an error.
--timestamp-type LogAppendTime stores the time of each append instead of the
record's timestamp; CreateTime (the default) stores the record's, refusing one
more than an hour ahead of the clock. --cleanup-policy compact (or
compact,delete) keeps the latest record of each key, as Kafka's cleanup.policy
does, and refuses records without a key; delete (the default) drops whole
segments by the retention bounds only.`,
		Example: `  strom topics create events --partitions 3
  strom topics create audit --retention-bytes 1073741824 --retention 168h
  strom topics create users --cleanup-policy compact`,
		Args: exactArgs(1, "TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.createTopic(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.partitions, "partitions", 1, "number of partitions")
	fl.Int64Var(&f.retentionBytes, "retention-bytes", 0, "keep at least this many bytes per partition, delete older segments (default: unlimited)")
	fl.DurationVar(&f.retention, "retention", 0, "delete segments whose newest record is older than this, e.g. 168h (default: unlimited)")
	fl.StringVar(&f.timestampType, "timestamp-type", "CreateTime", "CreateTime (the record's timestamp) or LogAppendTime (the time of the append)")
	fl.StringVar(&f.cleanupPolicy, "cleanup-policy", "delete", "delete, compact (keep the latest record of each key) or compact,delete")
	return cmd
}

func (a *app) createTopic(cmd *cobra.Command, topic string, f createFlags) error {
	if a.dir == "" {
		return usageErrorf("no log directory: give --dir DIR or set STROM_DIR")
	}
	if f.partitions < 1 || f.partitions > log.MaxPartitions {
		return usageErrorf("--partitions %d: want 1 to %d", f.partitions, log.MaxPartitions)
	}
	if err := log.ValidateTopicName(topic); err != nil {
		return usageErrorf("%w", err)
	}
	if err := checkFlagNonNegative(cmd, "retention-bytes", f.retentionBytes); err != nil {
		return err
	}
	if cmd.Flags().Changed("retention") && f.retention < 0 {
		return usageErrorf("--retention %s is negative; run '%s --help'", f.retention, cmd.CommandPath())
	}
	var opts []log.TopicOption
	if cmd.Flags().Changed("retention-bytes") {
		opts = append(opts, log.RetentionBytes(f.retentionBytes))
	}
	if cmd.Flags().Changed("retention") {
		opts = append(opts, log.Retention(f.retention))
	}
	if cmd.Flags().Changed("timestamp-type") {
		tt, err := log.ParseTimestampType(f.timestampType)
		if err != nil {
			return usageErrorf("--timestamp-type: %w; run '%s --help'", err, cmd.CommandPath())
		}
		opts = append(opts, log.WithTimestampType(tt))
	}
	if cmd.Flags().Changed("cleanup-policy") {
		cp, err := log.ParseCleanupPolicy(f.cleanupPolicy)
		if err != nil {
			return usageErrorf("--cleanup-policy: %w; run '%s --help'", err, cmd.CommandPath())
		}
		opts = append(opts, log.WithCleanupPolicy(cp))
	}
	_, statErr := os.Stat(a.dir)
	created := errors.Is(statErr, os.ErrNotExist)
	lg, err := log.Open(a.dir, log.CreateIfMissing(), log.WithRetentionCheckInterval(0))
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.CreateTopic(topic, f.partitions, opts...)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(a.stdout, "created log directory %s\n", a.dir)
	}
	tt := ""
	if t.TimestampType() != log.CreateTime {
		tt = ", timestamp type " + t.TimestampType().String()
	}
	if t.CleanupPolicy() != log.CleanupDelete {
		tt += ", cleanup policy " + t.CleanupPolicy().String()
	}
	fmt.Fprintf(a.stdout, "topic %s: %d partition(s), %s%s\n", t.Name(), t.Partitions(), policyString(t.Retention()), tt)
	return nil
}
