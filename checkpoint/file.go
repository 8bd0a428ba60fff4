package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// fileVersion is the format version of a position file without a topic ID,
// and fileVersionTopicID that of one with ("topicId"): Save writes version
// 1 for a position without a topic ID, so such a file stays readable by
// versions of strom before topic IDs, and version 2 for one with, which
// they refuse by its version (ErrCorrupt) rather than by an unknown field.
// Load accepts both, and no other.
const (
	fileVersion        = 1
	fileVersionTopicID = 2
)

// maxFileBytes bounds how much of a position file Load reads. A valid file is
// under 370 bytes (a 249-byte topic plus the JSON around it); anything longer
// is corrupt, and the bound keeps a damaged file from being read whole.
const maxFileBytes = 4096

// maxNameBytes is the longest file name common filesystems accept (NAME_MAX
// on Linux ext4, xfs, btrfs and tmpfs, and on macOS APFS).
const maxNameBytes = 255

// tempSuffixBytes is the most os.CreateTemp adds in place of the "*" of a
// pattern: a decimal uint32.
const tempSuffixBytes = 10

// FileStore is a [Store] that keeps one small file per topic-partition in a
// directory, replaced atomically on every Save (see the package doc for the
// format and the durability steps). A FileStore is safe for concurrent use.
type FileStore struct {
	dir string
	fs  fileSystem // the operations Save performs; osFileSystem outside tests
	mu  sync.Mutex // serialises Save, so saves of one topic-partition land in call order
}

// NewFileStore returns a FileStore keeping its files in dir. It creates dir
// and any missing parents (mode 0755) and fsyncs the parent of dir when it had
// to create it. It returns an error naming dir when dir is empty, cannot be
// created, or exists and is not a directory (wrapping syscall.ENOTDIR).
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: new file store: empty directory name")
	}
	dir = filepath.Clean(dir)
	s := &FileStore{dir: dir, fs: osFileSystem{}}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			// Found by a newcomer: a store on a file loaded nothing and
			// ConsumeForever retried its "not a directory" forever.
			return nil, fmt.Errorf("checkpoint: new file store: %s is not a directory: %w", dir, syscall.ENOTDIR)
		}
		return s, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: new file store: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: new file store: %w", err)
	}
	if err := s.fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("checkpoint: new file store %s: fsync parent directory: %w", dir, err)
	}
	return s, nil
}

// Dir returns the directory the store keeps its files in, as given to
// [NewFileStore] after [filepath.Clean].
func (s *FileStore) Dir() string { return s.dir }

// Path returns the name of the file that holds the position of
// topic-partition (dir/<topic>-<partition>.position), or an error wrapping
// [ErrInvalidTopic] when the topic is invalid or the file name would pass 255
// bytes, or [ErrInvalidPosition] when the partition is negative. The file need
// not exist.
func (s *FileStore) Path(topic string, partition int32) (string, error) {
	if err := validateKey(topic, partition); err != nil {
		return "", err
	}
	name := fileName(topic, partition)
	if len(name) > maxNameBytes {
		return "", fmt.Errorf("%w %q: the position file name for partition %d is %d bytes, the file-name limit is %d",
			ErrInvalidTopic, topic, partition, len(name), maxNameBytes)
	}
	return filepath.Join(s.dir, name), nil
}

// Load returns the position saved for topic-partition. It returns
// (Position{}, false, nil) when the position file does not exist, an error wrapping
// [ErrCorrupt] and naming the file when it exists but is not exactly one valid
// position record, an error wrapping [ErrInvalidTopic] or [ErrInvalidPosition]
// for an invalid topic or negative partition, ctx.Err() when ctx is already
// done, and any other I/O error wrapped with the file name. Temporary files
// left by an interrupted Save are never read.
func (s *FileStore) Load(ctx context.Context, topic string, partition int32) (Position, bool, error) {
	if err := ctx.Err(); err != nil {
		return Position{}, false, err
	}
	path, err := s.Path(topic, partition)
	if err != nil {
		return Position{}, false, err
	}
	data, err := readLimited(path, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Position{}, false, nil
	}
	if errors.Is(err, errNotRegular) {
		return Position{}, false, fmt.Errorf("%w %s: %w", ErrCorrupt, path, err)
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("checkpoint: load %s: %w", path, err)
	}
	pos, err := decodePosition(data, topic, partition)
	if err != nil {
		return Position{}, false, fmt.Errorf("%w %s: %w", ErrCorrupt, path, err)
	}
	return pos, true, nil
}

