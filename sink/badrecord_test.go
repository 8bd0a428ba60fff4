package sink_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The bad-record case: a topic "in" of badTotal records whose value at
// offset i is strconv.Itoa(i), except offset badOffset, which is
// badLine and fails strconv.Atoi.
const (
	badTotal  = 1002
	badOffset = 1001
	badLine   = "garbage line"
)

// writeNumbers creates topic "in" (one partition) in lg and appends the
// bad-record case to it.
func writeNumbers(t *testing.T, lg *log.Log) {
	t.Helper()
	tp, err := lg.CreateTopic("in", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	recs := make([]log.Record, badTotal)
	for i := range recs {
		v := strconv.Itoa(i)
		if i == badOffset {
			v = badLine
		}
		recs[i] = log.Record{Value: []byte(v)}
	}
	first, err := p.Append(context.Background(), recs...)
	require.NoError(t, err)
	require.Equal(t, int64(0), first)
}

// parse is the stage function of the bad-record case.
func parse(_ context.Context, r log.Record) (int, error) { return strconv.Atoi(string(r.Value)) }

// intSink collects the ints written to it, safe for concurrent use.
type intSink struct {
	mu     sync.Mutex
	values []int
}

func (s *intSink) Write(_ context.Context, vs []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, vs...)
	return nil
}

func (s *intSink) got() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.values...)
}

// badRun is one run of the bad-record pipeline.
type badRun struct {
	values []int
	stats  stream.StageStats // of the stage named "parse"
	err    error
}

// runParse runs From(Partition(lg, "in", 0, FromStore(store), Replay()))
// -> MapTo(parse, Name("parse"), policy) -> To(ints) -> Checkpointing(store).
func runParse(t *testing.T, lg *log.Log, store checkpoint.Store, policy stream.StageOption, srcOpts ...source.PartitionOption) badRun {
	t.Helper()
	return runParseWith(t, lg, store, []stream.StageOption{policy}, srcOpts...)
}

// runParseWith is runParse with any options of the parse stage.
func runParseWith(t *testing.T, lg *log.Log, store checkpoint.Store, stageOpts []stream.StageOption, srcOpts ...source.PartitionOption) badRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srcOpts = append([]source.PartitionOption{source.Replay()}, srcOpts...)
	ints := &intSink{}
	s := stream.MapTo(stream.From(source.Partition(lg, "in", 0, source.FromStore(store), srcOpts...)),
		parse, append([]stream.StageOption{stream.Name("parse")}, stageOpts...)...).
		To(ints).
		Checkpointing(store)
	err := s.Run(ctx)
	out := badRun{values: ints.got(), err: err}
	for _, st := range s.Stats() {
		if st.Name == "parse" {
			out.stats = st
		}
	}
	require.Equal(t, "parse", out.stats.Name, "the parse stage is in Stats")
	return out
}

// position returns the position saved for in/0, 0 when none was saved.
func position(t *testing.T, store checkpoint.Store) int64 {
	t.Helper()
	pos, found, err := store.Load(context.Background(), "in", 0)
	require.NoError(t, err)
	if !found {
		return 0
	}
	return pos.Offset
}

// requireSkipped checks the result of the Skip policy over the whole topic.
func requireSkipped(t *testing.T, r badRun, store checkpoint.Store) {
	t.Helper()
	require.NoError(t, r.err)
	require.Len(t, r.values, badTotal-1)
	for i, v := range r.values {
		require.Equal(t, i, v, "every parsable line once, in order")
	}
	require.Equal(t, int64(badTotal), r.stats.In)
	require.Equal(t, int64(badTotal-1), r.stats.Out)
	require.Equal(t, int64(1), r.stats.Skipped)
	require.Equal(t, int64(1), r.stats.Failed)
	require.Equal(t, int64(0), r.stats.Retried)
	require.Equal(t, int64(0), r.stats.DeadLettered)
	require.Equal(t, int64(badTotal), position(t, store))
}

// batchings are the source batch sizes the bad-record case runs with: the
// whole topic in one batch (the default MaxBytes), and batches of about
// 40 records so positions are saved below the bad record.
var batchings = []struct {
	name string
	opts []source.PartitionOption
}{
	{"one batch", nil},
	{"small batches", []source.PartitionOption{source.MaxBytes(1024)}},
}

// TestBadRecordSkip ensures Skip drops the one bad line, delivers the
// 1,001 others, counts the skip and saves the position past the end.
func TestBadRecordSkip(t *testing.T) {
	for _, m := range testutil.Modes {
		for _, b := range batchings {
			t.Run(m.Name+"/"+b.name, func(t *testing.T) {
				lg := testutil.OpenLog(t, m.Mode)
				writeNumbers(t, lg)
				store, err := checkpoint.NewFileStore(t.TempDir())
				require.NoError(t, err)
				requireSkipped(t, runParse(t, lg, store, stream.Skip(), b.opts...), store)
			})
		}
	}
}

