package checkpoint_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

func newFileStore(t *testing.T) *checkpoint.FileStore {
	t.Helper()
	s, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	return s
}

// TestFileStoreSaveThenLoadRoundTrips ensures Load returns what Save stored,
// per topic-partition, and that a later Save replaces an earlier one.
func TestFileStoreSaveThenLoadRoundTrips(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)

	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(41)))
	require.NoError(t, s.Save(ctx, "events", 1, checkpoint.At(7)))
	require.NoError(t, s.Save(ctx, "other.topic_v2-x", 0, checkpoint.At(0)))

	pos, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(41), pos.Offset)

	pos, found, err = s.Load(ctx, "events", 1)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(7), pos.Offset)

	pos, found, err = s.Load(ctx, "other.topic_v2-x", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(0), pos.Offset)

	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(1<<40)))
	pos, found, err = s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(1<<40), pos.Offset)
}

// TestFileStoreWritesOneJSONLinePerPartition ensures the on-disk format is the
// documented one: <topic>-<partition>.position holding one JSON line.
func TestFileStoreWritesOneJSONLinePerPartition(t *testing.T) {
	s := newFileStore(t)
	require.NoError(t, s.Save(context.Background(), "events", 3, checkpoint.At(41)))

	path := filepath.Join(s.Dir(), "events-3.position")
	got, err := s.Path("events", 3)
	require.NoError(t, err)
	assert.Equal(t, path, got)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"version":1,"topic":"events","partition":3,"position":41,"epoch":-1}`+"\n", string(data))

	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file may be left after a successful save")
	assert.Equal(t, "events-3.position", entries[0].Name())
}

// TestFileStoreLoadNeverSavedIsNotFound ensures a topic-partition without a
// file reports found == false and no error.
func TestFileStoreLoadNeverSavedIsNotFound(t *testing.T) {
	s := newFileStore(t)
	require.NoError(t, s.Save(context.Background(), "events", 0, checkpoint.At(5)))

	pos, found, err := s.Load(context.Background(), "events", 1)
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, int64(0), pos.Offset)
}

// NewFileStore must create a missing directory, parents included, and accept
// an existing one.
func TestNewFileStoreCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "checkpoints")
	s, err := checkpoint.NewFileStore(dir)
	require.NoError(t, err)
	assert.DirExists(t, dir)
	assert.Equal(t, dir, s.Dir())
	require.NoError(t, s.Save(context.Background(), "events", 0, checkpoint.At(1)))

	again, err := checkpoint.NewFileStore(dir)
	require.NoError(t, err)
	pos, found, err := again.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(1), pos.Offset)
}

// NewFileStore must fail, naming the path, when the directory cannot exist.
func TestNewFileStoreFailsWhenDirIsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o644))

	_, err := checkpoint.NewFileStore(filepath.Join(path, "sub"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)

	_, err = checkpoint.NewFileStore("")
	require.Error(t, err)

	// The file itself: a store there could never save, and a consumer
	// given it retried its "not a directory" load forever.
	_, err = checkpoint.NewFileStore(path)
	require.ErrorIs(t, err, syscall.ENOTDIR)
	assert.Contains(t, err.Error(), path)
}

// testCorrupt saves 41 to events-0, damages the file with corrupt, and checks
// that Load fails with ErrCorrupt naming the file and giving why (never
// "not found"), and that a new Save repairs it.
func testCorrupt(t *testing.T, why string, corrupt func(t *testing.T, path string)) {
	t.Helper()
	ctx := context.Background()
	s := newFileStore(t)
	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(41)))
	path, err := s.Path("events", 0)
	require.NoError(t, err)

	corrupt(t, path)

	pos, found, err := s.Load(ctx, "events", 0)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	assert.False(t, found)
	assert.Equal(t, int64(0), pos.Offset)
	assert.Contains(t, err.Error(), "checkpoint: corrupt position file "+path+": ")
	assert.Contains(t, err.Error(), why)

	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(42)))
	pos, found, err = s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(42), pos.Offset)
}

func overwrite(content string) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
}

// TestFileStoreLoadFailsOnNULBytes ensures a file zeroed by a crash (16 NUL
// bytes, as a filesystem may leave after a power loss) is reported corrupt.
func TestFileStoreLoadFailsOnNULBytes(t *testing.T) {
	testCorrupt(t, "0x00", overwrite(strings.Repeat("\x00", 16)))
}

// TestFileStoreLoadFailsOnEmptyFile ensures an emptied file is reported
// corrupt, not "never saved".
func TestFileStoreLoadFailsOnEmptyFile(t *testing.T) {
	testCorrupt(t, "empty file", overwrite(""))
}

// TestFileStoreLoadFailsOnDamagedContent ensures every kind of damage that
// leaves a file not exactly one valid record is reported corrupt.
func TestFileStoreLoadFailsOnDamagedContent(t *testing.T) {
	for _, tc := range []struct {
		name, content, why string
	}{
		{"truncated JSON", `{"version":1,"topic":"events","parti`, "truncated JSON"},
		{"wrong topic", `{"version":1,"topic":"orders","partition":0,"position":41}` + "\n", `topic "orders"`},
		{"wrong partition", `{"version":1,"topic":"events","partition":1,"position":41}` + "\n", "partition 1"},
		{"wrong version", `{"version":2,"topic":"events","partition":0,"position":41}` + "\n", "version 2"},
		{"negative position", `{"version":1,"topic":"events","partition":0,"position":-1}` + "\n", "negative position"},
		{"missing position", `{"version":1,"topic":"events","partition":0}` + "\n", `missing field "position"`},
		{"null position", `{"version":1,"topic":"events","partition":0,"position":null}` + "\n", `missing field "position"`},
		{"unknown field", `{"version":1,"topic":"events","partition":0,"position":41,"x":1}` + "\n", "unknown field"},
		{"fractional position", `{"version":1,"topic":"events","partition":0,"position":4.5}` + "\n", "invalid JSON"},
		{"two objects", `{"version":1,"topic":"events","partition":0,"position":41}` + "\n" + `{"version":1}`, "unexpected bytes"},
		{"two newlines", `{"version":1,"topic":"events","partition":0,"position":41}` + "\n\n", "unexpected bytes"},
		{"leading space", ` {"version":1,"topic":"events","partition":0,"position":41}`, "want '{'"},
		{"not an object", `41`, "want '{'"},
		{"oversized", `{"version":1,"topic":"events","partition":0,"position":41}` + strings.Repeat(" ", 5000), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCorrupt(t, tc.why, overwrite(tc.content))
		})
	}
}

