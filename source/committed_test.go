package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/internal/txnfile"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// commitEnds writes the transaction file of topic as a sink.LogSink's
// commit does: the committed end of each partition.
func commitEnds(t *testing.T, tp *log.Topic, seq uint64, ends ...int64) {
	t.Helper()
	require.NoError(t, txnfile.Write(tp.Dir(), &txnfile.Record{Seq: seq, Ends: ends,
		Positions: map[txnfile.TP]checkpoint.Position{}, States: map[string][]byte{}}))
}

// readN reads src until it has n elements, failing on any error.
func readN(t *testing.T, src stream.Source[log.Record], n int) []stream.Element[log.Record] {
	t.Helper()
	all, err := collect(src, n)
	require.NoError(t, err)
	return all
}

// collect reads src until it has n elements, copying their bytes; it is
// an error to get more, or any error from Read. Goroutines call it (a
// test's require must not run outside the test's goroutine).
func collect(src stream.Source[log.Record], n int) ([]stream.Element[log.Record], error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []stream.Element[log.Record]
	for len(all) < n {
		batch, err := src.Read(ctx)
		if err != nil {
			return all, fmt.Errorf("after %d of %d records: %w", len(all), n, err)
		}
		for _, e := range batch {
			e.Value.Key, e.Value.Value = append([]byte{}, e.Value.Key...), append([]byte{}, e.Value.Value...)
			all = append(all, e)
		}
	}
	if len(all) != n {
		return all, fmt.Errorf("read %d records, want %d: offsets %d to %d", len(all), n, all[0].Offset, all[len(all)-1].Offset)
	}
	return all, nil
}

// result is what a goroutine's collect returned.
type result struct {
	elems []stream.Element[log.Record]
	err   error
}

// collectAsync runs collect(src, n) in a goroutine.
func collectAsync(src stream.Source[log.Record], n int) <-chan result {
	ch := make(chan result, 1)
	go func() {
		elems, err := collect(src, n)
		ch <- result{elems, err}
	}()
	return ch
}

// requireNothingCommitted ensures a Read of src returns no record while
// only uncommitted records are past its position: it waits for a commit
// until its context ends. A source reading uncommitted records returns
// them at once.
func requireNothingCommitted(t *testing.T, src stream.Source[log.Record]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	batch, err := src.Read(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, batch, "records past the committed end must not be read")
}

// TestReadCommittedStopsAtTheCommittedEndAndNeverReturnsTruncatedRecords
// ensures a ReadCommitted source returns the records below the committed
// end, waits there for the next commit, and after the writer's restart
// truncated an uncommitted transaction and wrote other records at its
// offsets returns the new records only: what the demo's relay B needs
// behind an exactly-once relay A that is killed.
func TestReadCommittedStopsAtTheCommittedEndAndNeverReturnsTruncatedRecords(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp := createTopic(t, lg, "out", 1)
			commitEnds(t, tp, 0, 0)
			appendRange(t, lg, "out", 0, 10)
			commitEnds(t, tp, 1, 6)

			src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted(), source.MaxBytes(64))
			requireOffsets(t, readN(t, src, 6), "out", 0, 6)
			requireNothingCommitted(t, src)

			// The writer is killed; its restart truncates 6..9 and writes
			// other records there, committed up to 9.
			p, err := tp.Partition(0)
			require.NoError(t, err)
			require.NoError(t, p.Truncate(6))
			for i := range 3 {
				_, err := p.Append(context.Background(), log.Record{Value: fmt.Appendf(nil, "again-%d", 6+i)})
				require.NoError(t, err)
			}
			got := collectAsync(src, 3)
			commitEnds(t, tp, 2, 9) // wakes the waiting Read (inotify, or the poll)
			again := <-got
			require.NoError(t, again.err)
			for i, e := range again.elems {
				require.Equal(t, int64(6+i), e.Offset)
				require.Equal(t, fmt.Sprintf("again-%d", 6+i), string(e.Value.Value), "only the records written again")
			}
			requireNothingCommitted(t, src)
		})
	}
}

// TestReadCommittedReplayEndsAtTheCommittedEnd ensures a replay that reads
// committed records ends with io.EOF at the committed end, not at the high
// watermark.
func TestReadCommittedReplayEndsAtTheCommittedEnd(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 10)
	commitEnds(t, tp, 1, 4)
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted(), source.Replay())
	requireOffsets(t, readUntilEOF(t, src), "out", 0, 4)
}

