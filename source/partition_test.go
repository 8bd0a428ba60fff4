package source_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// TestReplayFromEarliestReturnsEveryRecordThenEOFAtStartHWM ensures a replay
// returns every record once, with its lineage, across segments, and ends at the
// high watermark it saw when it opened even when more records arrive.
func TestReplayFromEarliestReturnsEveryRecordThenEOFAtStartHWM(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "events", 1)
			appendRange(t, lg, "events", 0, 250)

			src := source.Partition(lg, "events", 0, source.Earliest, source.Replay(), source.MaxBytes(512))
			first, err := src.Read(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, first)
			require.Less(t, len(first), 250, "MaxBytes(512) must split the replay into several batches")
			first = slices.Clone(first) // the source reuses its batch slice on the next Read

			appendRange(t, lg, "events", 250, 260) // after the replay opened: not returned

			rest := readUntilEOF(t, src)
			requireOffsets(t, append(first, rest...), "events", 0, 250)

			batch, err := src.Read(context.Background())
			require.ErrorIs(t, err, io.EOF, "io.EOF repeats once reached")
			require.Equal(t, io.EOF, err, "io.EOF is returned bare")
			require.Nil(t, batch)
			require.Equal(t, int64(250), src.Position())
		})
	}
}

// TestAtStartsAtTheGivenOffset ensures At(n) returns records from n on, and
// At(high watermark) returns nothing.
func TestAtStartsAtTheGivenOffset(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "events", 1)
			appendRange(t, lg, "events", 0, 150)

			src := source.Partition(lg, "events", 0, source.At(100), source.Replay())
			require.Equal(t, "events", src.Topic())
			require.Equal(t, int32(0), src.PartitionID())
			requireOffsets(t, readUntilEOF(t, src), "events", 100, 150)

			atEnd := source.Partition(lg, "events", 0, source.At(150), source.Replay())
			require.Empty(t, readUntilEOF(t, atEnd))
		})
	}
}

// TestAtOutsideTheLogFailsWithErrOffsetOutOfRange ensures a start beyond the
// high watermark or below the log start is an error naming the partition, not
// a silent clamp.
func TestAtOutsideTheLogFailsWithErrOffsetOutOfRange(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 10)

	for _, off := range []int64{11, 1000, -1} {
		src := source.Partition(lg, "events", 0, source.At(off), source.Replay())
		batch, err := src.Read(context.Background())
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange, "At(%d)", off)
		require.Nil(t, batch)
		var oor *log.OffsetOutOfRangeError
		require.ErrorAs(t, err, &oor)
		require.Equal(t, off, oor.Offset)
		require.Equal(t, int64(10), oor.NextOffset)
		var pe *source.PartitionError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "events", pe.Topic)
		require.Equal(t, int32(0), pe.Partition)
		require.Contains(t, err.Error(), "source: topic events partition 0: ")
	}
}

// TestLatestSeesOnlyRecordsAppendedLater ensures a following source started
// at Latest skips what is already there and returns what comes after.
func TestLatestSeesOnlyRecordsAppendedLater(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "events", 1)
			appendRange(t, lg, "events", 0, 20)

			src := source.Partition(lg, "events", 0, source.Latest)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			batch, err := src.Read(ctx) // opens at the high watermark, 20, and waits
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Empty(t, batch)
			require.Equal(t, int64(20), src.Position())

			appendRange(t, lg, "events", 20, 23)
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var got []int64
			for len(got) < 3 {
				batch, err := src.Read(ctx)
				require.NoError(t, err)
				for _, e := range batch {
					got = append(got, e.Offset)
				}
			}
			require.Equal(t, []int64{20, 21, 22}, got)
		})
	}
}

// TestFollowWakesOnAppendFromAnotherGoroutine ensures a Read waiting at the
// end of the partition returns as soon as another goroutine appends.
func TestFollowWakesOnAppendFromAnotherGoroutine(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp := createTopic(t, lg, "events", 1)
			src := source.Partition(lg, "events", 0, source.Earliest)

			appended := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				p, err := tp.Partition(0)
				if err == nil {
					_, err = p.Append(context.Background(), log.Record{Value: []byte(value(0))})
				}
				appended <- err
			}()

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			began := time.Now()
			batch, err := src.Read(ctx)
			require.NoError(t, err)
			require.NoError(t, <-appended)
			requireOffsets(t, batch, "events", 0, 1)
			require.Less(t, time.Since(began), 2*time.Second, "the append must wake the reader")
		})
	}
}

// TestFollowOnReadOnlyLogSeesAnotherWritersAppends ensures a consumer that
// opens the log read-only, as consumers should, tails what a separate
// read-write Log appends.
func TestFollowOnReadOnlyLogSeesAnotherWritersAppends(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			w := testutil.OpenLog(t, m.Mode)
			createTopic(t, w, "events", 1)
			appendRange(t, w, "events", 0, 5)

			r, err := log.Open(w.Dir(), log.ReadOnly(), log.WithMode(m.Mode))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.Close()) })
			src := source.Partition(r, "events", 0, source.Earliest)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var got []int64
			for len(got) < 5 {
				batch, err := src.Read(ctx)
				require.NoError(t, err)
				for _, e := range batch {
					got = append(got, e.Offset)
				}
			}
			appendRange(t, w, "events", 5, 8)
			for len(got) < 8 {
				batch, err := src.Read(ctx)
				require.NoError(t, err)
				for _, e := range batch {
					got = append(got, e.Offset)
				}
			}
			require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, got)
		})
	}
}

