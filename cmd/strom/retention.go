package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/samber/lo"
	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newRetentionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "retention [TOPIC...]",
		Short: "Apply the topics' retention policies once and print what was deleted",
		Long: `Apply each topic's retention policy (set by "topics create --retention-bytes
--retention") once, now, to the topics named, or to every topic, and print
the segments deleted from each partition and its new log start offset.

Retention deletes whole segments, oldest first, never a partition's active
one (see the log package's "Retention"). A segment is as old as its newest
record's timestamp, unless that lies ahead of the clock: then it is as old as
its file's modification time, so a record stamped in the future cannot keep
it, and a clock set back deletes nothing early. It is a write: it takes each topic's
writer lock, so it fails, naming the writer's pid, on a topic another process
is writing; that process applies the policy itself every 5 minutes. A topic
without a retention policy is skipped without taking its lock. A topic that
fails is reported on stderr and the others are still done; the exit status
is then 1.`,
		Example: `  strom retention --dir /var/lib/app/log
  strom retention events`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.retention(args)
		},
	}
}

func (a *app) retention(topics []string) error {
	now := time.Now()
	return a.eachTopic(topics, "retention of", func(t *log.Topic) error {
		if pol := t.Retention(); pol.Bytes < 0 && pol.Age < 0 {
			printRetention(a, t, log.RetentionReport{}) // unlimited: nothing to lock for
			return nil
		}
		rep, err := t.EnforceRetention(now)
		printRetention(a, t, rep)
		return err
	})
}

// eachTopic opens the log for writing, with no background retention check
// or cleaner, and runs fn on each topic named, or every topic: a write
// command over topics (retention, compact). A name that is not a topic name
// is a usage error before any topic is touched; a topic that fails is
// reported on stderr ("strom: VERB topic NAME: ...") and the others are
// still done, the command then failing with the count.
func (a *app) eachTopic(topics []string, verb string, fn func(*log.Topic) error) error {
	for _, name := range topics {
		if err := log.ValidateTopicName(name); err != nil {
			return err
		}
	}
	dir, err := a.logDir()
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		if topics, err = listTopics(dir); err != nil {
			return err
		}
	}
	lg, err := log.Open(dir, log.WithRetentionCheckInterval(0), log.WithCleanerInterval(0))
	if err != nil {
		return err
	}
	defer lg.Close()
	failed := 0
	for _, name := range topics {
		t, err := lg.Topic(name)
		if err == nil {
			err = fn(t)
		}
		if err != nil {
			failed++
			fmt.Fprintf(a.stderr, "strom: %s topic %s: %v\n", verb, name, err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s failed for %d of %d topic(s)", strings.Fields(verb)[0], failed, len(topics))
	}
	return nil
}

// printRetention prints what one topic's retention check deleted.
func printRetention(a *app, t *log.Topic, rep log.RetentionReport) {
	pol := t.Retention()
	if len(rep.Partitions) == 0 {
		fmt.Fprintf(a.stdout, "%s: nothing to delete (%s)\n", t.Name(), policyString(pol))
		return
	}
	for _, p := range rep.Partitions {
		names := lo.Map(p.Segments, func(s string, _ int) string { return filepath.Base(s) })
		fmt.Fprintf(a.stdout, "%s partition %d: deleted %d segment(s), %d records, %d bytes (%s); log start offset now %d\n",
			t.Name(), p.Partition, len(p.Segments), p.Records, p.Bytes, strings.Join(names, ", "), p.StartOffset)
	}
}

// policyCell is a policy in the RETENTION column of topics list: "unlimited",
// "bytes 1073741824", "age 168h0m0s", or both.
func policyCell(p log.RetentionPolicy) string {
	parts := []string{}
	if p.Bytes >= 0 {
		parts = append(parts, fmt.Sprintf("bytes %d", p.Bytes))
	}
	if p.Age >= 0 {
		parts = append(parts, fmt.Sprintf("age %s", p.Age))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

// policyString describes a retention policy in words.
func policyString(p log.RetentionPolicy) string {
	parts := []string{}
	if p.Bytes >= 0 {
		parts = append(parts, fmt.Sprintf("retention bytes %d", p.Bytes))
	}
	if p.Age >= 0 {
		parts = append(parts, fmt.Sprintf("retention %s", p.Age))
	}
	if len(parts) == 0 {
		return "retention unlimited"
	}
	return strings.Join(parts, ", ")
}
