package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/stream"
)

// FingerprintBytes is how many of a file's first bytes a [LinesSource]
// fingerprints: 1024. A file shorter than that is fingerprinted over all of
// its bytes (as many as the source has read), and only that many are checked
// again on Resume.
const FingerprintBytes = 1024

// identityStatePrefix starts the name of the checkpoint state snapshot that
// keeps a LinesSource's file identities (see identityStateName).
const identityStatePrefix = "lines-identity."

// identityVersion is the format version of the identity snapshot. Resume
// accepts no other.
const identityVersion = 1

// castagnoli is the CRC32C table of the fingerprints, as the log's frames
// and the checkpoint files use: a CPU instruction computes it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FileIdentity is what a [LinesSource] keeps of a file to tell, when it opens
// the file again, whether it is still the file its position counts lines of:
// the device and inode (a new file at the same path has another inode) and a
// CRC32C fingerprint of the file's first FingerprintLen bytes (a file
// rewritten in place keeps its inode, rarely its first bytes).
type FileIdentity struct {
	Dev   uint64 // device number of the filesystem holding the file (stat st_dev)
	Inode uint64 // inode number (stat st_ino)
	// FingerprintLen is how many of the file's first bytes Fingerprint covers:
	// min(bytes read from the file, [FingerprintBytes]); 0 fingerprints
	// nothing.
	FingerprintLen int
	Fingerprint    uint32 // CRC32C (Castagnoli) of the first FingerprintLen bytes
}

// String formats the identity as "dev 2049 inode 131 crc32c 0x1a2b3c4d of
// 1024 bytes".
func (id FileIdentity) String() string {
	return fmt.Sprintf("dev %d inode %d crc32c %#08x of %d bytes", id.Dev, id.Inode, id.Fingerprint, id.FingerprintLen)
}

// sameFile reports whether id names the same device and inode as info.
func (id FileIdentity) sameFile(info fs.FileInfo) bool {
	dev, ino := devInode(info)
	return id.Dev == dev && id.Inode == ino
}

// devInode returns the device and inode numbers of info (0, 0 where the
// platform has no stat_t).
func devInode(info fs.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino //nolint:unconvert // Dev is int32 on darwin
	}
	return 0, 0
}

// identityOf returns the identity of the file described by info whose first
// bytes are head (at most FingerprintBytes of them).
func identityOf(info fs.FileInfo, head []byte) FileIdentity {
	dev, ino := devInode(info)
	return FileIdentity{Dev: dev, Inode: ino, FingerprintLen: len(head), Fingerprint: crc32.Checksum(head, castagnoli)}
}

// FileChange says how a file differs from the identity saved with a
// [LinesSource]'s position.
type FileChange uint8

const (
	// FileReplaced: another file (another device or inode) is at the path,
	// as after a rename-and-create rotation or an editor's save.
	FileReplaced FileChange = iota + 1
	// FileRewritten: the same inode, but its first bytes differ from the
	// fingerprint: the file was rewritten in place.
	FileRewritten
	// FileTruncated: the same inode and first bytes, but the file is shorter
	// than the fingerprint or holds fewer lines than the saved position, as
	// after a copy-truncate rotation.
	FileTruncated
	// FileIdentityLost: the position names a file generation whose identity
	// the store does not hold (the identity snapshot was deleted, or the
	// store given to Resume keeps no state), so the file cannot be checked.
	FileIdentityLost
)

// String returns "replaced", "rewritten", "truncated" or "identity lost".
func (c FileChange) String() string {
	switch c {
	case FileReplaced:
		return "replaced"
	case FileRewritten:
		return "rewritten"
	case FileTruncated:
		return "truncated"
	case FileIdentityLost:
		return "identity lost"
	default:
		return fmt.Sprintf("FileChange(%d)", uint8(c))
	}
}

// FileChangePolicy says what a [LinesSource] does when the file at its path
// is no longer the one its position counts lines of (see [OnFileChange]).
type FileChangePolicy uint8

const (
	// FileChangeRestart, the default (and the zero value), reads the file
	// now at the path from its first line: every line of it is handled,
	// none skipped. The offsets of its lines continue above the saved
	// position, so positions never move backwards.
	FileChangeRestart FileChangePolicy = iota
	// FileChangeFail makes Read return a [*FileChangedError] (wrapped in a
	// [*FileError], and marked stream.Permanent so that ConsumeForever
	// returns it instead of retrying), again on every Read, until the
	// caller has decided what to do with the file: for example read it with
	// FileChangeRestart, or delete the saved position.
	FileChangeFail
)

