package source_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// numbered returns n lines "<prefix>0\n" ... "<prefix>n-1\n" and their text.
func numbered(prefix string, n int) (string, []string) {
	var b strings.Builder
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%s%d", prefix, i)
		b.WriteString(want[i] + "\n")
	}
	return b.String(), want
}

// linesRun is one checkpointed pipeline run over a file: what it handled
// and what it returned.
type linesRun struct {
	handled []string
	err     error
}

// runLines resumes a line source over path from store and runs the
// design's pipeline, stream.From(src)...Checkpointing(store).Run, to the end
// of the file.
func runLines(t *testing.T, path string, store *checkpoint.FileStore, opts ...source.LinesOption) linesRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src := source.Lines(path, opts...)
	require.NoError(t, src.Resume(ctx, store))
	var r linesRun
	var mu sync.Mutex
	r.err = stream.From(src).
		Tap(func(_ context.Context, v string) error {
			mu.Lock()
			defer mu.Unlock()
			r.handled = append(r.handled, v)
			return nil
		}).
		Checkpointing(store).
		Run(ctx)
	return r
}

// savedPosition returns the position store holds for topic.
func savedPosition(t *testing.T, store checkpoint.Store, topic string) checkpoint.Position {
	t.Helper()
	pos, found, err := store.Load(context.Background(), topic, 0)
	require.NoError(t, err)
	require.True(t, found)
	return pos
}

// handledTenLines writes a 10-line file f.txt, runs the pipeline over it once
// and returns its path and the FileStore, checking all 10 were handled.
func handledTenLines(t *testing.T) (string, *checkpoint.FileStore) {
	t.Helper()
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	content, want := numbered("old-", 10)
	path := writeFile(t, "f.txt", content)
	r := runLines(t, path, store)
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
	require.Equal(t, int64(10), savedPosition(t, store, "f.txt").Offset)
	return path, store
}

// replaceFile puts a new file with content at path: written aside, renamed
// over it, so the path names another inode.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestLinesFileRewrittenInPlaceWith3LinesHandlesAll3 is the first bug of
// issue 11: a 10-line file handled to position 10, then rewritten in place
// (same inode) with 3 new lines, had nothing handled on resume.
func TestLinesFileRewrittenInPlaceWith3LinesHandlesAll3(t *testing.T) {
	path, store := handledTenLines(t)
	before, err := os.Stat(path)
	require.NoError(t, err)
	content, want := numbered("new-", 3)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after), "rewritten in place: same inode")

	var changes []source.FileChange
	r := runLines(t, path, store, source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e.Change) }))
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
	require.Equal(t, []source.FileChange{source.FileTruncated}, changes, "3 lines are shorter than the 10 fingerprinted")
	require.Equal(t, int64(13), savedPosition(t, store, "f.txt").Offset, "offsets go on above 10, never back")

	again := runLines(t, path, store)
	require.NoError(t, again.err)
	require.Empty(t, again.handled, "the rewritten file is now the one checkpointed")
}

// TestLinesFileRewrittenInPlaceWithOtherFirstBytesIsRewritten ensures a file
// rewritten in place, as long as before but with other bytes, is found by
// its fingerprint and read from its first line.
func TestLinesFileRewrittenInPlaceWithOtherFirstBytesIsRewritten(t *testing.T) {
	path, store := handledTenLines(t)
	content, want := numbered("OLD-", 12) // same length per line, other bytes
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))

	var changes []source.FileChange
	r := runLines(t, path, store, source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e.Change) }))
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
	require.Equal(t, []source.FileChange{source.FileRewritten}, changes)
}

// TestLinesFileReplacedBy12LinesHandlesAll12 is the second bug of issue 11:
// a handled 10-line file replaced by a new 12-line file had only lines 10
// and 11 handled, 0 to 9 skipped silently.
func TestLinesFileReplacedBy12LinesHandlesAll12(t *testing.T) {
	path, store := handledTenLines(t)
	content, want := numbered("new-", 12)
	replaceFile(t, path, content)

	var changes []source.FileChange
	r := runLines(t, path, store, source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e.Change) }))
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
	require.Equal(t, []source.FileChange{source.FileReplaced}, changes)
	require.Equal(t, int64(22), savedPosition(t, store, "f.txt").Offset)
}

