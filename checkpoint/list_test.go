package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// TestFileStoreListReturnsEverySavedPositionSorted ensures List finds every
// position file, in topic then partition order (partition 10 after 2), and
// skips temporary and foreign files.
func TestFileStoreListReturnsEverySavedPositionSorted(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	require.NoError(t, s.Save(ctx, "my-events", 10, checkpoint.Position{Offset: 5, Epoch: 2}))
	require.NoError(t, s.Save(ctx, "my-events", 2, checkpoint.At(7)))
	require.NoError(t, s.Save(ctx, "a", 0, checkpoint.At(0)))
	for _, name := range []string{".a-1.position.tmp-123", "notes.txt", "x-01.position", "x-.position", "-1.position", "x-1.positions"} {
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), name), []byte("junk"), 0o600))
	}
	got, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []checkpoint.TopicPosition{
		{Topic: "a", Partition: 0, Position: checkpoint.At(0)},
		{Topic: "my-events", Partition: 2, Position: checkpoint.At(7)},
		{Topic: "my-events", Partition: 10, Position: checkpoint.Position{Offset: 5, Epoch: 2}},
	}, got)
}

// TestFileStoreListFailsOnACorruptPositionFile ensures a damaged position
// file is an error naming it, never skipped.
func TestFileStoreListFailsOnACorruptPositionFile(t *testing.T) {
	s := newFileStore(t)
	path := filepath.Join(s.Dir(), "events-0.position")
	require.NoError(t, os.WriteFile(path, []byte("{\"version\":1,"), 0o600))
	_, err := s.List(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, checkpoint.ErrCorrupt))
	assert.Contains(t, err.Error(), path)
}
