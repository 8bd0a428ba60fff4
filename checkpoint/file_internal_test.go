package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingFS is a fileSystem that performs every operation on the real files
// and records it, and can make one kind of operation fail.
type recordingFS struct {
	mu     sync.Mutex
	ops    []string
	failOn string // ops starting with failOn fail instead of running; "" for none
}

var errInjected = errors.New("injected failure")

func (r *recordingFS) record(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	if r.failOn != "" && strings.HasPrefix(op, r.failOn) {
		return errInjected
	}
	return nil
}

func (r *recordingFS) Ops() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

func (r *recordingFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := osFileSystem{}.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := r.record("create " + f.Name()); err != nil {
		return nil, err
	}
	return &recordingFile{file: f, fs: r}, nil
}

func (r *recordingFS) Rename(oldpath, newpath string) error {
	if err := r.record("rename " + oldpath + " -> " + newpath); err != nil {
		return err
	}
	return os.Rename(oldpath, newpath)
}

func (r *recordingFS) Remove(name string) error {
	if err := r.record("remove " + name); err != nil {
		return err
	}
	return os.Remove(name)
}

func (r *recordingFS) SyncDir(dir string) error {
	if err := r.record("fsync dir " + dir); err != nil {
		return err
	}
	return osFileSystem{}.SyncDir(dir)
}

type recordingFile struct {
	file
	fs *recordingFS
}

func (f *recordingFile) Write(p []byte) (int, error) {
	if err := f.fs.record("write " + f.Name()); err != nil {
		return 0, err
	}
	return f.file.Write(p)
}

func (f *recordingFile) Sync() error {
	if err := f.fs.record("fsync " + f.Name()); err != nil {
		return err
	}
	return f.file.Sync()
}

func (f *recordingFile) Close() error {
	if err := f.fs.record("close " + f.Name()); err != nil {
		_ = f.file.Close()
		return err
	}
	return f.file.Close()
}

func newRecordingStore(t *testing.T, failOn string) (*FileStore, *recordingFS) {
	t.Helper()
	s, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	rfs := &recordingFS{failOn: failOn}
	s.fs = rfs
	return s, rfs
}

// TestFileStoreSaveOpOrder ensures Save makes a position durable in the only
// safe order: create a temporary file beside the final one, write it, fsync
// it, close it, rename it over the final name, fsync the directory.
func TestFileStoreSaveOpOrder(t *testing.T) {
	s, rfs := newRecordingStore(t, "")
	require.NoError(t, s.Save(context.Background(), "events", 0, At(41)))

	ops := rfs.Ops()
	require.Len(t, ops, 6, "ops: %q", ops)
	tmp := ops[0][len("create "):]
	assert.Equal(t, s.Dir(), filepath.Dir(tmp), "the temporary file must be in the store's directory")
	assert.Regexp(t, `^\.events-0\.position\.tmp-`, filepath.Base(tmp))
	final := filepath.Join(s.Dir(), "events-0.position")
	assert.Equal(t, []string{
		"create " + tmp,
		"write " + tmp,
		"fsync " + tmp,
		"close " + tmp,
		"rename " + tmp + " -> " + final,
		"fsync dir " + s.Dir(),
	}, ops)

	pos, found, err := s.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(41), pos.Offset)
}

// TestFileStoreSaveFailureRemovesTempAndKeepsOldPosition ensures a save that
// fails at any step before the rename returns the error naming the file,
// removes its temporary file and leaves the old position in place.
func TestFileStoreSaveFailureRemovesTempAndKeepsOldPosition(t *testing.T) {
	for _, step := range []string{"write", "fsync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			s, rfs := newRecordingStore(t, "")
			require.NoError(t, s.Save(ctx, "events", 0, At(41)))
			rfs.mu.Lock()
			rfs.failOn = step + " "
			rfs.mu.Unlock()

			err := s.Save(ctx, "events", 0, At(42))
			require.ErrorIs(t, err, errInjected)
			assert.Contains(t, err.Error(), filepath.Join(s.Dir(), "events-0.position"))

			entries, err := os.ReadDir(s.Dir())
			require.NoError(t, err)
			require.Len(t, entries, 1, "the temporary file must be removed")
			ops := rfs.Ops()
			assert.Regexp(t, `^remove .*\.events-0\.position\.tmp-`, ops[len(ops)-1])
			pos, found, err := s.Load(ctx, "events", 0)
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, int64(41), pos.Offset)
		})
	}
}

// TestFileStoreSaveReportsDirectoryFsyncFailure ensures a failed directory
// fsync, after which durability is unknown, is reported and not swallowed.
func TestFileStoreSaveReportsDirectoryFsyncFailure(t *testing.T) {
	s, _ := newRecordingStore(t, "fsync dir ")
	err := s.Save(context.Background(), "events", 0, At(41))
	require.ErrorIs(t, err, errInjected)
	assert.Contains(t, err.Error(), "fsync directory")
}
