package web

import (
	"fmt"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/positions"
)

// LogSnapshot is what the log page shows at one moment: the JSON of
// /snapshot.json and of each event of /events. Offsets are log offsets,
// sizes bytes, rates records per second.
type LogSnapshot struct {
	// Dir is the log directory, as given to NewLogPage.
	Dir string `json:"dir"`
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// SampleIntervalMs is the sample interval in milliseconds
	// (WithSampleInterval): the time each rate of PartitionFigures.Rates
	// covers, and how often /events sends a snapshot.
	SampleIntervalMs int64 `json:"sampleIntervalMs"`
	// History is the most rates PartitionFigures.Rates holds
	// (WithHistory): a sparkline's full width is History sample intervals.
	History int `json:"history"`
	// Topics lists the log's topics, sorted by name.
	Topics []TopicFigures `json:"topics"`
	// Positions lists every position saved in the state folders, by
	// folder in the order given, then topic, then partition.
	Positions []PositionFigures `json:"positions"`
	// Errors lists what could not be read outside a topic: a state folder
	// that is gone, a position file that does not parse (naming the file).
	// Never nil in JSON: [] when there is none.
	Errors []string `json:"errors"`
}

// TopicFigures is one topic of a LogSnapshot.
type TopicFigures struct {
	Topic string `json:"topic"`
	// ID is the topic's ID (log.Topic.ID, 22 characters of base64); ""
	// for a topic without one.
	ID string `json:"id"`
	// PartitionCount is the topic's number of partitions.
	PartitionCount int `json:"partitionCount"`
	// Partitions holds each partition's figures, by partition number; the
	// partitions read before an error when Error is set.
	Partitions []PartitionFigures `json:"partitions"`
	// Error says why the topic, or one of its partitions, could not be
	// read (a damaged segment names its file, byte position and offset);
	// "" when all was read.
	Error string `json:"error,omitempty"`
}

// PartitionFigures is one partition of a TopicFigures: the figures of
// `strom topics describe --json`, summed over the segments.
type PartitionFigures struct {
	Partition int32 `json:"partition"`
	// LogStartOffset is the lowest offset still stored.
	LogStartOffset int64 `json:"logStartOffset"`
	// NextOffset is the high watermark: one past the last record.
	NextOffset int64 `json:"nextOffset"`
	// Segments is the number of segment files.
	Segments int `json:"segments"`
	// Bytes is the size of the segments' frames, in bytes (the sum of
	// log.SegmentInfo.Bytes: the data, not what a ModeMmap segment
	// reserves).
	Bytes int64 `json:"bytes"`
	// Rate is the append rate over the last sample interval, in records
	// per second: the rise of the high watermark divided by the time
	// between the two samples; 0 before the partition's second sample.
	Rate float64 `json:"rate"`
	// Rates holds the append rates of the last samples, oldest first, in
	// records per second (the sparkline): at most WithHistory values,
	// fewer while the page is younger than that. Never nil in JSON.
	Rates []float64 `json:"rates"`
}

// PositionFigures is one position saved in a state folder, with its lag.
type PositionFigures struct {
	// State is the state folder (a checkpoint.FileStore folder) the
	// position was found in, as given to WithStateDirs.
	State     string `json:"state"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Position is the next offset the consumer reads.
	Position int64 `json:"position"`
	// LogStartOffset and NextOffset are the partition's, as in
	// PartitionFigures; nil when the log has no such partition.
	LogStartOffset *int64 `json:"logStartOffset"`
	NextOffset     *int64 `json:"nextOffset"`
	// ResumeOffset is where a consumer resuming from the position reads
	// next, by source.FromStore's rules (a later epoch that began below
	// the position moves it back there; below the log start offset it is
	// reset to the log start offset by default); nil when the consumer will
	// stop with an error or the log has no such partition. `strom
	// positions --json` gives the same.
	ResumeOffset *int64 `json:"resumeOffset"`
	// Lag is NextOffset minus the offset the consumer resumes from, in
	// records; nil when it will stop with an error or the log has no such
	// partition.
	Lag *int64 `json:"lag"`
	// Note says what is odd about the position, "" when nothing is: the
	// topic or partition is not in the log, the position is past the high
	// watermark or below the log start offset, it was cut by a later
	// epoch, or it was saved against another topic ID (the topic was
	// deleted and created again); each says where the consumer resumes.
	Note string `json:"note,omitempty"`
}

