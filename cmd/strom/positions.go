package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/positions"
)

func newPositionsCmd(a *app) *cobra.Command {
	var state string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "positions --state DIR",
		Short: "List the positions a consumer saved, with their lag",
		Long: `List every position saved in a consumer's checkpoint folder (a FileStore:
one <topic>-<partition>.position file each), with the partition's log start
offset and next offset (high watermark) in the log and the lag (next offset
minus position).

A position is the next offset the consumer will read, and the NOTE column
says where a consumer (source.FromStore) will in fact resume when that is
elsewhere, by the rules it applies:
  - a later epoch began below the position (verify --repair, a truncation
    or a writer's recovery cut the log after the position was saved, and
    records may have been appended since): it resumes where that epoch
    began, so no new record is skipped; the lag counts from there;
  - the position is above the next offset and no epoch says where the log
    was cut (the position has no epoch, or comes from another log): it
    stops with an offset-out-of-range error rather than skip or repeat
    records; move it with "strom positions set" (lag: -);
  - the position is below the log start offset (records deleted by
    retention before they were read): by default it resumes at the log
    start offset (OnOutOfRange: ResetEarliest; ResetLatest resumes at the
    next offset, ResetError stops);
  - the position was saved against another topic ID than the topic's (the
    topic was deleted and created again, and the position counts records
    of the old one): by default it resumes at the log start offset, as
    above (ResetError stops, naming both IDs).
A topic or partition the log does not have is shown with "-" for its
offsets and lag.

A position file that does not parse is reported on stderr, naming the file
and what is wrong with it; the others are still listed, and the exit
status is then 3.

--json prints one JSON array, of the positions that parse, of objects with
the fields topic, partition, position, epoch (-1: unknown), topicId (absent
when the position has none, saved before topic IDs), logStartOffset,
nextOffset, resumeOffset (where the consumer will resume, with the default
reset policy; null when it will stop with an error) and lag (the last four
null when the log lacks the partition), and note.`,
		Example: `  strom positions --dir /var/lib/app/log --state /var/lib/app/state-0
  strom positions --state state-0 --json`,
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.listPositions(state, asJSON)
		},
	}
	cmd.PersistentFlags().StringVar(&state, "state", "", "the consumer's checkpoint folder (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newPositionsSetCmd(a, &state))
	return cmd
}

func newPositionsSetCmd(a *app, state *string) *cobra.Command {
	return &cobra.Command{
		Use:   "set --state DIR TOPIC PARTITION OFFSET|earliest|latest",
		Short: "Save a consumer's position for one partition",
		Long: `Save a position for TOPIC's PARTITION in the checkpoint folder, so the
consumer that uses the folder reads from there when it next starts: an
OFFSET between the partition's log start offset and next offset, earliest
(the log start offset) or latest (the next offset: skip everything stored).

The position is saved with the epoch of the record just below it and the
topic's ID, as a consumer that had read up to there would, so the log's
epoch check (KIP-320) and the check for a topic created again work on it. Stop the consumer first: a running one overwrites
the position at its next checkpoint. The checkpoint folder must exist.`,
		Example: `  strom positions set --dir /var/lib/app/log --state /var/lib/app/state-0 events 0 earliest
  strom positions set --state state-0 events 2 1500`,
		Args: exactArgs(3, "TOPIC PARTITION OFFSET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.setPosition(*state, args[0], args[1], args[2])
		},
	}
}

// openStore opens the checkpoint folder --state names, which must exist:
// NewFileStore would create it.
func openStore(state string) (*checkpoint.FileStore, error) {
	if state == "" {
		return nil, usageErrorf("no checkpoint folder: give --state DIR")
	}
	if err := checkDir("checkpoint folder", state); err != nil {
		return nil, err
	}
	return checkpoint.NewFileStore(state)
}

// positionRow is one line of `strom positions`.
type positionRow struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Position       int64  `json:"position"`
	Epoch          int32  `json:"epoch"`
	TopicID        string `json:"topicId,omitempty"`
	LogStartOffset *int64 `json:"logStartOffset"`
	NextOffset     *int64 `json:"nextOffset"`
	// ResumeOffset is where a consumer resuming from the position reads
	// next (log.Partition.ResumeOffset, and the default reset policy below
	// the log start offset); nil when it will stop with an error.
	ResumeOffset *int64 `json:"resumeOffset"`
	Lag          *int64 `json:"lag"`
	Note         string `json:"note,omitempty"`
}

