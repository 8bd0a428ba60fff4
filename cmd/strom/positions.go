package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
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
	saved, corrupt, err := listSaved(store)
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
		p, id, err := partitionOf(lg, s.Topic, s.Partition)
		switch {
		case errors.Is(err, log.ErrUnknownTopic):
			row.Note = "topic not in the log"
		case errors.Is(err, log.ErrPartitionOutOfRange):
			row.Note = "partition not in the log"
		case err != nil:
			return err
		case !s.Position.TopicID.IsZero() && !id.IsZero() && s.Position.TopicID != id:
			start, next := p.StartOffset(), p.HighWatermark()
			lag := next - start
			row.LogStartOffset, row.NextOffset, row.ResumeOffset, row.Lag = &start, &next, &start, &lag
			row.Note = fmt.Sprintf("saved against topic ID %s, the topic now has ID %s: it was deleted and created again; the consumer resumes at the log start offset %d by default (OnOutOfRange: ResetLatest resumes at %d, ResetError stops)",
				s.Position.TopicID, id, start, next)
		default:
			if err := resumeOf(p, &row); err != nil {
				return err
			}
		}
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

// resumeOf fills in row's offsets, lag and note from partition p: where a
// consumer resuming from the saved position reads next, by the rules of
// source.FromStore (log.Partition.ResumeOffset: a later epoch that began
// below the position moves it back there; a position above the high
// watermark is an error, never a jump; one below the log start offset is
// reset, by default to the log start offset).
func resumeOf(p *log.Partition, row *positionRow) error {
	start, next := p.StartOffset(), p.HighWatermark()
	row.LogStartOffset, row.NextOffset = &start, &next
	resume, err := p.ResumeOffset(row.Position, row.Epoch)
	lag := next - row.Position
	var oor *log.OffsetOutOfRangeError
	switch {
	case errors.As(err, &oor) && resume < oor.StartOffset:
		start = oor.StartOffset
		row.ResumeOffset, row.Lag = &start, &lag
		row.Note = fmt.Sprintf("below the log start offset %d: %d records deleted unread; the consumer resumes at %d by default (OnOutOfRange: ResetLatest resumes at %d, ResetError stops)",
			start, start-resume, start, oor.NextOffset)
	case errors.As(err, &oor):
		why := "the position has no epoch"
		if row.Epoch >= 0 {
			why = fmt.Sprintf("its epoch %d is the log's latest or unknown to it: the position may come from another log", row.Epoch)
		}
		row.Note = fmt.Sprintf("position %d is past the high watermark %d, and no epoch of the log says where it was cut (%s): "+
			"the consumer will stop with an offset-out-of-range error rather than skip or repeat records; set where it resumes with 'strom positions set'",
			row.Position, oor.NextOffset, why)
	case err != nil:
		return err
	case resume < row.Position:
		lag = next - resume
		row.ResumeOffset, row.Lag = &resume, &lag
		cut := "a later epoch began at %d, below this position: the log was cut there after it was saved (by verify --repair, a truncation or a writer's recovery); " +
			"the consumer will resume at %[1]d, so the records appended since are not skipped"
		if row.Position > next {
			cut = "position %[2]d is past the high watermark %[3]d: records it had passed were dropped after it was saved (by verify --repair, a truncation or a writer's recovery; " +
				"a later epoch began at %[1]d); the consumer will resume at %[1]d"
		}
		row.Note = fmt.Sprintf(cut, resume, row.Position, next)
	default:
		row.ResumeOffset, row.Lag = &resume, &lag
	}
	return nil
}

// listSaved is store.List, except that a position file that does not parse
// (checkpoint.ErrCorrupt) is returned in corrupt instead of failing it all.
func listSaved(store *checkpoint.FileStore) (saved []checkpoint.TopicPosition, corrupt []error, err error) {
	entries, err := os.ReadDir(store.Dir())
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".position")
		i := strings.LastIndexByte(base, '-')
		if !ok || i < 1 || !e.Type().IsRegular() {
			continue
		}
		pn, err := strconv.ParseInt(base[i+1:], 10, 32)
		if err != nil || pn < 0 || log.ValidateTopicName(base[:i]) != nil {
			continue
		}
		pos, found, err := store.Load(context.Background(), base[:i], int32(pn))
		switch {
		case errors.Is(err, checkpoint.ErrCorrupt):
			corrupt = append(corrupt, err)
		case err != nil:
			return nil, nil, err
		case found: // else removed since ReadDir
			saved = append(saved, checkpoint.TopicPosition{Topic: base[:i], Partition: int32(pn), Position: pos})
		}
	}
	slices.SortFunc(saved, func(a, b checkpoint.TopicPosition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return saved, corrupt, nil
}

// optInt formats an optional number, "-" for none.
func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// partitionOf opens a partition of a topic, and returns it with the
// topic's ID.
func partitionOf(lg *log.Log, topic string, partition int32) (*log.Partition, log.TopicID, error) {
	t, err := lg.Topic(topic)
	if err != nil {
		return nil, log.TopicID{}, err
	}
	p, err := t.Partition(partition)
	return p, t.ID(), err
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
