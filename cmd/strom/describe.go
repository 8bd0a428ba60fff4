package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/samber/lo"
	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newTopicsListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the topics of the log directory",
		Long: `List the topics of the log directory, sorted by name, with their partition
counts and retention policies. --json prints one JSON array of objects with
the fields topic, partitions, retentionBytes and retentionMs (-1: unlimited).

A topic is a folder with a topic.json. An empty directory is an empty log:
nothing is listed, stderr says so, and the exit status is 0. A missing path,
a file, and a directory that holds other things but no topic (dot files and
lost+found aside) are not a log: an error, exit 1, naming a subfolder that
holds topics when there is one (--dir one level too high).`,
		Example: `  strom topics list --dir /var/lib/app/log
  strom topics list --json`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.listTopicsCmd(asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// topicSummary is one topic of `topics list --json`.
type topicSummary struct {
	Topic          string `json:"topic"`
	Partitions     int    `json:"partitions"`
	RetentionBytes int64  `json:"retentionBytes"`
	RetentionMs    int64  `json:"retentionMs"`

	policy log.RetentionPolicy // for the text output
}

// listTopics returns the topic names of the log directory dir, sorted.
func listTopics(dir string) ([]string, error) {
	names, err := log.ListTopics(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("log directory %s does not exist", dir)
	}
	return names, err
}

func (a *app) listTopicsCmd(asJSON bool) error {
	lg, err := a.openRead()
	if err != nil {
		return err
	}
	defer lg.Close()
	names, err := lg.Topics()
	if err != nil {
		return err
	}
	sums := make([]topicSummary, 0, len(names))
	for _, name := range names {
		t, err := lg.Topic(name)
		if err != nil {
			return err
		}
		pol := t.Retention()
		sums = append(sums, topicSummary{Topic: name, Partitions: t.Partitions(), RetentionBytes: pol.Bytes, RetentionMs: retentionMs(pol), policy: pol})
	}
	if len(sums) == 0 {
		fmt.Fprintln(a.stderr, "strom:", noTopics(lg.Dir()))
	}
	if asJSON {
		return writeJSON(a, sums)
	}
	if len(sums) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tRETENTION")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Topic, s.Partitions, policyCell(s.policy))
	}
	return tw.Flush()
}

// retentionMs is a policy's age bound in milliseconds, -1 for unlimited.
func retentionMs(p log.RetentionPolicy) int64 {
	if p.Age < 0 {
		return -1
	}
	return p.Age.Milliseconds()
}

// writeJSON prints v as one indented JSON document.
func writeJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTopicsDescribeCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe [TOPIC...]",
		Short: "Show the partitions and segments of topics",
		Long: `Show, for each topic named (every topic when none is), each partition's log
start offset (the lowest offset still stored), next offset (one past the last
record) and epoch, and each of its segments: its file, base offset, next
offset, records, bytes of frames, file length, bytes on disk, write path
(mmap or file for the active segment, sealed for the others) and last write
time (the file's modification time). A damaged partition (a bad frame, or an
end below its recovery point) fails the command with exit 3, naming the
segment, byte position and offset, as verify does.

A ModeMmap active segment is pre-sized: its file is longer than its frames,
and what it takes on disk depends on what was written and the file system.

The topic's ID (Kafka's topic ID: 22 characters of base64, drawn when the
topic was created, another for a topic deleted and created again; saved
with every checkpointed position) heads the text output; "none" for a
topic created before topic IDs and not written since.

--json prints one JSON array of topics:
  [{"topic","id","partitionCount","retentionBytes","retentionMs",
    "partitions":[{"partition","logStartOffset","nextOffset","epoch",
      "segments":[{"file","path","baseOffset","nextOffset","records","bytes",
        "fileBytes","diskBytes","writePath","sealed","sealMarker","modTime"}]}]}]
with modTime in RFC 3339 and sizes in bytes.

The write mode is an option of the writing process, stored nowhere, so
describe tells it from the file: an active segment whose file goes on in
zeros past its frames (and past any torn bytes after them) is mmap, the
reserved tail of a ModeMmap segment; any other is file, one a ModeMmap
writer closed (shrunk to its frames) too.`,
		Example: `  strom topics describe events
  strom topics describe --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.describe(args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// topicDesc is one topic of `topics describe --json`.
type topicDesc struct {
	Topic string `json:"topic"`
	// ID is the topic's ID (log.Topic.ID); "" for a topic without one.
	ID             string `json:"id"`
	PartitionCount int    `json:"partitionCount"`
	RetentionBytes int64  `json:"retentionBytes"`
	RetentionMs    int64  `json:"retentionMs"`
	// CleanupPolicy is Kafka's cleanup.policy: "delete", "compact" or
	// "compact,delete" (log.Topic.CleanupPolicy).
	CleanupPolicy string          `json:"cleanupPolicy"`
	Partitions    []partitionDesc `json:"partitions"`

	policy log.RetentionPolicy // for the text output
}

// partitionDesc is one partition of a topicDesc.
type partitionDesc struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"logStartOffset"`
	NextOffset     int64 `json:"nextOffset"`
	Epoch          int32 `json:"epoch"`
	// Cleaner is where compaction stands (log.CleanerState), on a
	// compacted topic only.
	Cleaner  *cleanerDesc  `json:"cleaner,omitempty"`
	Segments []segmentDesc `json:"segments"`
}