// TestReadCommittedLatestStartsAtTheCommittedEnd ensures Latest means the
// committed end (Kafka's last stable offset) for a ReadCommitted source:
// the first record it returns is the first one committed after it opened.
func TestReadCommittedLatestStartsAtTheCommittedEnd(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 10)
	commitEnds(t, tp, 1, 7)
	src := source.Partition(lg, "out", 0, source.Latest, source.ReadCommitted())
	requireNothingCommitted(t, src)
	commitEnds(t, tp, 2, 10)
	requireOffsets(t, readN(t, src, 3), "out", 7, 10)
}

// TestReadCommittedWithoutTransactionFileReadsEverythingUntilOneAppears
// ensures a topic no LogSink wrote is read whole, and that once the
// transaction file appears (the writer's first BeginTransactions) records
// past its ends are not returned, even by a Read that began before it.
func TestReadCommittedWithoutTransactionFileReadsEverythingUntilOneAppears(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 5)
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted())
	requireOffsets(t, readN(t, src, 5), "out", 0, 5)

	// A LogSink begins: the file names the ends so far, then it appends
	// a transaction it has not committed.
	commitEnds(t, tp, 0, 5)
	appendRange(t, lg, "out", 5, 8)
	requireNothingCommitted(t, src)
	commitEnds(t, tp, 1, 8)
	requireOffsets(t, readN(t, src, 3), "out", 5, 8)
}

// TestReadCommittedDropsWhatABlockedReadGotAfterTheFileAppeared ensures a
// Read that was waiting with no end (no transaction file yet) returns
// nothing of the first transaction when the file appears and records are
// appended while it waits.
func TestReadCommittedDropsWhatABlockedReadGotAfterTheFileAppeared(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted())
	got := collectAsync(src, 2)
	commitEnds(t, tp, 0, 0)
	appendRange(t, lg, "out", 0, 4) // uncommitted; may wake the Read
	commitEnds(t, tp, 1, 2)
	r := <-got
	require.NoError(t, r.err)
	requireOffsets(t, r.elems, "out", 0, 2)
	requireNothingCommitted(t, src)
}

// TestReadCommittedTopicReadsEachPartitionBelowItsEnd ensures a topic
// source with ReadCommitted caps every partition at its own end.
func TestReadCommittedTopicReadsEachPartitionBelowItsEnd(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 2)
	for id := range int32(2) {
		p, err := tp.Partition(id)
		require.NoError(t, err)
		for i := range 5 {
			_, err := p.Append(context.Background(), log.Record{Value: fmt.Appendf(nil, "%d-%d", id, i)})
			require.NoError(t, err)
		}
	}
	commitEnds(t, tp, 1, 3, 1)
	src := source.Topic(lg, "out", source.Earliest, source.ReadCommitted(), source.Replay())
	defer src.Close()
	perPartition := map[int32]int{}
	for _, e := range readUntilEOF(t, src) {
		require.Equal(t, int64(perPartition[e.Partition]), e.Offset)
		perPartition[e.Partition]++
	}
	require.Equal(t, map[int32]int{0: 3, 1: 1}, perPartition)
}

// TestReadCommittedDamagedTransactionFileFailsRead ensures a damaged
// transaction file is an error wrapping checkpoint.ErrCorrupt that names
// the file, not a guess at the committed ends.
func TestReadCommittedDamagedTransactionFileFailsRead(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 3)
	path := filepath.Join(tp.Dir(), txnfile.Name)
	require.NoError(t, os.WriteFile(path, []byte("STROMTX\x00 not a transaction"), 0o644))
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted())
	_, err := src.Read(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, path)
}

// TestReadCommittedReplayTakesItsEndBeforeLookingForTheFile ensures a
// replay of a topic with no transaction file does not return the first
// transaction of a sink.LogSink that begins while the replay opens,
// between its look for the file and the high watermark it ends at: the
// end is taken first, so records the look finds no file for were all
// appended before any LogSink began.
func TestReadCommittedReplayTakesItsEndBeforeLookingForTheFile(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 3)
	began := false
	defer source.SetCommittedLookHook(func() {
		if !began { // a LogSink begins just after the first look: its file, then its open transaction
			began = true
			commitEnds(t, tp, 0, 3)
			appendRange(t, lg, "out", 3, 6)
		}
	})()
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted(), source.Replay())
	requireOffsets(t, readUntilEOF(t, src), "out", 0, 3)
	require.True(t, began)
}