// TestBadRecordSkipThroughAReadOnlyLog runs the Skip case through a log
// opened read-only: after the writer closed, and while the writer still
// holds the topic.
func TestBadRecordSkipThroughAReadOnlyLog(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name+"/writer closed", func(t *testing.T) {
			dir := t.TempDir()
			w, err := log.Open(dir, log.WithMode(m.Mode), log.WithSegmentBytes(testutil.SegmentBytes))
			require.NoError(t, err)
			writeNumbers(t, w)
			require.NoError(t, w.Close())

			r, err := log.Open(dir, log.ReadOnly())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.Close()) })
			store := &checkpoint.MemoryStore{}
			requireSkipped(t, runParse(t, r, store, stream.Skip(), source.MaxBytes(1024)), store)
		})
		t.Run(m.Name+"/writer open", func(t *testing.T) {
			w := testutil.OpenLog(t, m.Mode)
			writeNumbers(t, w)
			r, err := log.Open(w.Dir(), log.ReadOnly())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.Close()) })
			store := &checkpoint.MemoryStore{}
			requireSkipped(t, runParse(t, r, store, stream.Skip()), store)
		})
	}
}

// TestBadRecordDeadLetter ensures DeadLetter writes the one bad line to the
// dead-letter topic with its value and headers naming stage, error and
// source offset, and goes on to the end.
func TestBadRecordDeadLetter(t *testing.T) {
	for _, m := range testutil.Modes {
		for _, b := range batchings {
			t.Run(m.Name+"/"+b.name, func(t *testing.T) {
				lg := testutil.OpenLog(t, m.Mode)
				writeNumbers(t, lg)
				dlq, err := lg.CreateTopic("in.dlq", 1)
				require.NoError(t, err)
				store, err := checkpoint.NewFileStore(t.TempDir())
				require.NoError(t, err)

				r := runParse(t, lg, store, stream.DeadLetter(sink.DeadLetter(dlq)), b.opts...)
				require.NoError(t, r.err)
				require.Len(t, r.values, badTotal-1)
				require.Equal(t, int64(1), r.stats.DeadLettered)
				require.Equal(t, int64(0), r.stats.Skipped)
				require.Equal(t, int64(badTotal), position(t, store))

				dead := readPartition(t, dlq, 0)
				require.Len(t, dead, 1)
				require.Equal(t, badLine, string(dead[0].Value))
				require.Nil(t, dead[0].Key, "the source record had no key")
				h, _ := headers(dead[0].Headers)
				_, atoiErr := strconv.Atoi(badLine)
				require.Equal(t, atoiErr.Error(), h[sink.HeaderError])
				require.Equal(t, "parse", h[sink.HeaderStage])
				require.Equal(t, "in", h[sink.HeaderTopic])
				require.Equal(t, "0", h[sink.HeaderPartition])
				require.Equal(t, "1001", h[sink.HeaderOffset])
				require.Equal(t, "1", h[sink.HeaderAttempt])
			})
		}
	}
}