// TestLinesFileChangeFailNamesTheFileAndTheSavedIdentity ensures that under
// FileChangeFail a replaced or rewritten file stops the pipeline with a
// *FileChangedError (errors.As) matching ErrFileChanged (errors.Is) that
// names the path, the saved identity and the change, handles nothing and
// leaves the saved position alone.
func TestLinesFileChangeFailNamesTheFileAndTheSavedIdentity(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   source.FileChange
	}{
		{"replaced", func(t *testing.T, path string) {
			content, _ := numbered("new-", 12)
			replaceFile(t, path, content)
		}, source.FileReplaced},
		{"rewritten", func(t *testing.T, path string) {
			content, _ := numbered("OLD-", 10)
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		}, source.FileRewritten},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, store := handledTenLines(t)
			info, err := os.Stat(path)
			require.NoError(t, err)
			c.change(t, path)

			r := runLines(t, path, store, source.OnFileChange(source.FileChangeFail))
			require.Error(t, r.err)
			require.Empty(t, r.handled)
			require.ErrorIs(t, r.err, source.ErrFileChanged)
			require.ErrorIs(t, r.err, stream.ErrPermanent, "restarting cannot cure it")
			var ce *source.FileChangedError
			require.ErrorAs(t, r.err, &ce)
			require.Equal(t, path, ce.Path)
			require.Equal(t, c.want, ce.Change)
			require.Equal(t, int64(10), ce.Position)
			require.Equal(t, int64(10), ce.Line)
			_, ino := devInodeOf(t, info)
			require.Equal(t, ino, ce.Saved.Inode)
			require.Equal(t, len(strings.Repeat("old-0\n", 10)), ce.Saved.FingerprintLen)
			require.Contains(t, r.err.Error(), path)
			require.Contains(t, r.err.Error(), c.want.String())
			require.Contains(t, r.err.Error(), ce.Saved.String())
			require.Equal(t, int64(10), savedPosition(t, store, "f.txt").Offset)
		})
	}
}

// devInodeOf returns the device and inode of info, as FileIdentity holds
// them.
func devInodeOf(t *testing.T, info os.FileInfo) (uint64, uint64) {
	t.Helper()
	id := source.IdentityOf(info)
	return id.Dev, id.Inode
}

// TestLinesTruncatedFileStartsAgainFromTheFirstLine ensures a file cut
// below the saved position (shorter than its fingerprint, or with its first
// KiB intact but fewer lines) is read from its first line.
func TestLinesTruncatedFileStartsAgainFromTheFirstLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines int // lines handled first, then the file is cut to 4
	}{
		{"shorter than the fingerprint", 10},
		{"fewer lines than the position", 400}, // 400 lines: well past 1 KiB
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := checkpoint.NewFileStore(t.TempDir())
			require.NoError(t, err)
			content, want := numbered("line-", c.lines)
			path := writeFile(t, "f.txt", content)
			require.NoError(t, runLines(t, path, store).err)

			cut, _ := numbered("line-", 300)
			if c.lines < 300 {
				cut, _ = numbered("line-", 4)
			}
			require.NoError(t, os.Truncate(path, int64(len(cut))))
			var changes []source.FileChange
			r := runLines(t, path, store, source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e.Change) }))
			require.NoError(t, r.err)
			require.Equal(t, want[:len(expectedLines([]byte(cut)))], r.handled)
			require.Equal(t, []source.FileChange{source.FileTruncated}, changes)
		})
	}
}

// TestLinesGrownFileResumesAfterTheLastHandledLine ensures the identity check
// lets an unchanged file through: lines appended to a handled file are the
// only ones handled on resume.
func TestLinesGrownFileResumesAfterTheLastHandledLine(t *testing.T) {
	path, store := handledTenLines(t)
	more, want := numbered("more-", 5)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(more)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := runLines(t, path, store, source.OnFileChange(source.FileChangeFail))
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
	require.Equal(t, int64(15), savedPosition(t, store, "f.txt").Offset)
}

