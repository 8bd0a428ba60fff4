package source_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestPositionFromOlderEpochResumesWhereTheTruncationHappened ensures a
// position file saved before a truncation (the epoch of its last record
// ended below it) resumes at the truncation point, so the records later
// appended at the reused offsets are handled, not skipped; and that a
// position saved in the current epoch resumes as saved across a writer
// restart.
func TestPositionFromOlderEpochResumesWhereTheTruncationHappened(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			dir := t.TempDir()
			lg, err := log.Open(filepath.Join(dir, "log"), log.CreateIfMissing(), log.WithMode(m.Mode), log.WithSegmentBytes(testutil.SegmentBytes))
			require.NoError(t, err)
			defer func() { lg.Close() }()
			id := createTopic(t, lg, "events", 1).ID()
			store, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
			require.NoError(t, err)

			var handled []string
			run := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := stream.From(source.Partition(lg, "events", 0, source.FromStore(store), source.Replay())).
					Tap(func(_ context.Context, r log.Record) error {
						handled = append(handled, fmt.Sprintf("%d:%s", r.Offset, r.Value))
						return nil
					}).
					Checkpointing(store).
					Run(ctx)
				require.NoError(t, err)
			}

			appendRange(t, lg, "events", 0, 100)
			run()
			pos, _, err := store.Load(context.Background(), "events", 0)
			require.NoError(t, err)
			require.Equal(t, checkpoint.Position{Offset: 100, Epoch: 0, TopicID: id}, pos)

			tp, _ := lg.Topic("events")
			p, _ := tp.Partition(0)
			require.NoError(t, p.Truncate(95)) // records 95..99 are lost
			for i := int64(95); i < 105; i++ {
				_, err := p.Append(context.Background(), log.Record{Value: fmt.Appendf(nil, "new-%d", i)})
				require.NoError(t, err)
			}
			handled = nil
			run()
			require.Len(t, handled, 10, "the saved 100 resumed at 95, where epoch 0 ended")
			assert.Equal(t, "95:new-95", handled[0])
			assert.Equal(t, "104:new-104", handled[9])
			pos, _, err = store.Load(context.Background(), "events", 0)
			require.NoError(t, err)
			assert.Equal(t, checkpoint.Position{Offset: 105, Epoch: 1, TopicID: id}, pos)

			// A writer restart starts epoch 2 at 105: the saved position stands.
			require.NoError(t, lg.Close())
			lg, err = log.Open(filepath.Join(dir, "log"), log.WithMode(m.Mode), log.WithSegmentBytes(testutil.SegmentBytes))
			require.NoError(t, err)
			appendRange(t, lg, "events", 105, 107)
			handled = nil
			run()
			assert.Equal(t, []string{"105:" + value(105), "106:" + value(106)}, handled)
		})
	}
}

// TestSavedPositionPastTheLogEndIsAnError ensures a checkpoint beyond the
// high watermark (a log recreated, or lost) is ErrOffsetOutOfRange, never a
// silent jump to the end.
func TestSavedPositionPastTheLogEndIsAnError(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeMmap)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 10)
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.Position{Offset: 50, Epoch: 0}))
	src := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay())
	_, err := src.Read(context.Background())
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
}
