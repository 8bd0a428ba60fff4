package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
)

// TestHostilePositionFilesAreCorruptAndHarmNoOtherPosition ensures a
// position file emptied, holding a negative position, a position that is
// not a number (a word, a string, a fraction, one past int64), or a bare
// number is ErrCorrupt naming the file and saying what is wrong, never "not
// found" or a position, and that the other partitions' positions are
// unharmed.
func TestHostilePositionFilesAreCorruptAndHarmNoOtherPosition(t *testing.T) {
	for name, c := range map[string]struct{ content, why string }{
		"empty":               {"", "empty file"},
		"negative":            {`{"version":1,"topic":"events","partition":0,"position":-5}`, "negative position"},
		"bare negative":       {"-5\n", "starts with byte 0x2d, want '{'"},
		"bare number":         {"41\n", "starts with byte 0x34, want '{'"},
		"word":                {"ten\n", "starts with byte 0x74, want '{'"},
		"string position":     {`{"version":1,"topic":"events","partition":0,"position":"41"}`, "invalid JSON"},
		"fractional position": {`{"version":1,"topic":"events","partition":0,"position":4.5}`, "invalid JSON"},
		"past int64":          {`{"version":1,"topic":"events","partition":0,"position":9223372036854775808}`, "invalid JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newFileStore(t)
			require.NoError(t, s.Save(ctx, "events", 1, checkpoint.At(7)))
			path, err := s.Path("events", 0)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, []byte(c.content), 0o644))

			pos, found, err := s.Load(ctx, "events", 0)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			assert.False(t, found)
			assert.Zero(t, pos)
			assert.Contains(t, err.Error(), "checkpoint: corrupt position file "+path+": "+c.why)

			pos, found, err = s.Load(ctx, "events", 1)
			require.NoError(t, err)
			require.True(t, found)
			assert.EqualValues(t, 7, pos.Offset)
		})
	}
}

// TestSaveOnAFullDiskFailsWithENOSPCAndKeepsTheOldPosition ensures Save and
// SaveBatch on a full file system (a tmpfs filled by another file) fail with
// ENOSPC naming the store's file, leave no temporary file, and keep the
// position saved before; once space is freed a Save works.
func TestSaveOnAFullDiskFailsWithENOSPCAndKeepsTheOldPosition(t *testing.T) {
	t.Parallel()
	testutil.RunInTmpfs(t, 1<<20, func(t *testing.T, dir string) {
		ctx := context.Background()
		s, err := checkpoint.NewFileStore(filepath.Join(dir, "state"))
		require.NoError(t, err)
		require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(5)))
		free := testutil.FillDisk(t, filepath.Join(dir, "ballast"))

		err = s.Save(ctx, "events", 0, checkpoint.At(6))
		require.ErrorIs(t, err, syscall.ENOSPC)
		assert.Contains(t, err.Error(), s.Dir())
		err = s.SaveBatch(ctx, []checkpoint.TopicPosition{{Topic: "events", Partition: 0, Position: checkpoint.At(6)}})
		require.ErrorIs(t, err, syscall.ENOSPC)
		assert.Contains(t, err.Error(), s.Dir())
		entries, err := os.ReadDir(s.Dir())
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left: %v", entries)
		pos, found, err := s.Load(ctx, "events", 0)
		require.NoError(t, err)
		require.True(t, found)
		assert.EqualValues(t, 5, pos.Offset)

		free()
		require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(6)))
		pos, _, err = s.Load(ctx, "events", 0)
		require.NoError(t, err)
		assert.EqualValues(t, 6, pos.Offset)
	})
}

// TestPositionAndStateFilesThatAreNotRegularFilesAreCorrupt ensures a
// position or state file replaced by a symlink (to /dev/zero, which a plain
// read would never finish) or a FIFO (whose open would wait for a writer) is
// ErrCorrupt naming the file and what it is, one replaced by a directory an
// I/O error naming it (see TestFileStoreLoadReportsIOErrorWithPath), and
// that a Save replaces a link by a file, writing nothing through it.
func TestPositionAndStateFilesThatAreNotRegularFilesAreCorrupt(t *testing.T) {
	for kind, want := range map[string]string{
		"directory": "is a directory",
		"symlink":   "it is a symbolic link",
		"fifo":      "it is a special file",
	} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := newFileStore(t)
			require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(3)))
			require.NoError(t, s.SaveState(ctx, "counts", []byte("state")))
			pos, err := s.Path("events", 0)
			require.NoError(t, err)
			state, err := s.StatePath("counts")
			require.NoError(t, err)
			for _, path := range []string{pos, state} {
				require.NoError(t, os.Remove(path))
				switch kind {
				case "directory":
					require.NoError(t, os.Mkdir(path, 0o755))
				case "symlink":
					require.NoError(t, os.Symlink("/dev/zero", path))
				case "fifo":
					require.NoError(t, syscall.Mkfifo(path, 0o644))
				}
			}

			_, found, err := s.Load(ctx, "events", 0)
			assert.False(t, found)
			assert.Contains(t, err.Error(), pos+": ")
			assert.Contains(t, err.Error(), want)
			if kind == "directory" {
				assert.NotErrorIs(t, err, checkpoint.ErrCorrupt)
			} else {
				require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			}
			_, found, err = s.LoadState(ctx, "counts")
			assert.False(t, found)
			assert.Contains(t, err.Error(), state+": ")
			assert.Contains(t, err.Error(), want)
			if kind != "directory" {
				require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			}

			if kind != "directory" { // rename cannot replace a directory by a file
				require.NoError(t, s.Save(ctx, "events", 0, checkpoint.At(4)))
				p, found, err := s.Load(ctx, "events", 0)
				require.NoError(t, err)
				require.True(t, found)
				assert.EqualValues(t, 4, p.Offset)
			}
		})
	}
}
