package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/samber/lo"
	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newVerifyCmd(a *app) *cobra.Command {
	var repair, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [TOPIC...]",
		Short: "Check every frame of every segment; --repair cuts what is damaged",
		Long: `Read every frame of every segment of the topics named (every topic when none
is), checking each CRC32C, body and offset, that segments are contiguous and
that no partition ends below its recovery point, by the rules the log's
recovery applies. It reads without a lock, beside a running writer. A log
directory that holds no topic is an error (exit 1), not a clean log: verify
says so, and names a subfolder that holds topics (--dir one level too high).

Each problem is printed with its topic, partition, segment file, byte
position and the offset the frame should hold, and verify exits 3. A torn
tail (the remains of an append a crash cut short, at the end of a partition)
is not corruption: it is printed, and the writer's next open cuts it.

--repair then opens each topic with a problem or a torn tail for writing
with the log's repair option, which cuts each partition at its first bad
frame (deleting any later segments), and prints what it cut and how many
records it dropped, from each partition's recovery report; then it verifies
again and exits 3 only if problems remain. Repair drops records: copy the
directory first if they matter. It takes the topics' writer locks, so it
fails while another process writes them.

--json prints one JSON object: topics, partitions, segments, records and
bytes read, problems and tornTails (each with topic, partition, segment,
position, offset and reason; a torn tail also its bytes), and with --repair,
repaired (topic, partition, segment, truncatedBytes, droppedRecords,
deletedSegments, reason) and after (the report of the second verify).`,
		Example: `  strom verify --dir /var/lib/app/log
  strom verify events --json
  strom verify --repair`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.verify(args, repair, asJSON)
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "cut damaged partitions at their first bad frame and say what was dropped")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// verifyJSON is the --json output of verify.
type verifyJSON struct {
	reportJSON
	Repaired []repairJSON `json:"repaired,omitempty"`
	After    *reportJSON  `json:"after,omitempty"`
}

// reportJSON is a log.VerifyReport with JSON names.
type reportJSON struct {
	Topics     int           `json:"topics"`
	Partitions int           `json:"partitions"`
	Segments   int           `json:"segments"`
	Records    int64         `json:"records"`
	Bytes      int64         `json:"bytes"`
	Problems   []problemJSON `json:"problems"`
	TornTails  []problemJSON `json:"tornTails"`
}

// problemJSON is one problem or torn tail.
type problemJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Segment   string `json:"segment"`
	Position  int64  `json:"position"`
	Offset    int64  `json:"offset"`
	Bytes     int64  `json:"bytes,omitempty"`
	Reason    string `json:"reason"`
}

// repairJSON is what repair cut from one partition.
type repairJSON struct {
	Topic           string   `json:"topic"`
	Partition       int32    `json:"partition"`
	Segment         string   `json:"segment"`
	TruncatedBytes  int64    `json:"truncatedBytes"`
	DroppedRecords  int64    `json:"droppedRecords"`
	DeletedSegments []string `json:"deletedSegments"`
	Reason          string   `json:"reason"`
}

func toReportJSON(r log.VerifyReport) reportJSON {
	return reportJSON{Topics: r.Topics, Partitions: r.Partitions, Segments: r.Segments, Records: r.Records, Bytes: r.Bytes,
		Problems: lo.Map(r.Problems, func(p *log.CorruptError, _ int) problemJSON {
			return problemJSON{Topic: p.Topic, Partition: p.Partition, Segment: p.Segment, Position: p.Position, Offset: p.Offset, Reason: p.Reason}
		}),
		TornTails: lo.Map(r.TornTails, func(t log.TornTail, _ int) problemJSON {
			return problemJSON{Topic: t.Topic, Partition: t.Partition, Segment: t.Segment, Position: t.Position, Offset: t.Offset, Bytes: t.Bytes, Reason: t.Reason}
		}),
	}
}

