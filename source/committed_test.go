package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