// ErrFileChanged is matched (errors.Is) by every [*FileChangedError]: the
// file a [LinesSource] reads is not the file its saved position was counted
// in.
var ErrFileChanged = errors.New("source: file changed since its position was saved")

// FileChangedError is the error a [LinesSource] with [FileChangeFail] returns
// (wrapped in a [*FileError]) when it opens its file and finds it is not the
// file its position counts lines of. errors.Is(err, [ErrFileChanged]) holds.
type FileChangedError struct {
	Path   string     // the file, as given to Lines
	Change FileChange // what changed
	// Saved is the identity saved with the position; the zero value when
	// the position was saved without one (by hand, or by a store that keeps
	// no state).
	Saved FileIdentity
	// Found is the identity of the file now at Path (its fingerprint over
	// Saved.FingerprintLen bytes, or fewer when the file is shorter).
	Found FileIdentity
	// Position is the saved position: the offset of the next line to read.
	Position int64
	// Line is the index, in the saved file, of the line Position names.
	Line int64
}

// Error says what changed, naming the file, the position and both
// identities: "source: file /var/log/app.log replaced since position 10
// (line 10) was saved: saved dev 2049 inode 131 crc32c 0x1a2b3c4d of 60
// bytes, found dev 2049 inode 140 crc32c 0x5e6f7a8b of 60 bytes".
func (e *FileChangedError) Error() string {
	msg := fmt.Sprintf("source: file %s %s since position %d (line %d) was saved: ", e.Path, e.Change, e.Position, e.Line)
	switch {
	case e.Change == FileIdentityLost:
		return msg + fmt.Sprintf("the store holds no identity for it (found %v)", e.Found)
	case e.Saved == (FileIdentity{}):
		return msg + fmt.Sprintf("the position was saved without an identity, and the file (%v) has fewer lines", e.Found)
	case e.Change == FileTruncated:
		return msg + fmt.Sprintf("saved %v, found %v, with fewer bytes or lines than were read", e.Saved, e.Found)
	}
	return msg + fmt.Sprintf("saved %v, found %v", e.Saved, e.Found)
}

// Is reports whether target is [ErrFileChanged].
func (e *FileChangedError) Is(target error) bool { return target == ErrFileChanged }

// identityStateName returns the name of the state snapshot (see
// checkpoint.StateStore) that keeps the identities of the files of a source
// with lineage topic: "lines-identity.<topic>", or, for a topic too long for
// that to be a legal name, its first bytes and the CRC32C of the whole topic.
func identityStateName(topic string) string {
	name := identityStatePrefix + topic
	if len(name) <= topicname.MaxLen {
		return name
	}
	sum := fmt.Sprintf(".%08x", crc32.Checksum([]byte(topic), castagnoli))
	return name[:topicname.MaxLen-len(sum)] + sum
}

// fileGeneration is one file a LinesSource read, as kept in the identity
// snapshot: the file's identity, the generation number its lines carry as
// their epoch, and the offset of its first line.
type fileGeneration struct {
	Generation     int32  `json:"generation"`
	Base           int64  `json:"base"`
	Dev            uint64 `json:"dev"`
	Inode          uint64 `json:"inode"`
	FingerprintLen int    `json:"fingerprint_len"`
	Fingerprint    uint32 `json:"fingerprint_crc32c"`
}

func (g fileGeneration) identity() FileIdentity {
	return FileIdentity{Dev: g.Dev, Inode: g.Inode, FingerprintLen: g.FingerprintLen, Fingerprint: g.Fingerprint}
}

// identitySnapshot is the identity snapshot: JSON, so an operator can read
// it (FileStore puts it behind a CRC32C header).
type identitySnapshot struct {
	Version int              `json:"version"`
	Path    string           `json:"path"`
	Files   []fileGeneration `json:"files"`
}

// loadGenerations reads the identity snapshot of topic from store. A
// snapshot that does not decode is an error wrapping checkpoint.ErrCorrupt:
// a broken identity never turns into an unchecked resume.
func loadGenerations(ctx context.Context, store checkpoint.StateStore, topic string) ([]fileGeneration, error) {
	name := identityStateName(topic)
	data, found, err := store.LoadState(ctx, name)
	if err != nil || !found {
		return nil, err
	}
	var snap identitySnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: identity snapshot %q: %w", checkpoint.ErrCorrupt, name, err)
	}
	if snap.Version != identityVersion {
		return nil, fmt.Errorf("%w: identity snapshot %q: format version %d, want %d", checkpoint.ErrCorrupt, name, snap.Version, identityVersion)
	}
	for _, g := range snap.Files {
		if g.Generation < 0 || g.Base < 0 || g.FingerprintLen < 0 || g.FingerprintLen > FingerprintBytes {
			return nil, fmt.Errorf("%w: identity snapshot %q: bad generation %+v", checkpoint.ErrCorrupt, name, g)
		}
	}
	return snap.Files, nil
}