// TestBadRecordDeadLetterWriteFailureStops ensures a dead-letter topic that
// refuses the write stops the pipeline with both errors and leaves the bad
// record's position unsaved.
func TestBadRecordDeadLetterWriteFailureStops(t *testing.T) {
	w := testutil.OpenLog(t, log.ModeFile)
	writeNumbers(t, w)
	_, err := w.CreateTopic("in.dlq", 1)
	require.NoError(t, err)
	r, err := log.Open(w.Dir(), log.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	dlq, err := r.Topic("in.dlq")
	require.NoError(t, err)
	store := &checkpoint.MemoryStore{}

	res := runParse(t, w, store, stream.DeadLetter(sink.DeadLetter(dlq)), source.MaxBytes(1024))
	require.ErrorIs(t, res.err, log.ErrReadOnly)
	require.ErrorIs(t, res.err, strconv.ErrSyntax)
	var re *stream.RecordError
	require.ErrorAs(t, res.err, &re)
	require.Equal(t, int64(badOffset), re.Offset)
	var te *sink.TopicError
	require.ErrorAs(t, res.err, &te)
	require.Equal(t, "in.dlq", te.Topic)
	require.LessOrEqual(t, position(t, store), int64(badOffset))
	require.Equal(t, int64(0), res.stats.DeadLettered)
}

// TestBadRecordStopThenRestart ensures the default policy stops at the bad
// line with a *RecordError at offset 1001, saves no position past it, and a
// restart from the store (with Skip) delivers every offset from the saved
// position up to 1001 again: across both runs every parsable line reaches
// the sink at least once, and the lines below the saved position did in the
// first run.
func TestBadRecordStopThenRestart(t *testing.T) {
	for _, m := range testutil.Modes {
		for _, b := range batchings {
			t.Run(m.Name+"/"+b.name, func(t *testing.T) {
				lg := testutil.OpenLog(t, m.Mode)
				writeNumbers(t, lg)
				store, err := checkpoint.NewFileStore(t.TempDir())
				require.NoError(t, err)

				first := runParse(t, lg, store, nil, b.opts...)
				var re *stream.RecordError
				require.ErrorAs(t, first.err, &re)
				require.Equal(t, int64(badOffset), re.Offset)
				require.Equal(t, "parse", re.Stage)
				require.Equal(t, "in", re.Topic)
				require.ErrorIs(t, first.err, strconv.ErrSyntax)
				pos := position(t, store)
				require.LessOrEqual(t, pos, int64(badOffset))
				seen1 := map[int]bool{}
				for _, v := range first.values {
					seen1[v] = true
				}
				for v := range int(pos) {
					require.True(t, seen1[v], "offset %d is below the saved position %d but never reached the sink", v, pos)
				}
				if b.opts != nil {
					require.Positive(t, pos, "with small batches the batches before the bad one are saved")
				}

				second := runParse(t, lg, store, stream.Skip(), b.opts...)
				require.NoError(t, second.err)
				require.Equal(t, int64(badTotal), position(t, store))
				require.Equal(t, int64(1), second.stats.Skipped)
				require.Equal(t, int64(badTotal)-pos, second.stats.In, "the restart reads from the saved position")
				seen2 := map[int]int{}
				for _, v := range second.values {
					seen2[v]++
				}
				for v := int(pos); v < badOffset; v++ {
					require.Equal(t, 1, seen2[v], "offset %d from the saved position %d is delivered again", v, pos)
				}
				for v := range badOffset {
					require.True(t, seen1[v] || seen2[v] > 0, "parsable line %d never reached the sink", v)
				}
			})
		}
	}
}

// TestBadRecordParallel runs the three policies with the parse stage on 4
// goroutines: records finish out of order, and still no position passes
// the bad record unless the policy dropped it.
func TestBadRecordParallel(t *testing.T) {
	small := source.MaxBytes(1024)
	t.Run("skip", func(t *testing.T) {
		lg := testutil.OpenLog(t, log.ModeFile)
		writeNumbers(t, lg)
		store := &checkpoint.MemoryStore{}
		r := runParseWith(t, lg, store, []stream.StageOption{stream.Parallel(4), stream.Skip()}, small)
		require.NoError(t, r.err)
		require.ElementsMatch(t, ints(badOffset), r.values)
		require.Equal(t, int64(1), r.stats.Skipped)
		require.Equal(t, int64(badTotal), position(t, store))
	})
	t.Run("dead letter", func(t *testing.T) {
		lg := testutil.OpenLog(t, log.ModeFile)
		writeNumbers(t, lg)
		dlq, err := lg.CreateTopic("in.dlq", 1)
		require.NoError(t, err)
		store := &checkpoint.MemoryStore{}
		r := runParseWith(t, lg, store, []stream.StageOption{stream.Parallel(4), stream.DeadLetter(sink.DeadLetter(dlq))}, small)
		require.NoError(t, r.err)
		require.ElementsMatch(t, ints(badOffset), r.values)
		require.Equal(t, int64(1), r.stats.DeadLettered)
		dead := readPartition(t, dlq, 0)
		require.Len(t, dead, 1)
		require.Equal(t, badLine, string(dead[0].Value))
		h, _ := headers(dead[0].Headers)
		require.Equal(t, "1001", h[sink.HeaderOffset])
		require.Equal(t, int64(badTotal), position(t, store))
	})
	t.Run("stop", func(t *testing.T) {
		lg := testutil.OpenLog(t, log.ModeFile)
		writeNumbers(t, lg)
		store := &checkpoint.MemoryStore{}
		r := runParseWith(t, lg, store, []stream.StageOption{stream.Parallel(4)}, small)
		var re *stream.RecordError
		require.ErrorAs(t, r.err, &re)
		require.Equal(t, int64(badOffset), re.Offset)
		pos := position(t, store)
		require.LessOrEqual(t, pos, int64(badOffset))
		seen := map[int]bool{}
		for _, v := range r.values {
			seen[v] = true
		}
		for v := range int(pos) {
			require.True(t, seen[v], "offset %d below the saved position %d never reached the sink", v, pos)
		}
		r = runParseWith(t, lg, store, []stream.StageOption{stream.Parallel(4), stream.Skip()}, small)
		require.NoError(t, r.err)
		for _, v := range r.values {
			seen[v] = true
		}
		for v := range badOffset {
			require.True(t, seen[v], "parsable line %d never reached the sink", v)
		}
		require.Equal(t, int64(badTotal), position(t, store))
	})
}

// ints returns 0 .. n-1.
func ints(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}
