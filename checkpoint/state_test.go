package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// stateStores returns a fresh store of each kind that keeps state, for tests
// of the StateStore contract both must keep.
func stateStores(t *testing.T) map[string]checkpoint.StateStore {
	return map[string]checkpoint.StateStore{
		"FileStore":   newFileStore(t),
		"MemoryStore": &checkpoint.MemoryStore{},
	}
}

// TestStateStoreSaveStateThenLoadStateRoundTrips ensures LoadState returns
// what SaveState stored, per name, that a later SaveState replaces an
// earlier one, and that a name never saved is not found and not an error.
func TestStateStoreSaveStateThenLoadStateRoundTrips(t *testing.T) {
	for kind, s := range stateStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			state, found, err := s.LoadState(ctx, "window")
			require.NoError(t, err)
			assert.False(t, found)
			assert.Nil(t, state)

			require.NoError(t, s.SaveState(ctx, "window", []byte("first")))
			require.NoError(t, s.SaveState(ctx, "per-key.counts_v2", []byte{0, 1, 2, 0xff}))
			require.NoError(t, s.SaveState(ctx, "window", []byte("second, longer")))

			state, found, err = s.LoadState(ctx, "window")
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, []byte("second, longer"), state)

			state, found, err = s.LoadState(ctx, "per-key.counts_v2")
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, []byte{0, 1, 2, 0xff}, state)

			_, found, err = s.Load(ctx, "window", 0)
			require.NoError(t, err)
			assert.False(t, found, "a state name is not a topic")
		})
	}
}

// TestStateStoreEmptyStateIsFound ensures a snapshot of 0 bytes (nil or
// empty) round trips as found, with a non-nil empty slice, so "saved empty"
// is never mistaken for "never saved".
func TestStateStoreEmptyStateIsFound(t *testing.T) {
	for kind, s := range stateStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			for _, empty := range [][]byte{nil, {}} {
				require.NoError(t, s.SaveState(ctx, "empty", []byte("not yet")))
				require.NoError(t, s.SaveState(ctx, "empty", empty))
				state, found, err := s.LoadState(ctx, "empty")
				require.NoError(t, err)
				assert.True(t, found)
				assert.NotNil(t, state)
				assert.Empty(t, state)
			}
		})
	}
}

// TestStateStoreCopiesStateInAndOut ensures a caller may reuse the slice it
// saved and modify the slice it loaded without changing the snapshot.
func TestStateStoreCopiesStateInAndOut(t *testing.T) {
	for kind, s := range stateStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			buf := []byte("abc")
			require.NoError(t, s.SaveState(ctx, "w", buf))
			buf[0] = 'X'

			state, _, err := s.LoadState(ctx, "w")
			require.NoError(t, err)
			assert.Equal(t, []byte("abc"), state)
			state[1] = 'Y'

			state, _, err = s.LoadState(ctx, "w")
			require.NoError(t, err)
			assert.Equal(t, []byte("abc"), state)
		})
	}
}

// TestStateStoreRejectsInvalidNames ensures a name that breaks the topic
// rule (and so could leave the directory) is refused by SaveState and
// LoadState with ErrInvalidStateName naming it, and nothing is written.
func TestStateStoreRejectsInvalidNames(t *testing.T) {
	bad := []string{"", ".", "..", "a/b", "../escape", "a b", "é", "nul\x00", strings.Repeat("x", 250)}
	for kind, s := range stateStores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			for _, name := range bad {
				err := s.SaveState(ctx, name, []byte("x"))
				require.ErrorIs(t, err, checkpoint.ErrInvalidStateName, "name %q", name)
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "the error names the name")
				assert.NotErrorIs(t, err, checkpoint.ErrInvalidTopic)

				_, found, err := s.LoadState(ctx, name)
				require.ErrorIs(t, err, checkpoint.ErrInvalidStateName, "name %q", name)
				assert.False(t, found)
			}
			if fs, ok := s.(*checkpoint.FileStore); ok {
				entries, err := os.ReadDir(fs.Dir())
				require.NoError(t, err)
				assert.Empty(t, entries)
			}
		})
	}
}

// TestFileStoreStateLongestNameFits ensures a 249-byte name, the longest
// allowed, makes a 255-byte file name that the filesystem accepts.
func TestFileStoreStateLongestNameFits(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	name := strings.Repeat("n", 249)
	require.NoError(t, s.SaveState(ctx, name, []byte("x")))
	path, err := s.StatePath(name)
	require.NoError(t, err)
	assert.Len(t, filepath.Base(path), 255)
	state, found, err := s.LoadState(ctx, name)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("x"), state)
}

// TestFileStoreStateSurvivesReopen ensures a snapshot is read back by a new
// FileStore on the same directory, as after a restart.
func TestFileStoreStateSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.NewFileStore(dir)
	require.NoError(t, err)
	require.NoError(t, s.SaveState(ctx, "window", []byte("kept")))

	reopened, err := checkpoint.NewFileStore(dir)
	require.NoError(t, err)
	state, found, err := reopened.LoadState(ctx, "window")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("kept"), state)
}

