package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/strom-dev/strom/internal/topicname"
)

// The layout of a state file (see the package doc for the diagram). All
// integers are little-endian.
const (
	stateMagic       = "STROMST\x00" // 8 bytes at offset 0
	stateVersion     = 1             // uint32 at offset 8
	stateHeaderBytes = 24            // magic, version, body length (uint64 at 12), CRC32C (uint32 at 20)
	stateSuffix      = ".state"
)

// Every valid state name fits in a file name: the longest (249 bytes) plus
// ".state" is exactly 255 bytes. This constant fails to compile if that ever
// stops being true, so StatePath needs no runtime length check.
const _ uint = maxNameBytes - topicname.MaxLen - uint(len(stateSuffix))

// castagnoli is the CRC32C table, as the log's frames use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The state methods of FileStore.
var _ StateStore = (*FileStore)(nil)

// StatePath returns the name of the file that holds the state snapshot
// saved under name (dir/<name>.state), or an error wrapping
// [ErrInvalidStateName] when the name is invalid. The file need not exist.
func (s *FileStore) StatePath(name string) (string, error) {
	if err := validateName(ErrInvalidStateName, name); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, name+stateSuffix), nil
}

// SaveState replaces the snapshot saved under name with state
// (checkpoint.StateStore), with the steps of Save: it writes the header and
// state to a temporary file in the store's directory, fsyncs and closes it,
// renames it over dir/<name>.state and fsyncs the directory, and returns once
// all of that is done, so a snapshot it saved survives a power loss. State
// may be of any size, 0 bytes included; it is copied once, behind the
// header, and not kept. It returns an error wrapping [ErrInvalidStateName]
// for an invalid name, ctx.Err() when ctx is already done, and any I/O error
// wrapped with the file name and the step that failed; the temporary file is
// removed on failure. After an error the file holds either the old snapshot
// or the new one.
func (s *FileStore) SaveState(ctx context.Context, name string, state []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.StatePath(name); err != nil {
		return err
	}
	data := encodeState(state)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaceLocked(name+stateSuffix, data)
}

// LoadState returns the snapshot last saved under name
// (checkpoint.StateStore), in a new slice, non-nil when found. It returns
// (nil, false, nil) when the state file does not exist; an error wrapping
// [ErrCorrupt] and naming the file when it exists but is not one whole
// snapshot; an error wrapping [ErrInvalidStateName] for an invalid name;
// ctx.Err() when ctx is already done; and any other I/O error wrapped with
// the file name. Temporary files left by an interrupted SaveState are never
// read.
//
// The body is read into a buffer sized by the file's size, after the header
// has been checked against that size, so a damaged length field can never
// make LoadState allocate more than the file holds.
func (s *FileStore) LoadState(ctx context.Context, name string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	path, err := s.StatePath(name)
	if err != nil {
		return nil, false, err
	}
	f, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if errors.Is(err, errNotRegular) {
		return nil, false, corruptState(path, "%v", err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: load state %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck // read-only; a close error loses nothing
	state, err := readState(f, path)
	if err != nil {
		return nil, false, err
	}
	return state, true, nil
}

// encodeState returns the content of a state file: the header, then state.
func encodeState(state []byte) []byte {
	data := make([]byte, stateHeaderBytes, stateHeaderBytes+len(state))
	copy(data, stateMagic)
	binary.LittleEndian.PutUint32(data[8:], stateVersion)
	binary.LittleEndian.PutUint64(data[12:], uint64(len(state)))
	binary.LittleEndian.PutUint32(data[20:], crc32.Checksum(state, castagnoli))
	return append(data, state...)
}

// readState reads and checks the state file f, opened from path. Each check
// comes before anything it protects: the size before the header is read, the
// header's length against the size before the body is allocated, the CRC
// before the body is returned.
func readState(f *os.File, path string) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load state %s: %w", path, err)
	}
	size := info.Size()
	switch {
	case size == 0:
		return nil, corruptState(path, "empty file")
	case size < stateHeaderBytes:
		return nil, corruptState(path, "%d bytes, shorter than the %d-byte header", size, stateHeaderBytes)
	case size-stateHeaderBytes > math.MaxInt:
		return nil, fmt.Errorf("checkpoint: load state %s: %d-byte body does not fit in memory", path, size-stateHeaderBytes)
	}
	var hdr [stateHeaderBytes]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("checkpoint: load state %s: read header: %w", path, err)
	}
	version := binary.LittleEndian.Uint32(hdr[8:])
	length := binary.LittleEndian.Uint64(hdr[12:])
	sum := binary.LittleEndian.Uint32(hdr[20:])
	have := uint64(size - stateHeaderBytes)
	switch {
	case string(hdr[:8]) != stateMagic:
		return nil, corruptState(path, "magic %q, want %q", hdr[:8], stateMagic)
	case version != stateVersion:
		return nil, corruptState(path, "format version %d, want %d", version, stateVersion)
	case length > have:
		return nil, corruptState(path, "header gives a %d-byte body, the file holds %d bytes after the header (truncated)", length, have)
	case length < have:
		return nil, corruptState(path, "header gives a %d-byte body, the file holds %d bytes after the header (%d extra)", length, have, have-length)
	}
	body := make([]byte, have)
	if _, err := io.ReadFull(f, body); err != nil {
		return nil, fmt.Errorf("checkpoint: load state %s: read body: %w", path, err)
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, corruptState(path, "CRC32C of the %d-byte body is %#08x, the header says %#08x", len(body), got, sum)
	}
	return body, nil
}

// corruptStateError is a damaged state file: Error names the file and what
// is wrong with it, and errors.Is matches [ErrCorrupt]. (ErrCorrupt's own
// text says "position file", so it is matched, not wrapped into the text.)
type corruptStateError struct {
	path, what string
}

func corruptState(path, format string, args ...any) error {
	return &corruptStateError{path: path, what: fmt.Sprintf(format, args...)}
}

func (e *corruptStateError) Error() string {
	return "checkpoint: corrupt state file " + e.path + ": " + e.what
}

func (e *corruptStateError) Unwrap() error { return ErrCorrupt }