func (a *app) listPositions(state string, asJSON bool) (err error) {
	lg, err := a.openRead()
	if err != nil {
		return err
	}
	defer lg.Close()
	store, err := openStore(state)
	if err != nil {
		return err
	}
	saved, corrupt, err := positions.List(store)
	if err != nil {
		return err
	}
	for _, e := range corrupt {
		fmt.Fprintln(a.stderr, "strom:", e)
	}
	if len(corrupt) > 0 {
		defer func() {
			if err == nil {
				err = fmt.Errorf("%w: %d position file(s) in %s do not parse (listed above)", errCorruptFound, len(corrupt), store.Dir())
			}
		}()
	}
	rows := make([]positionRow, 0, len(saved))
	for _, s := range saved {
		row := positionRow{Topic: s.Topic, Partition: s.Partition, Position: s.Position.Offset, Epoch: s.Position.Epoch,
			TopicID: s.Position.TopicID.String()}
		r, err := positions.Of(lg, s)
		if err != nil {
			return err
		}
		row.LogStartOffset, row.NextOffset, row.ResumeOffset, row.Lag, row.Note = r.LogStartOffset, r.NextOffset, r.ResumeOffset, r.Lag, r.Note
		rows = append(rows, row)
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		if len(corrupt) == 0 { // else the files are there, and stderr says what is wrong with them
			fmt.Fprintf(a.stdout, "no positions saved in %s\n", store.Dir())
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tPOSITION\tEPOCH\tLOG START\tNEXT OFFSET\tLAG\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s", r.Topic, r.Partition, r.Position, r.Epoch,
			optInt(r.LogStartOffset), optInt(r.NextOffset), optInt(r.Lag))
		if r.Note != "" { // the last cell, unpadded
			fmt.Fprintf(tw, "\t%s", r.Note)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// optInt formats an optional number, "-" for none.
func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// parseNonNegative parses a partition, offset or count argument.
func parseNonNegative(what, s string, bits int) (int64, error) {
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil || n < 0 {
		return 0, usageErrorf("%s %q is not a number >= 0", what, s)
	}
	return n, nil
}

func (a *app) setPosition(state, topic, partArg, offArg string) error {
	pn, err := parseNonNegative("partition", partArg, 32)
	if err != nil {
		return err
	}
	var off int64
	if offArg != "earliest" && offArg != "latest" {
		if off, err = parseNonNegative("offset", offArg, 64); err != nil {
			return usageErrorf("%w (or earliest, latest)", err)
		}
	}
	store, err := openStore(state)
	if err != nil {
		return err
	}
	lg, err := a.openRead()
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	if pn >= int64(t.Partitions()) {
		return usageErrorf("partition %d: topic %s has partitions 0 to %d", pn, topic, t.Partitions()-1)
	}
	p, err := t.Partition(int32(pn))
	if err != nil {
		return err
	}
	start, next := p.StartOffset(), p.HighWatermark()
	switch offArg {
	case "earliest":
		off = start
	case "latest":
		off = next
	}
	if off < start || off > next {
		return fmt.Errorf("offset %d of %s partition %d is outside the log's %d (log start offset) to %d (next offset)", off, topic, pn, start, next)
	}
	pos := checkpoint.At(off)
	pos.TopicID = t.ID()
	if off > start {
		recs, err := p.Read(off-1, 1)
		if err != nil {
			return fmt.Errorf("reading the epoch of %s partition %d offset %d: %w", topic, pn, off-1, err)
		}
		pos.Epoch = recs[0].Epoch
	}
	if err := store.Save(context.Background(), topic, int32(pn), pos); err != nil {
		return err
	}
	path, _ := store.Path(topic, int32(pn))
	fmt.Fprintf(a.stdout, "%s partition %d: position %s saved in %s\n", topic, pn, pos, path)
	return nil
}