// TestReadCommittedTopicReplayPendsOnlyPartitionsWithCommittedRecords
// ensures a ReadCommitted replay's PendingPartitions leaves out a
// partition whose records are all uncommitted: it delivers none, and an
// event-time window would hold its watermark back for it until the
// replay ended.
func TestReadCommittedTopicReplayPendsOnlyPartitionsWithCommittedRecords(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 2)
	for id := range int32(2) {
		p, err := tp.Partition(id)
		require.NoError(t, err)
		for i := range 3 {
			_, err := p.Append(context.Background(), log.Record{Value: fmt.Appendf(nil, "%d-%d", id, i)})
			require.NoError(t, err)
		}
	}
	commitEnds(t, tp, 1, 3, 0) // partition 1: an open transaction only
	src := source.Topic(lg, "out", source.Earliest, source.ReadCommitted(), source.Replay())
	defer src.Close()
	all := readUntilEOF(t, src)
	require.Len(t, all, 3)
	require.Equal(t, []stream.TopicPartition{{Topic: "out", Partition: 0}}, src.PendingPartitions())
}

// TestReadCommittedHighWatermarkIsTheCommittedEnd ensures the high
// watermark a ReadCommitted source reports (and so the pipeline's lag) is
// the committed end while it is below the log's end, as a read_committed
// Kafka consumer's lag is: a source that read every committed record has
// no lag, even while a transaction is open or its writer was killed.
func TestReadCommittedHighWatermarkIsTheCommittedEnd(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 10)
	commitEnds(t, tp, 1, 6)

	part := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted())
	requireOffsets(t, readN(t, part, 6), "out", 0, 6)
	hwm, ok := part.HighWatermark("out", 0)
	require.True(t, ok)
	require.Equal(t, int64(6), hwm, "the committed end, not the log's 10")

	topic := source.Topic(lg, "out", source.Earliest, source.ReadCommitted())
	defer topic.Close()
	requireOffsets(t, readN(t, topic, 6), "out", 0, 6)
	hwm, ok = topic.HighWatermark("out", 0)
	require.True(t, ok)
	require.Equal(t, int64(6), hwm)

	commitEnds(t, tp, 2, 10)
	hwm, _ = part.HighWatermark("out", 0)
	require.Equal(t, int64(10), hwm, "a commit moves it at once")

	// Without ReadCommitted it stays the log's end.
	plain := source.Partition(lg, "out", 0, source.Earliest)
	readN(t, plain, 10)
	appendRange(t, lg, "out", 10, 12)
	hwm, _ = plain.HighWatermark("out", 0)
	require.Equal(t, int64(12), hwm)
	hwm, _ = part.HighWatermark("out", 0)
	require.Equal(t, int64(10), hwm)
}

// TestReadCommittedFileOfAnotherPartitionCountFailsRead ensures a
// transaction file giving the ends of more or fewer partitions than the
// topic has (another topic's, of the same name) fails Read naming the
// file, as it fails the sink.LogSink's BeginTransactions, instead of
// capping the partitions at its ends.
func TestReadCommittedFileOfAnotherPartitionCountFailsRead(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 2)
	appendRange(t, lg, "out", 0, 5)
	commitEnds(t, tp, 1, 2, 0, 7)
	src := source.Partition(lg, "out", 0, source.Earliest, source.ReadCommitted())
	_, err := src.Read(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(tp.Dir(), txnfile.Name))
	require.ErrorContains(t, err, "3 partitions, the topic has 2")
}

