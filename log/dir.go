package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/internal/topicid"
	"github.com/strom-dev/strom/internal/topicname"
)

// Log is a directory of topics. Open it once per process, for everything
// the process reads and writes there; it is safe for concurrent use.
//
// One process writes a topic, holding the topic's writer lock; any number
// read it. A Log opened read-write takes a topic's lock when it first
// writes the topic (an append, a Truncate, EnforceRetention, CreateTopic) or
// is asked to (Topic.LockWriter, WriteTopic), not when it opens it: until
// then the topic is read exactly as through a Log opened ReadOnly, following
// the appends of the process that writes it. So one Log can read topic A,
// written by another process, and write topic B (see the package doc,
// "Readers and writers in one process"). A write to a topic another
// process holds fails with a *LockedError naming that process's pid, and
// reading it goes on. A Log opened ReadOnly never writes or locks anything.
type Log struct {
	dir string
	cfg config

	mu     sync.Mutex
	topics map[string]*Topic
	closed bool

	ret   backgroundLoop // retention.go: the background retention check
	clean backgroundLoop // cleaner.go: the background cleaner
}

// Open opens the log directory dir, which must exist unless CreateIfMissing
// is given: a missing dir fails at once with an error naming it that matches
// both ErrNoLog and fs.ErrNotExist, and creates nothing, so a mistyped path
// is reported instead of becoming a new, empty log whose topics are unknown.
// A path that is not a directory fails with ErrNoLog too. An existing
// directory opens whether it is empty or holds topics. Open reads nothing
// else: topics are opened, recovered and locked by Topic and CreateTopic.
// Errors name the directory; a bad option combination (ReadOnly with
// CreateIfMissing) is reported before anything is touched.
func Open(dir string, opts ...Option) (*Log, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrNoLog)
	}
	if err := openDir(dir, cfg.createIfMissing); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, topics: make(map[string]*Topic)}
	l.cfg.tel = newLogTelemetry(l)
	l.startRetention()
	l.clean.start(l, l.cfg.cleanerInterval, l.compactDirty)
	return l, nil
}

// Dir returns the directory the log was opened on.
func (l *Log) Dir() string { return l.dir }

// ReadOnly reports whether the log was opened with ReadOnly.
func (l *Log) ReadOnly() bool { return l.cfg.readOnly }

// CreateTopic creates a topic of the given number of partitions (1 to
// MaxPartitions) and opens it, or opens it when it already exists with the
// same count. The partition count is fixed at creation and stored in the
// topic's directory, with the retention policy opts set (RetentionBytes,
// Retention; unlimited by default). For an existing topic, the options given
// replace the stored ones and those not given are kept. Errors:
// ErrInvalidTopic, ErrInvalidPartitions, ErrTopicExists (another count),
// ErrLocked, ErrReadOnly, ErrCorrupt.
func (l *Log) CreateTopic(name string, partitions int, opts ...TopicOption) (*Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: topic %s: %d partitions (want 1 to %d)", ErrInvalidPartitions, name, partitions, MaxPartitions)
	}
	if l.cfg.readOnly {
		return nil, fmt.Errorf("%w: cannot create topic %s in %s", ErrReadOnly, name, l.dir)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	var topts topicOptions
	for _, o := range opts {
		if o != nil {
			o.applyTopic(&topts)
		}
	}
	if tt := topts.timestampType; tt != nil && !tt.valid() {
		return nil, fmt.Errorf("log: create topic %s: invalid timestamp type %d (want CreateTime or LogAppendTime)", name, int(*tt))
	}
	if ms := topts.tombstoneMs; ms != nil && *ms < 0 {
		return nil, fmt.Errorf("log: create topic %s: tombstone retention %d ms is negative", name, *ms)
	}
	if cp := topts.cleanupPolicy; cp != nil && !cp.valid() {
		return nil, fmt.Errorf("log: create topic %s: invalid cleanup policy %d (want CleanupDelete, CleanupCompact or CleanupCompactDelete)", name, int(*cp))
	}
	if t, ok := l.topics[name]; ok {
		if t.Partitions() != partitions {
			return nil, fmt.Errorf("%w: topic %s has %d partitions, asked for %d", ErrTopicExists, name, t.Partitions(), partitions)
		}
		if err := t.LockWriter(); err != nil {
			return nil, err
		}
		if err := t.setRetention(&topts); err != nil {
			return nil, err
		}
		return t, nil
	}
	tdir := filepath.Join(l.dir, name)
	if err := mkdirAllSynced(tdir); err != nil {
		return nil, fmt.Errorf("log: create topic %s: %w", name, err)
	}
	lock, err := lockTopic(name, tdir)
	if err != nil {
		return nil, err
	}
	m, err := loadTopicMeta(name, tdir)
	switch {
	case errors.Is(err, ErrUnknownTopic):
		m = topicMeta{Version: 1, Name: name, Partitions: partitions, ID: topicid.New()}
		topts.applyTo(&m)
		if err := writeTopicMeta(tdir, m); err != nil {
			unlockTopic(lock)
			return nil, err
		}
	case err != nil:
		unlockTopic(lock)
		return nil, err
	case m.Partitions != partitions:
		unlockTopic(lock)
		return nil, fmt.Errorf("%w: topic %s has %d partitions, asked for %d", ErrTopicExists, name, m.Partitions, partitions)
	case topts.applyTo(&m) || m.ID.IsZero():
		if m.ID.IsZero() {
			m.ID = topicid.New() // a topic of a version before IDs (assignID)
		}
		if err := writeTopicMeta(tdir, m); err != nil {
			unlockTopic(lock)
			return nil, err
		}
	}
	t, err := openTopic(l, name, tdir, partitions, lock)
	if err != nil {
		return nil, err
	}
	t.storeMeta(m)
	l.topics[name] = t
	return t, nil
}

