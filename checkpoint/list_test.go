package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestFileStoreListSkipsStateFiles ensures state files, their temporary
// files (the long name's cut short) and a damaged state file are neither
// listed as positions nor make List fail, even when a state is named like a
// position file.
func TestFileStoreListSkipsStateFiles(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(41)))
	long := strings.Repeat("w", 249)
	for _, name := range []string{"events-0", "events-1", "events-1.position", long} {
		require.NoError(t, s.SaveState(ctx, name, []byte("state")))
	}
	for _, name := range []string{".events-0.state.tmp-123", "." + long[:240] + ".tmp-123", "events-2.position.state"} {
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir(), name), []byte("junk"), 0o600))
	}
	got, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []checkpoint.TopicPosition{{Topic: "events", Partition: 0, Position: checkpoint.At(41)}}, got)
}
