package checkpoint_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// TestMemoryStoreSaveThenLoadRoundTrips ensures the zero value works and keeps
// one position per topic-partition.
func TestMemoryStoreSaveThenLoadRoundTrips(t *testing.T) {
	ctx := context.Background()
	var s checkpoint.MemoryStore

	pos, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, int64(0), pos.Offset)

	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(41)))
	require.NoError(t, s.Save(ctx, "events", 1, checkpoint.At(3)))
	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(42)))

	pos, found, err = s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(42), pos.Offset)

	pos, found, err = s.Load(ctx, "events", 1)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(3), pos.Offset)

	_, found, err = s.Load(ctx, "orders", 0)
	require.NoError(t, err)
	assert.False(t, found)
}

// TestNewMemoryStoreIsEmptyAndIndependent ensures NewMemoryStore returns a
// ready, empty store, a new one each call: a save in one is not seen by
// another.
func TestNewMemoryStoreIsEmptyAndIndependent(t *testing.T) {
	ctx := context.Background()
	a, b := checkpoint.NewMemoryStore(), checkpoint.NewMemoryStore()
	require.NotSame(t, a, b)
	require.NoError(t, a.Save(ctx, "events", 0, checkpoint.At(7)))
	require.NoError(t, a.SaveState(ctx, "counts", []byte("x")))
	pos, found, err := a.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(7), pos.Offset)
	_, found, err = b.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.False(t, found, "a fresh store is empty")
	_, found, err = b.LoadState(ctx, "counts")
	require.NoError(t, err)
	assert.False(t, found, "a fresh store has no state")
}

// TestMemoryStoreRejectsWhatFileStoreRejects ensures tests written against a
// MemoryStore do not accept arguments a FileStore would refuse.
func TestMemoryStoreRejectsWhatFileStoreRejects(t *testing.T) {
	ctx := context.Background()
	var s checkpoint.MemoryStore
	require.ErrorIs(t, s.Save(ctx, "events", 0, checkpoint.At(-1)), checkpoint.ErrInvalidPosition)
	require.ErrorIs(t, s.Save(ctx, "events", -1, checkpoint.At(0)), checkpoint.ErrInvalidPosition)
	require.ErrorIs(t, s.Save(ctx, "a/b", 0, checkpoint.At(0)), checkpoint.ErrInvalidTopic)
	_, _, err := s.Load(ctx, "", 0)
	require.ErrorIs(t, err, checkpoint.ErrInvalidTopic)

	_, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.False(t, found, "a rejected save stores nothing")
}

// TestMemoryStoreConcurrentUse ensures concurrent Save and Load are race-free
// (run with -race) and each partition keeps its last save.
func TestMemoryStoreConcurrentUse(t *testing.T) {
	ctx := context.Background()
	var s checkpoint.MemoryStore
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				assert.NoError(t, s.Save(ctx, "events", int32(g), checkpoint.At(int64(i))))
				_, found, err := s.Load(ctx, "events", int32((g+1)%8))
				assert.NoError(t, err)
				_ = found
			}
		}()
	}
	wg.Wait()
	for p := range int32(8) {
		pos, found, err := s.Load(ctx, "events", p)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, int64(999), pos.Offset)
	}
}

// Both stores must satisfy the interface.
var (
	_ checkpoint.Store = (*checkpoint.FileStore)(nil)
	_ checkpoint.Store = (*checkpoint.MemoryStore)(nil)
)