// Topic opens an existing topic for reading, and returns the same *Topic on
// later calls. It takes no lock, in a read-write log too: the topic is read
// as through a ReadOnly log (following another process's appends) until
// this process first writes it, which takes the topic's writer lock and
// recovers its partitions for writing (see Topic.LockWriter and the package
// doc, "Recovery"); WriteTopic does that at once. Errors: ErrInvalidTopic,
// ErrUnknownTopic, ErrCorrupt (damage a reader can tell: a bad frame in a
// sealed segment, one with intact frames behind it, or an end of a
// partition below its recovery point; a recovery point file that does not
// parse).
func (l *Log) Topic(name string) (*Topic, error) {
	return l.openTopic(name, false)
}

// WriteTopic opens an existing topic for writing: Topic, then
// Topic.LockWriter, so the lock is held and the partitions recovered for
// writing (torn tail cut, recovery point checked, new epoch) when it
// returns. Errors: those of Topic; ErrReadOnly in a ReadOnly log; a
// *LockedError (ErrLocked) naming the holder's pid when another writer
// holds the lock (the topic stays open for reading); ErrCorrupt from the
// writer's recovery.
func (l *Log) WriteTopic(name string) (*Topic, error) {
	if l.cfg.readOnly {
		return nil, fmt.Errorf("%w: cannot write topic %s in %s", ErrReadOnly, name, l.dir)
	}
	t, err := l.openTopic(name, true)
	if err != nil {
		return nil, err
	}
	if err := t.LockWriter(); err != nil {
		return nil, err
	}
	return t, nil
}

// openTopic is Topic, and with lock WriteTopic's open: a topic not open
// yet is then locked first and opened straight for writing (so WithRepair
// repairs what a read-only open would refuse); an open one is left to
// LockWriter. A held lock is a *LockedError, and the topic is then opened
// for reading.
func (l *Log) openTopic(name string, lock bool) (*Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if t, ok := l.topics[name]; ok {
		return t, nil
	}
	tdir := filepath.Join(l.dir, name)
	if _, err := readTopicMeta(name, tdir); err != nil {
		return nil, err
	}
	var lf *os.File
	var lockErr error
	if lock {
		if lf, lockErr = lockTopic(name, tdir); lockErr != nil && !errors.Is(lockErr, ErrLocked) {
			return nil, lockErr
		}
	}
	m, err := loadTopicMeta(name, tdir)
	if err == nil && lf != nil {
		err = assignID(tdir, &m)
	}
	if err != nil {
		if lf != nil {
			unlockTopic(lf)
		}
		return nil, err
	}
	t, err := openTopic(l, name, tdir, m.Partitions, lf)
	if err != nil {
		return nil, err
	}
	t.storeMeta(m)
	l.topics[name] = t
	if lockErr != nil {
		return t, lockErr
	}
	return t, nil
}

// Close closes every topic opened through the log, releasing their writer
// locks and descriptors. It first stops the background retention check
// and cleaner (waiting for work in progress to finish its topic). Appends in flight
// finish first; reads in flight finish with their bytes. Close is
// idempotent.
func (l *Log) Close() error {
	l.ret.halt()
	l.clean.halt()
	l.cfg.tel.close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, t := range l.topics {
		errs = append(errs, t.close())
	}
	return errors.Join(errs...)
}