// Save records position for topic-partition: it writes a temporary file in
// the store's directory, fsyncs and closes it, renames it over the position
// file and fsyncs the directory, and returns once all of that is done. It
// returns an error wrapping [ErrInvalidTopic] or [ErrInvalidPosition] for an
// invalid topic, negative partition or negative position, ctx.Err() when ctx
// is already done, and any I/O error wrapped with the file name and the step
// that failed; the temporary file is removed on failure. After an error the
// position file holds either the old position or the new one.
func (s *FileStore) Save(ctx context.Context, topic string, partition int32, position Position) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateSave(topic, partition, position); err != nil {
		return err
	}
	if _, err := s.Path(topic, partition); err != nil {
		return err
	}
	data := encodePosition(topic, partition, position)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replaceLocked(fileName(topic, partition), data)
}

// The interfaces a FileStore implements.
var _ BatchStore = (*FileStore)(nil)

// SaveBatch saves every position (checkpoint.BatchStore): each is written
// to a temporary file and fsynced (up to 16 at once, each on its own
// goroutine), renamed over its position file, and the directory is fsynced
// once for all of them: with three partitions 4 fsyncs instead of 6, the
// first three overlapping. (On the relay benchmark, where a run ends with
// one save of three partitions, the difference was within the machine's
// noise; it grows with the partitions a pipeline reads.) Errors are those
// of Save; a position whose file was not renamed keeps its old value.
func (s *FileStore) SaveBatch(ctx context.Context, positions []TopicPosition) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, p := range positions {
		if err := validateSave(p.Topic, p.Partition, p.Position); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tmps := make([]string, len(positions))
	errs := make([]error, len(positions))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxParallelFsyncs)
	for i, p := range positions {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			tmps[i], errs[i] = s.writeTemp(fileName(p.Topic, p.Partition), encodePosition(p.Topic, p.Partition, p.Position))
		}()
	}
	wg.Wait()
	var first error
	for i, p := range positions {
		switch {
		case errs[i] != nil:
			first = cmp.Or(first, errs[i])
		case first != nil: // an earlier file failed: leave this one as it was
			_ = s.fs.Remove(tmps[i])
		default:
			path := filepath.Join(s.dir, fileName(p.Topic, p.Partition))
			if err := s.fs.Rename(tmps[i], path); err != nil {
				_ = s.fs.Remove(tmps[i])
				first = fmt.Errorf("checkpoint: save %s: rename %s: %w", path, tmps[i], err)
			}
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil && first == nil {
		first = fmt.Errorf("checkpoint: save to %s: fsync directory: %w", s.dir, err)
	}
	return first
}

// maxParallelFsyncs bounds the temporary files SaveBatch writes and fsyncs
// at once, so a topic of thousands of partitions does not start thousands
// of goroutines and fsyncs.
const maxParallelFsyncs = 16

// writeTemp writes data to a new temporary file for dir/name and fsyncs it,
// returning its path; on failure the file is removed.
func (s *FileStore) writeTemp(name string, data []byte) (string, error) {
	path := filepath.Join(s.dir, name)
	f, err := s.fs.CreateTemp(s.dir, tempPattern(name))
	if err != nil {
		return "", fmt.Errorf("checkpoint: save %s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	if _, err = f.Write(data); err != nil {
		err = fmt.Errorf("checkpoint: save %s: write %s: %w", path, tmp, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("checkpoint: save %s: fsync %s: %w", path, tmp, err)
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("checkpoint: save %s: close %s: %w", path, tmp, cerr)
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// replaceLocked atomically replaces dir/name with data. The order of the steps
// is what makes a crash safe: the data must be on disk (Sync) before the
// rename publishes it, and the rename must be on disk (SyncDir) before Save
// reports success, or a power loss could bring back the old position after the
// caller went on as if the new one were saved. s.mu must be held.
func (s *FileStore) replaceLocked(name string, data []byte) (err error) {
	path := filepath.Join(s.dir, name)
	f, err := s.fs.CreateTemp(s.dir, tempPattern(name))
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil && !renamed {
			if rerr := s.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("checkpoint: remove temporary file %s: %w", tmp, rerr))
			}
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the write error is the one to report
		return fmt.Errorf("checkpoint: save %s: write %s: %w", path, tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the fsync error is the one to report
		return fmt.Errorf("checkpoint: save %s: fsync %s: %w", path, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: save %s: close %s: %w", path, tmp, err)
	}
	if err := s.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: save %s: rename %s: %w", path, tmp, err)
	}
	renamed = true
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("checkpoint: save %s: fsync directory %s: %w", path, s.dir, err)
	}
	return nil
}

// fileName is the name of the position file of topic-partition. The topic
// must have passed validateTopic.
func fileName(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10) + ".position"
}

// tempPattern is the os.CreateTemp pattern of the temporary files of the
// position file name: .<name>.tmp-*, with name shortened when the result
// could pass the file-name limit. Load never reads these files.
func tempPattern(name string) string {
	const extra = len(".") + len(".tmp-") + tempSuffixBytes
	if len(name)+extra > maxNameBytes {
		name = name[:maxNameBytes-extra]
	}
	return "." + name + ".tmp-*"
}

// fileRecord is the JSON content of a position file. encoding/json keeps the
// field order, so the file reads version, topic, partition, position, epoch
// and, in version 2 only, topicId.
type fileRecord struct {
	Version   int     `json:"version"`
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Position  int64   `json:"position"`
	Epoch     int32   `json:"epoch"`
	TopicID   TopicID `json:"topicId,omitzero"`
}

// fileRecordIn is fileRecord as Load decodes it: pointers, so that a missing
// field (or null) is told apart from a zero.
type fileRecordIn struct {
	Version   *int    `json:"version"`
	Topic     *string `json:"topic"`
	Partition *int32  `json:"partition"`
	Position  *int64  `json:"position"`
	Epoch     *int32  `json:"epoch"`   // optional in version 1: absent reads as NoEpoch
	TopicID   *string `json:"topicId"` // version 2 only, and there required
}

// encodePosition returns the content of a position file: one JSON object and
// a newline.
func encodePosition(topic string, partition int32, position Position) []byte {
	version := fileVersion
	if !position.TopicID.IsZero() {
		version = fileVersionTopicID
	}
	data, err := json.Marshal(fileRecord{Version: version, Topic: topic, Partition: partition,
		Position: position.Offset, Epoch: position.Epoch, TopicID: position.TopicID})
	if err != nil {
		// Marshalling a struct of integers, a string and an ID (whose
		// MarshalText never fails) cannot fail.
		panic("checkpoint: encode position: " + err.Error())
	}
	return append(data, '\n')
}

// decodePosition parses the content of the position file of topic-partition
// and says precisely what is wrong when it is not exactly one valid record.
func decodePosition(data []byte, topic string, partition int32) (Position, error) {
	if len(data) == 0 {
		return Position{}, errors.New("empty file")
	}
	if len(data) > maxFileBytes {
		return Position{}, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	if data[0] != '{' {
		return Position{}, fmt.Errorf("starts with byte %#02x, want '{'", data[0])
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rec fileRecordIn
	if err := dec.Decode(&rec); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Position{}, fmt.Errorf("truncated JSON: %w", err)
		}
		return Position{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if rest := data[dec.InputOffset():]; len(rest) != 0 && !bytes.Equal(rest, []byte("\n")) {
		return Position{}, fmt.Errorf("%d unexpected bytes after the JSON object", len(rest))
	}
	switch {
	case rec.Version == nil:
		return Position{}, errors.New(`missing field "version"`)
	case rec.Topic == nil:
		return Position{}, errors.New(`missing field "topic"`)
	case rec.Partition == nil:
		return Position{}, errors.New(`missing field "partition"`)
	case rec.Position == nil:
		return Position{}, errors.New(`missing field "position"`)
	case *rec.Version != fileVersion && *rec.Version != fileVersionTopicID:
		return Position{}, fmt.Errorf("version %d, want %d or %d", *rec.Version, fileVersion, fileVersionTopicID)
	case *rec.Version == fileVersion && rec.TopicID != nil:
		return Position{}, fmt.Errorf(`field "topicId" in a version %d file (only version %d has one)`, fileVersion, fileVersionTopicID)
	case *rec.Version == fileVersionTopicID && rec.TopicID == nil:
		return Position{}, fmt.Errorf(`missing field "topicId" (version %d)`, fileVersionTopicID)
	case *rec.Version == fileVersionTopicID && rec.Epoch == nil:
		return Position{}, fmt.Errorf(`missing field "epoch" (version %d)`, fileVersionTopicID)
	case *rec.Topic != topic:
		return Position{}, fmt.Errorf("topic %q, want %q", *rec.Topic, topic)
	case *rec.Partition != partition:
		return Position{}, fmt.Errorf("partition %d, want %d", *rec.Partition, partition)
	case *rec.Position < 0:
		return Position{}, fmt.Errorf("negative position %d", *rec.Position)
	case rec.Epoch != nil && *rec.Epoch < NoEpoch:
		return Position{}, fmt.Errorf("epoch %d below %d", *rec.Epoch, NoEpoch)
	}
	p := Position{Offset: *rec.Position, Epoch: NoEpoch}
	if rec.Epoch != nil {
		p.Epoch = *rec.Epoch
	}
	if rec.TopicID != nil {
		id, err := ParseTopicID(*rec.TopicID)
		if err != nil {
			return Position{}, err
		}
		if id.IsZero() {
			return Position{}, errors.New(`empty "topicId" (a position without one is written as version 1)`)
		}
		p.TopicID = id
	}
	// encoding/json forgives duplicate keys and matches keys without regard
	// to case; a position file must be exactly what Save writes (epoch
	// optional in version 1), so anything else was not written by Save and
	// is corrupt.
	body := bytes.TrimSuffix(data, []byte("\n"))
	canonical := bytes.TrimSuffix(encodePosition(topic, partition, p), []byte("\n"))
	if rec.Epoch == nil {
		canonical, _ = json.Marshal(struct {
			Version   int    `json:"version"`
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Position  int64  `json:"position"`
		}{fileVersion, topic, partition, p.Offset})
	}
	if !bytes.Equal(body, canonical) {
		return Position{}, fmt.Errorf("not in the form Save writes (want %s)", canonical)
	}
	return p, nil
}

// readLimited reads the file at path, at most limit+1 bytes, so that
// decodePosition can tell an oversized file from a valid one.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only; a close error loses nothing
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// errNotRegular is openRegular's error for a path that is not a regular
// file; Load and LoadState report it as corruption.
var errNotRegular = errors.New("not a regular file")

// openRegular opens path for reading when it is a regular file or a
// directory (whose read then fails with EISDIR, an I/O error), and otherwise
// fails with errNotRegular saying what it is: the store writes only regular
// files (by rename), so a link or a special file was put there, and
// following it could mean a read that never ends (a link to /dev/zero) or an
// open that never returns (a FIFO).
func openRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		what := "a special file (" + fi.Mode().Type().String() + ")"
		if fi.Mode()&fs.ModeSymlink != 0 {
			what = "a symbolic link"
		}
		return nil, fmt.Errorf("it is %s, %w", what, errNotRegular)
	}
	return os.Open(path) // a directory opens, and its read fails: an I/O error, EISDIR
}
