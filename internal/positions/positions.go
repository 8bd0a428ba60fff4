// Package positions reads the consumer positions saved in a
// checkpoint.FileStore folder and says, for each, where a consumer
// resuming from it reads next and how far behind it is. `strom positions`
// and the log page of package web (`strom serve`) both show them, so the
// two agree by construction: a position the log was cut below, one past the
// high watermark, one below the log start offset or one saved against a
// topic deleted and created again reads the same on both.
package positions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
)

// List returns the positions saved in store, sorted by topic and
// partition. A position file that does not parse (checkpoint.ErrCorrupt,
// naming the file) is returned in corrupt instead of failing the others;
// err is the folder's, when it cannot be listed, or another read error.
// Other files of the folder (state files, a Save's temporary files) are
// passed over. It only reads.
func List(store *checkpoint.FileStore) (saved []checkpoint.TopicPosition, corrupt []error, err error) {
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

// Resume is where a consumer resuming from a saved position reads next,
// by the rules of source.FromStore, and its lag.
type Resume struct {
	// LogStartOffset and NextOffset (the high watermark) are the
	// partition's; nil when the log has no such partition.
	LogStartOffset, NextOffset *int64
	// ResumeOffset is where the consumer reads next
	// (log.Partition.ResumeOffset, and the default reset policy below the
	// log start offset); nil when it will stop with an error or the log
	// has no such partition.
	ResumeOffset *int64
	// Lag is NextOffset minus the offset the consumer resumes from, in
	// records; nil when the consumer will stop with an error or the log
	// has no such partition.
	Lag *int64
	// Note says what is odd about the position, "" when nothing is.
	Note string
}

// Of says where a consumer resuming from s reads next in lg. It returns an
// error only when the partition cannot be read (a damaged log); a topic or
// partition the log does not have is a Note.
func Of(lg *log.Log, s checkpoint.TopicPosition) (Resume, error) {
	var r Resume
	t, err := lg.Topic(s.Topic)
	if errors.Is(err, log.ErrUnknownTopic) {
		r.Note = "topic not in the log"
		return r, nil
	} else if err != nil {
		return r, err
	}
	p, err := t.Partition(s.Partition)
	if errors.Is(err, log.ErrPartitionOutOfRange) {
		r.Note = fmt.Sprintf("partition not in the log (the topic has %d)", t.Partitions())
		return r, nil
	} else if err != nil {
		return r, err
	}
	start, next := p.StartOffset(), p.HighWatermark()
	r.LogStartOffset, r.NextOffset = &start, &next
	if id := t.ID(); !s.Position.TopicID.IsZero() && !id.IsZero() && s.Position.TopicID != id {
		resume, lag := start, next-start
		r.ResumeOffset, r.Lag = &resume, &lag
		r.Note = fmt.Sprintf("saved against topic ID %s, the topic now has ID %s: it was deleted and created again; the consumer resumes at the log start offset %d by default (OnOutOfRange: ResetLatest resumes at %d, ResetError stops)",
			s.Position.TopicID, id, start, next)
		return r, nil
	}
	pos := s.Position.Offset
	resume, err := p.ResumeOffset(pos, s.Position.Epoch)
	lag := next - pos
	var oor *log.OffsetOutOfRangeError
	switch {
	case errors.As(err, &oor) && resume < oor.StartOffset:
		reset := oor.StartOffset
		r.ResumeOffset, r.Lag = &reset, &lag
		r.Note = fmt.Sprintf("below the log start offset %d: %d records deleted unread; the consumer resumes at %d by default (OnOutOfRange: ResetLatest resumes at %d, ResetError stops)",
			reset, reset-resume, reset, oor.NextOffset)
	case errors.As(err, &oor):
		why := "the position has no epoch"
		if s.Position.Epoch >= 0 {
			why = fmt.Sprintf("its epoch %d is the log's latest or unknown to it: the position may come from another log", s.Position.Epoch)
		}
		r.Note = fmt.Sprintf("position %d is past the high watermark %d, and no epoch of the log says where it was cut (%s): "+
			"the consumer will stop with an offset-out-of-range error rather than skip or repeat records; set where it resumes with 'strom positions set'",
			pos, oor.NextOffset, why)
	case err != nil:
		return r, fmt.Errorf("topic %s partition %d: where position %d resumes: %w", s.Topic, s.Partition, pos, err)
	case resume < pos:
		lag = next - resume
		r.ResumeOffset, r.Lag = &resume, &lag
		cut := "a later epoch began at %d, below this position: the log was cut there after it was saved (by verify --repair, a truncation or a writer's recovery); " +
			"the consumer will resume at %[1]d, so the records appended since are not skipped"
		if pos > next {
			cut = "position %[2]d is past the high watermark %[3]d: records it had passed were dropped after it was saved (by verify --repair, a truncation or a writer's recovery; " +
				"a later epoch began at %[1]d); the consumer will resume at %[1]d"
		}
		r.Note = fmt.Sprintf(cut, resume, pos, next)
	default:
		r.ResumeOffset, r.Lag = &resume, &lag
	}
	return r, nil
}