// TestFromStoreStartsAtTheSavedPosition ensures FromStore begins at the
// position the store holds (the next offset to read).
func TestFromStoreStartsAtTheSavedPosition(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 60)
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(40)))

	src := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay())
	requireOffsets(t, readUntilEOF(t, src), "events", 40, 60)
}

// TestFromStoreWithoutPositionStartsAtEarliest ensures a store that never saw
// the partition starts it from the log start offset.
func TestFromStoreWithoutPositionStartsAtEarliest(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeMmap)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 30)
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "other", 0, checkpoint.At(25)))

	src := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay())
	requireOffsets(t, readUntilEOF(t, src), "events", 0, 30)
}

// TestFromStoreBeyondTheLogFailsWithErrOffsetOutOfRange ensures a saved
// position the partition does not reach is an error, not a silent restart.
func TestFromStoreBeyondTheLogFailsWithErrOffsetOutOfRange(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 5)
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(9)))

	src := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay())
	batch, err := src.Read(context.Background())
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	require.Nil(t, batch)
}

// corruptFileStore returns a FileStore whose position file for events-0 holds
// 16 NUL bytes, as a crash on some file systems leaves it.
func corruptFileStore(t *testing.T) *checkpoint.FileStore {
	t.Helper()
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	path, err := store.Path("events", 0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, make([]byte, 16), 0o600))
	require.Equal(t, filepath.Join(store.Dir(), "events-0.position"), path)
	return store
}

// TestFromStoreWithCorruptStoreFailsWithErrCorruptAndYieldsNothing ensures a
// checkpoint that cannot be read stops the source instead of restarting it
// from the beginning.
func TestFromStoreWithCorruptStoreFailsWithErrCorruptAndYieldsNothing(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "events", 1)
			appendRange(t, lg, "events", 0, 10)
			store := corruptFileStore(t)

			for _, opts := range [][]source.PartitionOption{{source.Replay()}, nil} {
				src := source.Partition(lg, "events", 0, source.FromStore(store), opts...)
				for range 2 { // and again: the failure is not forgotten
					batch, err := src.Read(context.Background())
					require.ErrorIs(t, err, checkpoint.ErrCorrupt)
					require.Nil(t, batch)
					require.Contains(t, err.Error(), "source: topic events partition 0: ")
					require.Equal(t, int64(-1), src.Position())
				}
				err := src.Resume(context.Background(), store)
				require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			}
		})
	}
}

// TestResumeRestartsAtTheStoredPositionElseTheConfiguredStart ensures Resume
// moves the next Read to the store's position, and back to the configured
// start when the store has none.
func TestResumeRestartsAtTheStoredPositionElseTheConfiguredStart(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 50)
	src := source.Partition(lg, "events", 0, source.At(5), source.Replay())

	requireOffsets(t, readUntilEOF(t, src), "events", 5, 50)

	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(42)))
	require.NoError(t, src.Resume(context.Background(), &store))
	require.Equal(t, int64(42), src.Position())
	requireOffsets(t, readUntilEOF(t, src), "events", 42, 50)

	require.NoError(t, src.Resume(context.Background(), &checkpoint.MemoryStore{}))
	require.Equal(t, int64(-1), src.Position())
	requireOffsets(t, readUntilEOF(t, src), "events", 5, 50)

	require.ErrorIs(t, src.Resume(context.Background(), nil), source.ErrNilStore)
}

// TestCloseThenReadReopensWhereItStopped ensures Close drops the reader but
// not the position: the next Read opens again and continues without repeating
// or skipping a record.
func TestCloseThenReadReopensWhereItStopped(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "events", 1)
			appendRange(t, lg, "events", 0, 120)
			src := source.Partition(lg, "events", 0, source.Earliest, source.Replay(), source.MaxBytes(256))
			require.NoError(t, src.Close(), "Close before the first Read")

			var all []int64
			for {
				batch, err := src.Read(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				for _, e := range batch {
					all = append(all, e.Offset)
				}
				require.Equal(t, batch[len(batch)-1].Offset+1, src.Position())
				require.NoError(t, src.Close())
			}
			require.Len(t, all, 120)
			for i, off := range all {
				require.Equal(t, int64(i), off)
			}
		})
	}
}

// TestUnknownTopicAndPartitionFailWithTheLogsErrors ensures a source on a
// topic or partition that does not exist says so on its first Read.
func TestUnknownTopicAndPartitionFailWithTheLogsErrors(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 2)

	_, err := source.Partition(lg, "missing", 0, source.Earliest).Read(context.Background())
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	require.Contains(t, err.Error(), "source: topic missing partition 0: ")

	_, err = source.Partition(lg, "events", 2, source.Earliest).Read(context.Background())
	require.ErrorIs(t, err, log.ErrPartitionOutOfRange)

	_, err = source.Partition(nil, "events", 0, source.Earliest).Read(context.Background())
	require.ErrorIs(t, err, source.ErrNilLog)

	_, err = source.Partition(lg, "events", 0, source.FromStore(nil)).Read(context.Background())
	require.ErrorIs(t, err, source.ErrNilStore)
}

// TestStartStringNamesTheStart ensures a Start describes itself, with the
// zero value meaning Earliest.
func TestStartStringNamesTheStart(t *testing.T) {
	require.Equal(t, "earliest", source.Start{}.String())
	require.Equal(t, "earliest", source.Earliest.String())
	require.Equal(t, "latest", source.Latest.String())
	require.Equal(t, "offset 7", source.At(7).String())
	require.Equal(t, "store", source.FromStore(&checkpoint.MemoryStore{}).String())
}
