package source_test

import (
	"context"
	"os"
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

// TestSavedPositionBeyondTheLogEndIsOutOfRangeNeverAJump ensures a position
// file edited to beyond the log end makes the source fail with
// ErrOffsetOutOfRange naming the position and the log's range, and that
// ConsumeForever returns it at once (stream.ErrPermanent) without handling a
// record or saving over the position, instead of retrying until appends
// reach the position and then resuming there past records never read.
func TestSavedPositionBeyondTheLogEndIsOutOfRangeNeverAJump(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "events", 1)
	appendRange(t, lg, "events", 0, 10)
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	path, err := store.Path("events", 0)
	require.NoError(t, err)
	content := []byte(`{"version":1,"topic":"events","partition":0,"position":100}` + "\n")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	src := source.Partition(lg, "events", 0, source.FromStore(store), source.Replay())
	_, err = src.Read(ctx)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	assert.Contains(t, err.Error(), "topic events partition 0: offset 100 out of range [0, 10]")
	require.NoError(t, src.Close())

	// A consumer must stop, not wait for the log to grow past 100 and then
	// resume there, skipping offsets 10 to 99 unread.
	err = stream.ConsumeForever(ctx, source.Partition(lg, "events", 0, source.FromStore(store)), store,
		func(context.Context, log.Record) error { t.Error("a record was handled"); return nil },
		stream.WithBackoff(time.Millisecond, time.Millisecond))
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	require.ErrorIs(t, err, stream.ErrPermanent)
	assert.Contains(t, err.Error(), "offset 100 out of range [0, 10]")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(content), string(b), "nothing saved over the position")
}