// TestFileStoreLoadAcceptsMissingTrailingNewline ensures the one optional part
// of the format is optional.
func TestFileStoreLoadAcceptsMissingTrailingNewline(t *testing.T) {
	s := newFileStore(t)
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"topic":"events","partition":0,"position":9}`), 0o600))

	pos, found, err := s.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(9), pos.Offset)
}

// TestFileStoreLoadReportsIOErrorWithPath ensures an unreadable position
// "file" (here a directory) is an I/O error naming the path, neither corrupt
// nor "not found".
func TestFileStoreLoadReportsIOErrorWithPath(t *testing.T) {
	s := newFileStore(t)
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(path, 0o755))

	_, found, err := s.Load(context.Background(), "events", 0)
	require.Error(t, err)
	assert.False(t, found)
	assert.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	assert.Contains(t, err.Error(), path)
}

// TestFileStoreIgnoresLeftoverTempFile ensures a temporary file left by a
// crash mid-save neither changes what Load returns nor blocks the next Save.
func TestFileStoreIgnoresLeftoverTempFile(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(41)))
	leftover := filepath.Join(s.Dir(), ".events-0.position.tmp-crash")
	require.NoError(t, os.WriteFile(leftover, []byte("{"), 0o600))

	pos, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(41), pos.Offset)

	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(42)))
	pos, found, err = s.Load(ctx, "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(42), pos.Offset)
}

// TestFileStoreSaveRejectsNegativePosition ensures a negative position or
// partition is refused and nothing is written.
func TestFileStoreSaveRejectsNegativePosition(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)

	err := s.Save(ctx, "events", 0, checkpoint.At(-1))
	require.ErrorIs(t, err, checkpoint.ErrInvalidPosition)
	assert.Contains(t, err.Error(), "-1")

	err = s.Save(ctx, "events", -2, checkpoint.At(5))
	require.ErrorIs(t, err, checkpoint.ErrInvalidPosition)
	assert.Contains(t, err.Error(), "-2")

	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestFileStoreRejectsInvalidTopic ensures no topic name can address a file
// outside the store's directory or break Kafka's naming rule.
func TestFileStoreRejectsInvalidTopic(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	for _, topic := range []string{"", ".", "..", "a/b", "../escape", `a\b`, "a b", "é", "a:b", strings.Repeat("x", 250)} {
		t.Run(fmt.Sprintf("%q", topic), func(t *testing.T) {
			err := s.Save(ctx, topic, 0, checkpoint.At(1))
			require.ErrorIs(t, err, checkpoint.ErrInvalidTopic)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", topic))

			_, found, err := s.Load(ctx, topic, 0)
			require.ErrorIs(t, err, checkpoint.ErrInvalidTopic)
			assert.False(t, found)
		})
	}
}

// TestFileStoreRejectsTopicWhoseFileNameIsTooLong ensures a Kafka-legal topic
// whose position file name would pass the 255-byte file-name limit is refused
// with a clear error, and that every topic up to 235 bytes fits.
func TestFileStoreRejectsTopicWhoseFileNameIsTooLong(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)

	long := strings.Repeat("x", 249)
	err := s.Save(ctx, long, 0, checkpoint.At(1))
	require.ErrorIs(t, err, checkpoint.ErrInvalidTopic)
	assert.Contains(t, err.Error(), "file-name limit is 255")
	_, _, err = s.Load(ctx, long, 0)
	require.ErrorIs(t, err, checkpoint.ErrInvalidTopic)

	fits := strings.Repeat("y", 235)
	require.NoError(t, s.Save(ctx, fits, math.MaxInt32, checkpoint.At(7)))
	pos, found, err := s.Load(ctx, fits, math.MaxInt32)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(7), pos.Offset)

	var m checkpoint.MemoryStore
	require.NoError(t, m.Save(ctx, long, 0, checkpoint.At(1)), "249 bytes is Kafka's limit and MemoryStore has no file names")
}

// TestFileStoreHonoursCancelledContext ensures a done context stops Load and
// Save before they touch the disk.
func TestFileStoreHonoursCancelledContext(t *testing.T) {
	s := newFileStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	require.ErrorIs(t, s.Save(ctx, "events", 0, checkpoint.At(1)), context.Canceled)
	_, _, err := s.Load(ctx, "events", 0)
	require.ErrorIs(t, err, context.Canceled)
}

// TestFileStoreConcurrentSaves ensures concurrent saves to one store never
// leave a corrupt or missing file, and the last save of each partition wins.
func TestFileStoreConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				assert.NoError(t, s.Save(ctx, "events", int32(g%2), checkpoint.At(int64(i))))
				_, _, err := s.Load(ctx, "events", int32(g%2))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	for p := range int32(2) {
		pos, found, err := s.Load(ctx, "events", p)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, int64(19), pos.Offset)
	}
}

// TestFileStoreKeepsTheEpoch ensures the epoch of the last record handled
// round-trips, a file written without one loads as NoEpoch, and an epoch
// below NoEpoch is refused.
func TestFileStoreKeepsTheEpoch(t *testing.T) {
	ctx := context.Background()
	s, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Save(ctx, "events", 0, checkpoint.Position{Offset: 95, Epoch: 3}))
	pos, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, checkpoint.Position{Offset: 95, Epoch: 3}, pos)

	path, err := s.Path("events", 1)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"topic":"events","partition":1,"position":7}`+"\n"), 0o600))
	pos, found, err = s.Load(ctx, "events", 1)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, checkpoint.At(7), pos)

	require.ErrorIs(t, s.Save(ctx, "events", 0, checkpoint.Position{Offset: 1, Epoch: -2}), checkpoint.ErrInvalidPosition)
}