// TestLinesLostIdentityStartsAgainFromTheFirstLine ensures a position whose
// identity snapshot was deleted is not trusted: the file is read again.
func TestLinesLostIdentityStartsAgainFromTheFirstLine(t *testing.T) {
	path, store := handledTenLines(t)
	state, err := store.StatePath("lines-identity.f.txt")
	require.NoError(t, err)
	require.NoError(t, os.Remove(state))

	r := runLines(t, path, store, source.OnFileChange(source.FileChangeFail))
	require.ErrorIs(t, r.err, source.ErrFileChanged)
	var ce *source.FileChangedError
	require.ErrorAs(t, r.err, &ce)
	require.Equal(t, source.FileIdentityLost, ce.Change)

	r = runLines(t, path, store)
	require.NoError(t, r.err)
	require.Len(t, r.handled, 10)
}

// TestLinesFromStoreKeepsTheIdentityOfAFirstRun ensures LinesFromStore gives
// a first run, which calls no Resume, its store: the file's identity is kept
// from the first line, so a replacement is found on the next run.
func TestLinesFromStoreKeepsTheIdentityOfAFirstRun(t *testing.T) {
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	content, _ := numbered("old-", 10)
	path := writeFile(t, "f.txt", content)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	count := 0
	err = stream.From(source.Lines(path, source.LinesFromStore(store))).
		Tap(func(context.Context, string) error { count++; return nil }).
		Checkpointing(store).
		Run(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, count)
	require.Equal(t, int32(0), savedPosition(t, store, "f.txt").Epoch, "generation 0")

	content, want := numbered("new-", 12)
	replaceFile(t, path, content)
	r := runLines(t, path, store)
	require.NoError(t, r.err)
	require.Equal(t, want, r.handled)
}

// TestLinesCorruptIdentitySnapshotFailsResume ensures a damaged identity
// snapshot is an error, never an unchecked resume.
func TestLinesCorruptIdentitySnapshotFailsResume(t *testing.T) {
	path, store := handledTenLines(t)
	require.NoError(t, store.SaveState(context.Background(), "lines-identity.f.txt", []byte("{not json")))
	err := source.Lines(path).Resume(context.Background(), store)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	var fe *source.FileError
	require.ErrorAs(t, err, &fe)
}

// TestLinesPositionWithoutIdentityPastTheEndIsTruncated ensures a position
// saved without an identity (by hand, NoEpoch) is still checked against the
// file's length: a file with fewer lines is read from its first line, or,
// under FileChangeFail, is an error saying the position had no identity.
func TestLinesPositionWithoutIdentityPastTheEndIsTruncated(t *testing.T) {
	path := writeFile(t, "f.txt", "a\nb\nc\n")
	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "f.txt", 0, checkpoint.At(5)))

	src := source.Lines(path, source.OnFileChange(source.FileChangeFail))
	require.NoError(t, src.Resume(context.Background(), &store))
	_, err := src.Read(context.Background())
	var ce *source.FileChangedError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, source.FileTruncated, ce.Change)
	require.Equal(t, source.FileIdentity{}, ce.Saved)
	require.Contains(t, err.Error(), "without an identity")

	src = source.Lines(path)
	require.NoError(t, src.Resume(context.Background(), &store))
	got := readUntilEOF[string](t, src)
	require.Equal(t, []string{"a", "b", "c"}, values(got))
	require.Equal(t, int64(5), got[0].Offset, "offsets go on above the position")
}

// TestLinesConsumeForeverReturnsAFileChangeAtOnce ensures ConsumeForever,
// which resumes the source itself, keeps the file's identity and, under
// FileChangeFail, returns the change at once instead of retrying it.
func TestLinesConsumeForeverReturnsAFileChangeAtOnce(t *testing.T) {
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	content, _ := numbered("old-", 10)
	path := writeFile(t, "f.txt", content)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	handled := 0
	handle := func(context.Context, string) error { handled++; return nil }
	require.NoError(t, stream.ConsumeForever(ctx, source.Lines(path), store, handle))
	require.Equal(t, 10, handled)

	content, _ = numbered("new-", 12)
	replaceFile(t, path, content)
	retries := 0
	err = stream.ConsumeForever(ctx, source.Lines(path, source.OnFileChange(source.FileChangeFail)), store, handle,
		stream.OnSourceError(func(error, int) { retries++ }))
	require.ErrorIs(t, err, source.ErrFileChanged)
	require.Equal(t, 10, handled)
	require.Zero(t, retries, "not retried: restarting cannot cure it")

	require.NoError(t, stream.ConsumeForever(ctx, source.Lines(path), store, handle))
	require.Equal(t, 22, handled)
}
