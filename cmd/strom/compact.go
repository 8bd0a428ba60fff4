package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newCompactCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "compact [TOPIC...]",
		Short: "Run one cleaner pass over compacted topics and print what it removed",
		Long: `Run one cleaner pass now over each compacted topic named (created with
"topics create --cleanup-policy compact"), or over every compacted topic, and
print per partition the segments rewritten, the records and tombstones
removed, and the bytes before and after.

A pass keeps the latest record of each key in the sealed segments (the active
segment is never compacted), as Kafka's log cleaner does; offsets never
change, and a tombstone (a record with a null value) is kept until its
tombstone retention (24 hours by default) has passed since the pass that
first kept it. A process writing a compacted topic runs passes itself every
15 seconds when a partition is dirty enough. It is a write: it takes each
topic's writer lock, so it fails, naming the writer's pid, on a topic another
process is writing. A topic that is not compacted is skipped. A topic that
fails is reported on stderr and the others are still done; the exit status
is then 1.`,
		Example: `  strom compact --dir /var/lib/app/log
  strom compact users`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.compact(args)
		},
	}
}

func (a *app) compact(topics []string) error {
	now := time.Now()
	return a.eachTopic(topics, "compact", func(t *log.Topic) error {
		if !t.CleanupPolicy().Compacts() {
			fmt.Fprintf(a.stdout, "%s: not compacted (cleanup policy %s)\n", t.Name(), t.CleanupPolicy())
			return nil
		}
		rep, err := t.Compact(now)
		printCompaction(a, t.Name(), rep)
		return err
	})
}

// printCompaction prints what one pass over a topic did.
func printCompaction(a *app, topic string, rep log.CompactionReport) {
	if len(rep.Partitions) == 0 {
		fmt.Fprintf(a.stdout, "%s: nothing to compact (only sealed segments are compacted, never the active one)\n", topic)
		return
	}
	for _, p := range rep.Partitions {
		fmt.Fprintf(a.stdout, "%s partition %d: rewrote %d segment(s), removed %d records (%d tombstones), %d -> %d bytes; cleaned to offset %d\n",
			topic, p.Partition, p.Segments, p.RecordsRemoved, p.TombstonesRemoved, p.BytesBefore, p.BytesAfter, p.CleanedTo)
	}
}