// TestFileStoreRejectsFilesSaveDidNotWrite ensures duplicate keys and keys in
// another case, which encoding/json would accept, are corruption.
func TestFileStoreRejectsFilesSaveDidNotWrite(t *testing.T) {
	s, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	for _, content := range []string{
		`{"version":1,"topic":"events","partition":0,"position":5,"position":7}`,
		`{"Version":1,"topic":"events","partition":0,"position":5}`,
		`{"version":1, "topic":"events","partition":0,"position":5}`,
	} {
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
		_, _, err := s.Load(context.Background(), "events", 0)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, content)
		assert.Contains(t, err.Error(), "not in the form Save writes")
	}
}

// TestFileStoreSaveBatchSavesEveryPosition proves SaveBatch leaves each
// partition's file holding its new position, replaces older ones, and
// refuses an invalid position before writing anything.
func TestFileStoreSaveBatchSavesEveryPosition(t *testing.T) {
	dir := t.TempDir()
	s, err := checkpoint.NewFileStore(dir)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, "events", 1, checkpoint.At(3)))
	batch := []checkpoint.TopicPosition{
		{Topic: "events", Partition: 0, Position: checkpoint.Position{Offset: 10, Epoch: 2}},
		{Topic: "events", Partition: 1, Position: checkpoint.At(11)},
		{Topic: "other", Partition: 0, Position: checkpoint.At(12)},
	}
	require.NoError(t, s.SaveBatch(ctx, batch))
	for _, tp := range batch {
		pos, found, err := s.Load(ctx, tp.Topic, tp.Partition)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, tp.Position, pos)
	}
	err = s.SaveBatch(ctx, []checkpoint.TopicPosition{
		{Topic: "events", Partition: 0, Position: checkpoint.At(20)},
		{Topic: "events", Partition: 1, Position: checkpoint.At(-1)},
	})
	require.ErrorIs(t, err, checkpoint.ErrInvalidPosition)
	pos, _, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	require.Equal(t, int64(10), pos.Offset, "nothing of a refused batch is saved")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3, "no temporary file is left behind")
}