// TestReadCommittedTopicCloseKeepsRecordsReadAheadWhenTheFileIsDamaged
// ensures a TopicSource closed after its read-ahead cut a batch at a
// newly appeared transaction file and then failed on that file, while a
// batch it read before waited unreturned, starts again at the first
// record Read did not return: that batch is read again, not skipped.
func TestReadCommittedTopicCloseKeepsRecordsReadAheadWhenTheFileIsDamaged(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 3)
	path := filepath.Join(tp.Dir(), txnfile.Name)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	looks := make(chan int, 1000)
	release := make(chan struct{})
	var n atomic.Int32
	damaged := false
	defer source.SetCommittedLookHook(func() {
		switch k := n.Add(1); {
		case k == 1:
			cancel() // the open's look: Read returns once it has started the read-ahead
		case k == 2:
			<-release // the read-ahead's first look waits for that
		}
		if _, err := os.Stat(path); err == nil && !damaged {
			damaged = true // damaged just after the look that found it
			if err := os.WriteFile(path, []byte("damaged"), 0o644); err != nil {
				panic(err)
			}
		}
		select {
		case looks <- int(n.Load()):
		default:
		}
	})()
	src := source.Topic(lg, "out", source.Earliest, source.ReadCommitted())
	defer src.Close()
	_, err := src.Read(ctx)
	require.ErrorIs(t, err, context.Canceled)
	close(release)
	// Looks: the open's, the read-ahead's bound and cut check (0..2 read
	// ahead and queued, never returned), its next bound, waiting past it.
	for range 4 {
		<-looks
	}
	commitEnds(t, tp, 0, 3)         // a LogSink begins...
	appendRange(t, lg, "out", 3, 5) // ...and appends uncommitted records: the waiting read gets them
	<-looks                         // the cut: it finds the file, which is then damaged
	<-looks                         // the next look fails on it
	require.NoError(t, src.Close())
	commitEnds(t, tp, 1, 5)
	requireOffsets(t, readN(t, src, 5), "out", 0, 5)
}

// TestReadCommittedSourcesWokenByACommitReadTheFileOnce ensures the
// partitions of a ReadCommitted topic source that a commit wakes read the
// transaction file (which holds the writer's state snapshots, megabytes
// for a large aggregation) about once between them, not once each: they
// share what one of them read while a stat shows the file unchanged.
func TestReadCommittedSourcesWokenByACommitReadTheFileOnce(t *testing.T) {
	const parts = 8
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", parts)
	ends := make([]int64, parts)
	commitEnds(t, tp, 0, ends...)
	for id := range int32(parts) {
		p, err := tp.Partition(id)
		require.NoError(t, err)
		_, err = p.Append(context.Background(), log.Record{Value: []byte("uncommitted")})
		require.NoError(t, err)
	}
	looks := make(chan struct{}, 10000)
	defer source.SetCommittedLookHook(func() {
		select {
		case looks <- struct{}{}:
		default:
		}
	})()
	var reads atomic.Int32
	defer source.SetCommittedReadHook(func() { reads.Add(1) })()
	src := source.Topic(lg, "out", source.Earliest, source.ReadCommitted())
	defer src.Close()
	got := collectAsync(src, parts)
	// Each partition's open looks, then its first wait looks twice
	// (before and after it watches): all of them wait at the end.
	for range 3 * parts {
		<-looks
	}
	reads.Store(0)
	for i := range ends {
		ends[i] = 1
	}
	commitEnds(t, tp, 1, ends...)
	r := <-got
	require.NoError(t, r.err)
	// One read for the commit; more only where a look came a
	// CommittedRereadInterval after the last read (a slow machine).
	require.LessOrEqual(t, reads.Load(), int32(parts/2), "every partition read the file itself")
}

// TestReadCommittedPositionAboveTheCommittedEndWaitsForACommitPastIt
// ensures a ReadCommitted source started above the committed end (a
// position a reader of uncommitted records saved) returns nothing until a
// commit passes its position, and then continues there, as a
// read_committed Kafka consumer above the last stable offset does.
func TestReadCommittedPositionAboveTheCommittedEndWaitsForACommitPastIt(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "out", 1)
	appendRange(t, lg, "out", 0, 10)
	commitEnds(t, tp, 1, 6)
	src := source.Partition(lg, "out", 0, source.At(8), source.ReadCommitted())
	requireNothingCommitted(t, src)
	commitEnds(t, tp, 2, 8) // up to the position: still nothing past it
	requireNothingCommitted(t, src)
	commitEnds(t, tp, 3, 10)
	got := readN(t, src, 2)
	require.Equal(t, int64(8), got[0].Offset)
	require.Equal(t, int64(9), got[1].Offset)
}
