package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFileStoreSaveStateOpOrder ensures SaveState makes a snapshot durable in
// the order Save does: create a temporary file beside the final one, write
// it, fsync it, close it, rename it over the final name, fsync the directory.
func TestFileStoreSaveStateOpOrder(t *testing.T) {
	s, rfs := newRecordingStore(t, "")
	require.NoError(t, s.SaveState(context.Background(), "window", []byte("state")))

	ops := rfs.Ops()
	require.Len(t, ops, 6, "ops: %q", ops)
	tmp := ops[0][len("create "):]
	assert.Equal(t, s.Dir(), filepath.Dir(tmp), "the temporary file must be in the store's directory")
	assert.Regexp(t, `^\.window\.state\.tmp-`, filepath.Base(tmp))
	assert.Equal(t, []string{
		"create " + tmp,
		"write " + tmp,
		"fsync " + tmp,
		"close " + tmp,
		"rename " + tmp + " -> " + filepath.Join(s.Dir(), "window.state"),
		"fsync dir " + s.Dir(),
	}, ops)
}

// TestFileStoreSaveStateFailureKeepsOldSnapshot ensures a SaveState that
// fails at any step before the rename returns the error naming the file,
// removes its temporary file and leaves the old snapshot readable, whole.
func TestFileStoreSaveStateFailureKeepsOldSnapshot(t *testing.T) {
	for _, step := range []string{"write", "fsync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			s, rfs := newRecordingStore(t, "")
			require.NoError(t, s.SaveState(ctx, "window", []byte("old snapshot")))
			rfs.mu.Lock()
			rfs.failOn = step + " "
			rfs.mu.Unlock()

			err := s.SaveState(ctx, "window", []byte("new snapshot, longer than the old"))
			require.ErrorIs(t, err, errInjected)
			assert.Contains(t, err.Error(), filepath.Join(s.Dir(), "window.state"))

			entries, err := os.ReadDir(s.Dir())
			require.NoError(t, err)
			require.Len(t, entries, 1, "the temporary file must be removed")
			assert.Equal(t, "window.state", entries[0].Name())
			state, found, err := s.LoadState(ctx, "window")
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, []byte("old snapshot"), state)
		})
	}
}

// TestFileStoreSaveStateReportsDirectoryFsyncFailure ensures a failed
// directory fsync, after which durability is unknown, is reported, and that
// the file then holds a whole snapshot (the new one: the rename happened).
func TestFileStoreSaveStateReportsDirectoryFsyncFailure(t *testing.T) {
	ctx := context.Background()
	s, rfs := newRecordingStore(t, "")
	require.NoError(t, s.SaveState(ctx, "window", []byte("old")))
	rfs.mu.Lock()
	rfs.failOn = "fsync dir "
	rfs.mu.Unlock()

	err := s.SaveState(ctx, "window", []byte("new"))
	require.ErrorIs(t, err, errInjected)
	assert.Contains(t, err.Error(), "fsync directory")

	state, found, err := s.LoadState(ctx, "window")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("new"), state)
}