func (a *app) verify(topics []string, repair, asJSON bool) error {
	dir, err := a.logDir()
	if err != nil {
		return err
	}
	rep, err := log.Verify(dir, topics...)
	if err != nil {
		return err
	}
	if len(topics) == 0 && rep.Topics == 0 && len(rep.Problems) == 0 {
		return errors.New("nothing to verify: " + noTopics(dir))
	}
	out := verifyJSON{reportJSON: toReportJSON(rep)}
	if !asJSON {
		printVerify(a, rep)
	}
	final := rep
	if repair && (len(rep.Problems) > 0 || len(rep.TornTails) > 0) {
		if out.Repaired, err = repairTopics(dir, rep); err != nil {
			return err
		}
		if final, err = log.Verify(dir, topics...); err != nil {
			return err
		}
		after := toReportJSON(final)
		out.After = &after
		if !asJSON {
			for _, r := range out.Repaired {
				fmt.Fprintf(a.stdout, "repaired %s partition %d: cut %d bytes from %s (%s), dropped %d records, deleted %d later segment(s)\n",
					r.Topic, r.Partition, r.TruncatedBytes, r.Segment, r.Reason, r.DroppedRecords, len(r.DeletedSegments))
			}
			fmt.Fprint(a.stdout, "after repair: ")
			printVerify(a, final)
		}
	}
	if asJSON {
		if out.Problems == nil {
			out.Problems = []problemJSON{}
		}
		if out.TornTails == nil {
			out.TornTails = []problemJSON{}
		}
		if err := writeJSON(a, out); err != nil {
			return err
		}
	}
	if n := len(final.Problems); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more problem(s), listed on stdout)", n-1)
		}
		if out.After != nil {
			return fmt.Errorf("%w %w: %w%s", errCorruptFound, errRepairTried, final.Problems[0], more)
		}
		return fmt.Errorf("%w: %w%s", errCorruptFound, final.Problems[0], more)
	}
	return nil
}

// printVerify prints a verify report as text.
func printVerify(a *app, rep log.VerifyReport) {
	fmt.Fprintf(a.stdout, "verified %d topic(s), %d partition(s), %d segment(s): %d records, %d bytes\n",
		rep.Topics, rep.Partitions, rep.Segments, rep.Records, rep.Bytes)
	for _, p := range rep.Problems {
		fmt.Fprintf(a.stdout, "CORRUPT: topic %s partition %d segment %s byte %d offset %d: %s\n",
			p.Topic, p.Partition, p.Segment, p.Position, p.Offset, p.Reason)
	}
	for _, t := range rep.TornTails {
		fmt.Fprintf(a.stdout, "torn tail: topic %s partition %d segment %s byte %d offset %d: %d bytes, %s; the writer's next open (or verify --repair) cuts it\n",
			t.Topic, t.Partition, t.Segment, t.Position, t.Offset, t.Bytes, t.Reason)
	}
	if len(rep.Problems) == 0 {
		fmt.Fprintln(a.stdout, "no corruption found")
	}
}

// repairTopics opens every topic the report names for writing with
// log.WithRepair (ModeFile, so a repaired segment is not pre-sized) and
// returns what each partition's recovery cut.
func repairTopics(dir string, rep log.VerifyReport) ([]repairJSON, error) {
	names := lo.Uniq(append(
		lo.Map(rep.Problems, func(p *log.CorruptError, _ int) string { return p.Topic }),
		lo.Map(rep.TornTails, func(t log.TornTail, _ int) string { return t.Topic })...))
	slices.Sort(names)
	lg, err := log.Open(dir, log.WithRepair(), log.WithMode(log.ModeFile), log.WithRetentionCheckInterval(0))
	if err != nil {
		return nil, err
	}
	defer lg.Close()
	var out []repairJSON
	for _, name := range names {
		t, err := lg.WriteTopic(name)
		if err != nil {
			return out, fmt.Errorf("repairing topic %s: %w", name, err)
		}
		for i := range t.Partitions() {
			p, err := t.Partition(int32(i))
			if err != nil {
				return out, err
			}
			r := p.Recovery()
			if r.Segment == "" && len(r.DeletedSegments) == 0 {
				continue
			}
			out = append(out, repairJSON{Topic: name, Partition: int32(i), Segment: r.Segment, TruncatedBytes: r.TruncatedBytes,
				DroppedRecords: r.DroppedRecords, Reason: r.Reason,
				DeletedSegments: lo.Map(r.DeletedSegments, func(s string, _ int) string { return filepath.Base(s) })})
		}
	}
	return out, lg.Close()
}