// TestFileStoreStateHasNoSizeCap ensures a snapshot of many MiB round trips.
func TestFileStoreStateHasNoSizeCap(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	require.NoError(t, s.SaveState(ctx, "big", big))
	state, found, err := s.LoadState(ctx, "big")
	require.NoError(t, err)
	assert.True(t, found)
	assert.True(t, bytes.Equal(big, state))
}

// TestFileStoreStateFileIsTheDocumentedFormat ensures <name>.state holds the
// header of the package doc (magic, version 1, body length, CRC32C of the
// body, little-endian) followed by the body, and no temporary file is left.
func TestFileStoreStateFileIsTheDocumentedFormat(t *testing.T) {
	s := newFileStore(t)
	require.NoError(t, s.SaveState(context.Background(), "window", []byte("hello")))

	path, err := s.StatePath("window")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(s.Dir(), "window.state"), path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := []byte("STROMST\x00" +
		"\x01\x00\x00\x00" +
		"\x05\x00\x00\x00\x00\x00\x00\x00")
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum([]byte("hello"), crc32.MakeTable(crc32.Castagnoli)))
	want = append(want, "hello"...)
	assert.Equal(t, want, data)

	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file may be left after a successful save")
}

// stateFile builds the bytes of a state file with every header field chosen
// by the caller, to damage one at a time.
func stateFile(magic string, version uint32, length uint64, sum uint32, body []byte) []byte {
	data := []byte(magic)
	data = binary.LittleEndian.AppendUint32(data, version)
	data = binary.LittleEndian.AppendUint64(data, length)
	data = binary.LittleEndian.AppendUint32(data, sum)
	return append(data, body...)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// TestFileStoreLoadStateFailsOnCorruptFile ensures every kind of damaged
// state file is an error wrapping ErrCorrupt that names the file and says
// what is wrong, never "not found" and never a partial snapshot.
func TestFileStoreLoadStateFailsOnCorruptFile(t *testing.T) {
	body := []byte("snapshot")
	good := stateFile("STROMST\x00", 1, uint64(len(body)), crc32c(body), body)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 0x01
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty file", nil, "empty file"},
		{"shorter than header", good[:10], "10 bytes, shorter than the 24-byte header"},
		{"header only, cut", good[:23], "23 bytes, shorter than the 24-byte header"},
		{"zeroed by a crash", make([]byte, len(good)), `magic "\x00\x00\x00\x00\x00\x00\x00\x00", want "STROMST\x00"`},
		{"bad magic", stateFile("STROMSX\x00", 1, uint64(len(body)), crc32c(body), body), `magic "STROMSX\x00"`},
		{"unknown version", stateFile("STROMST\x00", 2, uint64(len(body)), crc32c(body), body), "format version 2, want 1"},
		{"length beyond file", stateFile("STROMST\x00", 1, 100, crc32c(body), body), "header gives a 100-byte body, the file holds 8 bytes after the header (truncated)"},
		{"truncated body", good[:len(good)-3], "header gives a 8-byte body, the file holds 5 bytes after the header (truncated)"},
		{"length short of file", stateFile("STROMST\x00", 1, 3, crc32c(body), body), "header gives a 3-byte body, the file holds 8 bytes after the header (5 extra)"},
		{"trailing bytes", append(bytes.Clone(good), 0), "(1 extra)"},
		{"flipped body bit", flipped, "CRC32C of the 8-byte body is"},
		{"wrong CRC", stateFile("STROMST\x00", 1, uint64(len(body)), crc32c(body)+1, body), "the header says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFileStore(t)
			path, err := s.StatePath("window")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, tc.data, 0o600))

			state, found, err := s.LoadState(context.Background(), "window")
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			assert.Contains(t, err.Error(), "checkpoint: corrupt state file "+path+": ")
			assert.Contains(t, err.Error(), tc.want)
			assert.False(t, found)
			assert.Nil(t, state)
		})
	}
}

// TestFileStoreLoadStateDoesNotAllocateFromTheHeaderLength ensures a header
// claiming a 1 TiB body in a 30-byte file is reported as corrupt without
// allocating anything near the claimed size.
func TestFileStoreLoadStateDoesNotAllocateFromTheHeaderLength(t *testing.T) {
	s := newFileStore(t)
	path, err := s.StatePath("window")
	require.NoError(t, err)
	body := []byte("6 byte")
	data := stateFile("STROMST\x00", 1, 1<<40, crc32c(body), body)
	require.Len(t, data, 30)
	require.NoError(t, os.WriteFile(path, data, 0o600))

	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = s.LoadState(ctx, "window")
	runtime.ReadMemStats(&after)

	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	assert.Contains(t, err.Error(), "header gives a 1099511627776-byte body, the file holds 6 bytes after the header")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by LoadState")
}

// TestFileStoreStateHonoursCancelledContext ensures SaveState and LoadState
// with a context already done return ctx.Err() and touch no file.
func TestFileStoreStateHonoursCancelledContext(t *testing.T) {
	s := newFileStore(t)
	require.NoError(t, s.SaveState(context.Background(), "window", []byte("old")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	require.ErrorIs(t, s.SaveState(ctx, "window", []byte("new")), context.Canceled)
	_, found, err := s.LoadState(ctx, "window")
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, found)

	state, _, err := s.LoadState(context.Background(), "window")
	require.NoError(t, err)
	assert.Equal(t, []byte("old"), state)
}