// cleanerDesc is a partitionDesc's compaction state.
type cleanerDesc struct {
	CleanedTo         int64     `json:"cleanedTo"`
	LastPass          time.Time `json:"lastPass,omitzero"`
	SealedBytes       int64     `json:"sealedBytes"`
	DirtyBytes        int64     `json:"dirtyBytes"`
	DirtyRatio        float64   `json:"dirtyRatio"`
	CompactedSegments int       `json:"compactedSegments"`
}

// segmentDesc is one segment of a partitionDesc.
type segmentDesc struct {
	File       string    `json:"file"`
	Path       string    `json:"path"`
	BaseOffset int64     `json:"baseOffset"`
	NextOffset int64     `json:"nextOffset"`
	Records    int64     `json:"records"`
	Bytes      int64     `json:"bytes"`
	FileBytes  int64     `json:"fileBytes"`
	DiskBytes  int64     `json:"diskBytes"`
	WritePath  string    `json:"writePath"`
	Sealed     bool      `json:"sealed"`
	SealMarker bool      `json:"sealMarker"`
	Compacted  bool      `json:"compacted"`
	ModTime    time.Time `json:"modTime"`
}

func (a *app) describe(topics []string, asJSON bool) error {
	lg, err := a.openRead()
	if err != nil {
		return err
	}
	defer lg.Close()
	if len(topics) == 0 {
		if topics, err = lg.Topics(); err != nil {
			return err
		}
	}
	descs := make([]topicDesc, 0, len(topics))
	for _, name := range topics {
		d, err := describeTopic(lg, name)
		if err != nil {
			return err
		}
		descs = append(descs, d)
	}
	if asJSON {
		return writeJSON(a, descs)
	}
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		printTopicDesc(a, d)
	}
	return nil
}

// describeTopic gathers what describe prints of one topic.
func describeTopic(lg *log.Log, name string) (topicDesc, error) {
	t, err := lg.Topic(name)
	if err != nil {
		return topicDesc{}, err
	}
	pol := t.Retention()
	d := topicDesc{Topic: name, ID: t.ID().String(), PartitionCount: t.Partitions(), RetentionBytes: pol.Bytes,
		RetentionMs: retentionMs(pol), CleanupPolicy: t.CleanupPolicy().String(), policy: pol}
	for i := range t.Partitions() {
		p, err := t.Partition(int32(i))
		if err != nil {
			return d, err
		}
		segs, err := p.Segments()
		if err != nil {
			return d, err
		}
		d.Partitions = append(d.Partitions, partitionDesc{
			Partition: p.ID(), LogStartOffset: p.StartOffset(), NextOffset: p.HighWatermark(), Epoch: p.Epoch(),
			Segments: lo.Map(segs, func(s log.SegmentInfo, _ int) segmentDesc {
				return segmentDesc{File: filepath.Base(s.Path), Path: s.Path, BaseOffset: s.BaseOffset,
					NextOffset: s.NextOffset, Records: s.Records, Bytes: s.Bytes, FileBytes: s.FileBytes,
					DiskBytes: s.DiskBytes, WritePath: s.WritePath, Sealed: s.Sealed, SealMarker: s.SealMarker, Compacted: s.Compacted,
					ModTime: s.ModTime}
			}),
		})
	}
	if t.CleanupPolicy().Compacts() {
		states, err := t.CleanerStates()
		if err != nil {
			return d, err
		}
		for i, st := range states {
			d.Partitions[i].Cleaner = &cleanerDesc{CleanedTo: st.CleanedTo, LastPass: st.LastPass, SealedBytes: st.SealedBytes,
				DirtyBytes: st.DirtyBytes, DirtyRatio: st.DirtyRatio(), CompactedSegments: st.CompactedSegments}
		}
	}
	return d, nil
}

// printTopicDesc prints one topic as a table, one line per segment, the
// partition's columns on its first.
func printTopicDesc(a *app, d topicDesc) {
	cp := ""
	if d.CleanupPolicy != log.CleanupDelete.String() {
		cp = ", cleanup policy " + d.CleanupPolicy
	}
	fmt.Fprintf(a.stdout, "topic %s: ID %s, %d partition(s), %s%s\n", d.Topic, cmp.Or(d.ID, "none"),
		d.PartitionCount, policyString(d.policy), cp)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLOG START\tNEXT OFFSET\tEPOCH\tSEGMENT\tBASE\tNEXT\tRECORDS\tBYTES\tFILE BYTES\tON DISK\tWRITE PATH\tLAST WRITE")
	for _, p := range d.Partitions {
		part := fmt.Sprintf("%d\t%d\t%d\t%d", p.Partition, p.LogStartOffset, p.NextOffset, p.Epoch)
		for _, s := range p.Segments {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", part, s.File, s.BaseOffset, s.NextOffset,
				s.Records, s.Bytes, s.FileBytes, s.DiskBytes, s.WritePath, s.ModTime.Format(time.RFC3339))
			part = "\t\t\t" // the partition's columns only on its first segment
		}
	}
	tw.Flush()
	for _, p := range d.Partitions {
		if c := p.Cleaner; c != nil {
			last := "no pass yet"
			if !c.LastPass.IsZero() {
				last = "last pass " + c.LastPass.Format(time.RFC3339)
			}
			fmt.Fprintf(a.stdout, "partition %d cleaner: cleaned to offset %d, dirty ratio %.2f (%d of %d sealed bytes), %d compacted segment(s), %s\n",
				p.Partition, c.CleanedTo, c.DirtyRatio, c.DirtyBytes, c.SealedBytes, c.CompactedSegments, last)
		}
	}
}