// saveGenerations replaces the identity snapshot of topic in store.
func saveGenerations(ctx context.Context, store checkpoint.StateStore, topic, path string, files []fileGeneration) error {
	data, err := json.Marshal(identitySnapshot{Version: identityVersion, Path: path, Files: files})
	if err != nil {
		return err
	}
	return store.SaveState(ctx, identityStateName(topic), data)
}

// readHead reads the first n bytes of f (fewer when f is shorter) without
// moving its offset.
func readHead(f *os.File, n int) ([]byte, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// fingerprintLen is how many first bytes the check of w fingerprints.
func fingerprintLen(w resumePoint) int {
	if w.id != nil {
		return w.id.FingerprintLen
	}
	return FingerprintBytes
}

// check compares the file f, described by info, with the identity of w. It
// returns the change found (0 for none) and f's identity.
func (s *LinesSource) check(f *os.File, info fs.FileInfo, w resumePoint) (FileChange, FileIdentity, error) {
	if w.id == nil && !w.lost {
		return 0, FileIdentity{}, nil
	}
	head, err := readHead(f, fingerprintLen(w))
	if err != nil {
		return 0, FileIdentity{}, err
	}
	found := identityOf(info, head)
	switch {
	case w.lost:
		return FileIdentityLost, found, nil
	case !w.id.sameFile(info):
		return FileReplaced, found, nil
	case len(head) < w.id.FingerprintLen:
		return FileTruncated, found, nil
	case found.Fingerprint != w.id.Fingerprint:
		return FileRewritten, found, nil
	}
	return 0, found, nil
}

// identity returns the identity of the open file as read so far.
func (s *LinesSource) identity() (FileIdentity, error) {
	info, err := s.f.Stat()
	if err != nil {
		return FileIdentity{}, err
	}
	return identityOf(info, s.head), nil
}

// keepIdentity saves the identity of the open file's generation before the
// batch of its lines is returned, when it was never saved or its
// fingerprint has grown since. On failure the batch's lines are given back:
// the source closes, and the next Read opens again at the batch's first
// line.
func (s *LinesSource) keepIdentity(ctx context.Context, batch []stream.Element[string]) error {
	if s.store == nil || s.gen == checkpoint.NoEpoch || len(batch) == 0 || len(s.head) <= s.savedLen {
		return nil
	}
	err := s.saveIdentity(ctx)
	if err == nil {
		return nil
	}
	s.next = batch[0].Offset
	_ = s.Close()
	return &FileError{Path: s.path, Err: fmt.Errorf("saving file identity: %w", err)}
}

// saveIdentity saves the identity of the open file under its generation,
// with every identity a saved position may still name: those from the
// generation of the store's position on (or, without one, from the lowest
// generation used since Resume).
func (s *LinesSource) saveIdentity(ctx context.Context) error {
	id, err := s.identity()
	if err != nil {
		return err
	}
	// Positions only move forward, so one saved later names the
	// generation of the store's position or a later one; without a
	// position, it names a generation used since Resume.
	floor := s.runGen
	if pos, found, err := s.store.Load(ctx, s.topic, 0); err != nil {
		return fmt.Errorf("loading checkpoint: %w", err)
	} else if found && pos.Epoch >= 0 {
		floor = pos.Epoch
	}
	cur := fileGeneration{Generation: s.gen, Base: s.base, Dev: id.Dev, Inode: id.Inode,
		FingerprintLen: id.FingerprintLen, Fingerprint: id.Fingerprint}
	gens := make([]fileGeneration, 0, len(s.gens)+1)
	for _, g := range s.gens {
		if g.Generation >= floor && g.Generation != s.gen {
			gens = append(gens, g)
		}
	}
	gens = append(gens, cur)
	if err := saveGenerations(ctx, s.store, s.topic, s.path, gens); err != nil {
		return err
	}
	s.gens, s.savedLen = gens, len(s.head)
	return nil
}