// collect reads a snapshot of the log and the state folders, without rates.
// A topic or folder that fails is reported in the snapshot, not returned:
// the page shows what it could read. Only topic is read when it is not "".
func (lp *LogPage) collect(topic string) LogSnapshot {
	snap := LogSnapshot{Dir: lp.dir, Time: time.Now(), SampleIntervalMs: lp.cfg.interval.Milliseconds(), History: lp.cfg.history,
		Topics: []TopicFigures{}, Positions: []PositionFigures{}, Errors: []string{}}
	names, err := lp.lg.Topics()
	if err != nil {
		snap.Errors = append(snap.Errors, fmt.Sprintf("listing the topics of %s: %v", lp.dir, err))
	}
	for _, name := range names {
		if topic == "" || name == topic {
			snap.Topics = append(snap.Topics, lp.topicFigures(name))
		}
	}
	for _, st := range lp.stores {
		saved, errs := savedPositions(st)
		snap.Errors = append(snap.Errors, errs...)
		for _, s := range saved {
			if topic == "" || s.Topic == topic {
				snap.Positions = append(snap.Positions, lp.positionFigures(st.name, s))
			}
		}
	}
	return snap
}

// topicFigures reads one topic's figures as `strom topics describe` does.
func (lp *LogPage) topicFigures(name string) TopicFigures {
	tf := TopicFigures{Topic: name, Partitions: []PartitionFigures{}}
	t, err := lp.lg.Topic(name)
	if err != nil {
		tf.Error = err.Error()
		return tf
	}
	tf.ID, tf.PartitionCount = t.ID().String(), t.Partitions()
	for i := range t.Partitions() {
		p, err := t.Partition(int32(i))
		if err != nil {
			tf.Error = err.Error()
			return tf
		}
		segs, err := p.Segments()
		if err != nil {
			tf.Error = fmt.Sprintf("partition %d: %v", i, err)
			return tf
		}
		pf := PartitionFigures{Partition: p.ID(), LogStartOffset: p.StartOffset(), NextOffset: p.HighWatermark(),
			Segments: len(segs), Rates: []float64{}}
		for _, s := range segs {
			pf.Bytes += s.Bytes
		}
		tf.Partitions = append(tf.Partitions, pf)
	}
	return tf
}

// positionFigures joins a saved position with its partition's figures and
// where a consumer resumes from it, as `strom positions` says
// (internal/positions, shared by both).
func (lp *LogPage) positionFigures(state string, s checkpoint.TopicPosition) PositionFigures {
	pf := PositionFigures{State: state, Topic: s.Topic, Partition: s.Partition, Position: s.Position.Offset}
	r, err := positions.Of(lp.lg, s)
	if err != nil {
		pf.Note = err.Error()
		return pf
	}
	pf.LogStartOffset, pf.NextOffset, pf.ResumeOffset, pf.Lag, pf.Note = r.LogStartOffset, r.NextOffset, r.ResumeOffset, r.Lag, r.Note
	return pf
}

// stateFolder is a state folder of WithStateDirs: its name as given and the
// FileStore that reads it.
type stateFolder struct {
	name  string
	store *checkpoint.FileStore
}

// savedPositions returns the positions saved in st, sorted by topic and
// partition, and an error message for each position file that does not
// parse (or for the folder, when it cannot be listed), as `strom positions`
// does: one bad file does not hide the others. It only reads.
func savedPositions(st stateFolder) ([]checkpoint.TopicPosition, []string) {
	saved, corrupt, err := positions.List(st.store)
	if err != nil {
		return nil, []string{fmt.Sprintf("state folder %s: %v", st.name, err)}
	}
	errs := make([]string, 0, len(corrupt))
	for _, e := range corrupt {
		errs = append(errs, fmt.Sprintf("state folder %s: %v", st.name, e))
	}
	return saved, errs
}
