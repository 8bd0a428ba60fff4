package checkpoint

import "os"

// fileSystem is the set of file operations FileStore.Save performs, in the
// order it performs them. It exists so that tests can record that order and
// inject failures; osFileSystem is the only implementation outside tests.
type fileSystem interface {
	// CreateTemp creates a new file in dir as os.CreateTemp does.
	CreateTemp(dir, pattern string) (file, error)
	// Rename renames oldpath to newpath as os.Rename does.
	Rename(oldpath, newpath string) error
	// Remove removes name as os.Remove does.
	Remove(name string) error
	// SyncDir fsyncs the directory dir, making the creations, renames and
	// removals of entries in it durable.
	SyncDir(dir string) error
}

// file is the part of *os.File that FileStore.Save uses.
type file interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
	Name() string
}

// osFileSystem is fileSystem on the operating system's files.
type osFileSystem struct{}

func (osFileSystem) CreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFileSystem) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFileSystem) Remove(name string) error { return os.Remove(name) }

func (osFileSystem) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close() // the fsync error is the one to report
		return err
	}
	return d.Close()
}