// ValidateTopicName applies Kafka's topic-name rule: 1 to 249 bytes of
// [a-zA-Z0-9._-], and neither "." nor "..". No legal name can leave the log
// directory. It returns nil for a legal name; otherwise an error that wraps
// ErrInvalidTopic, quotes the name and says what was wrong with it.
func ValidateTopicName(name string) error {
	if err := topicname.Validate(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return nil
}

// lockFileName is the per-topic writer lock, held with flock(LOCK_EX) for
// as long as the topic is open for writing; it holds the holder's pid.
const lockFileName = "writer.lock"

func lockTopic(topic, tdir string) (*os.File, error) {
	path := filepath.Join(tdir, lockFileName)
	f, err := openNoFollow(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: topic %s: open lock file: %w", topic, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b, _ := readRegularFile(path, 32) // a pid and a newline; anything larger is no pid
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &LockedError{Topic: topic, Path: path, PID: pid}
		}
		return nil, fmt.Errorf("log: topic %s: flock %s: %w", topic, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// unlockTopic releases the writer lock f (taken by lockTopic) and closes
// it. It must release the flock explicitly, LOCK_UN first: a flock belongs
// to the open file description, and a child this process is forking at the
// same moment holds a copy of every descriptor from fork until its exec
// closes them (O_CLOEXEC), so closing ours alone would leave the lock held
// by that copy, and a reopen in the meantime would find the topic "locked
// for writing" by this very process (seen under load: 398 of 2,000
// close-and-reopen rounds beside a goroutine running /bin/true in a loop).
func unlockTopic(f *os.File) error {
	uerr := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if err := f.Close(); err != nil {
		return fmt.Errorf("log: close lock file %s: %w", f.Name(), err)
	}
	if uerr != nil {
		return fmt.Errorf("log: unlock %s: %w", f.Name(), uerr)
	}
	return nil
}

// mustBeRegular returns nil when mode (of the entry path, not followed) is a
// regular file's, and otherwise ErrCorrupt naming path and what it is: a
// file the log wrote was replaced.
func mustBeRegular(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	what := "a special file (" + mode.Type().String() + ")"
	switch {
	case mode&fs.ModeDir != 0:
		what = "a directory"
	case mode&fs.ModeSymlink != 0:
		what = "a symbolic link"
	}
	return fmt.Errorf("%w: %s is %s, not a regular file", ErrCorrupt, path, what)
}

// openNoFollow is os.OpenFile refusing a symbolic link as the last element
// of path (O_NOFOLLOW) with an error naming path: the log opens in place
// only files it made itself, and a link planted there must not make it
// read or write outside the log directory.
func openNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW, perm)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link, not a regular file", ErrCorrupt, path)
	}
	return f, err
}

// readRegularFile reads the file at path, which must be a regular file and
// not a symbolic link (ErrCorrupt naming it otherwise): a FIFO planted in
// place of a file the log wrote would make a plain open never return, and a
// link to /dev/zero a plain read never end. It reads no further than the
// size fstat gave, and with limit >= 0 a file larger than limit bytes is
// errFileTooLarge, read no further than limit+1 bytes .
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY|unix.O_NONBLOCK, 0) // a FIFO's open would wait for a writer
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := mustBeRegular(path, fi.Mode()); err != nil {
		return nil, err
	}
	n := fi.Size()
	if limit >= 0 {
		n = min(n, limit+1)
	}
	b, err := io.ReadAll(io.LimitReader(f, n))
	if err == nil && limit >= 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", errFileTooLarge, path, limit)
	}
	return b, err
}

// syncDir fsyncs a directory so a file created, renamed or removed in it
// survives a crash (the entry lives in the directory, not the file).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: fsync directory %s: %w", dir, err)
	}
	return nil
}

// openDir checks that dir is a directory, creating it and missing parents
// (mkdirAllSynced) when it does not exist and create is set; see Open for
// the errors.
func openDir(dir string, create bool) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := mkdirAllSynced(dir); err != nil {
			return fmt.Errorf("log: open %s: create: %w", dir, err)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %w (Open creates one only when given CreateIfMissing)", ErrNoLog, dir, fs.ErrNotExist)
	case err != nil:
		return fmt.Errorf("log: open %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNoLog, dir)
	}
	return nil
}

// mkdirAllSynced creates dir (0o755) and missing parents, fsyncing each
// parent that gained an entry.
func mkdirAllSynced(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSynced(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// replaceFile durably replaces dir/name with data, the steps in the order a
// crash needs: write a temporary file in the same directory, fsync it,
// rename it over name, fsync the directory. A crash at any point leaves the
// old content or the new, whole. The file is 0644 (os.CreateTemp makes
// 0600) because readers may run as another user. Errors are not wrapped:
// callers add what the file is.
func replaceFile(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err = tmp.Chmod(0o644); err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}
