package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// followInterval is the poll interval of the follow tests: short, so a
// change is seen at once, and still a sleep between looks.
const followInterval = time.Millisecond

// followWakes are the two ways a waiting Read wakes: its own looks at the
// file (a 1 ms interval), and inotify alone (an interval of an hour, which
// no test waits out).
var followWakes = []struct {
	name     string
	interval time.Duration
}{
	{"poll", followInterval},
	{"inotify", time.Hour},
}

// appendLine appends s (lines, or part of one) to the file at path in one
// write, as a logger does.
func appendLine(t *testing.T, path, s string) {
	t.Helper()
	require.NoError(t, appendFile(path, s))
}

// followUntil reads src until it has returned n lines, each Read bounded by
// a deadline, and returns them.
func followUntil(t *testing.T, src *source.LinesSource, n int) []stream.Element[string] {
	t.Helper()
	var got []stream.Element[string]
	for len(got) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		batch, err := src.Read(ctx)
		cancel()
		require.NoError(t, err, "after %d of %d lines", len(got), n)
		got = append(got, batch...)
	}
	require.Len(t, got, n)
	return got
}

// offsetsAndEpochs returns the lineage offsets and epochs of elems.
func offsetsAndEpochs(elems []stream.Element[string]) (offs []int64, epochs []int32) {
	for _, e := range elems {
		offs = append(offs, e.Offset)
		epochs = append(epochs, e.Epoch)
	}
	return offs, epochs
}

// TestLinesFollowGrowingFileHoldsAPartialLineUntilItsNewline ensures a
// following source hands out appended lines as they arrive, never returns
// io.EOF, and holds an unterminated last line back until its '\n' comes.
func TestLinesFollowGrowingFileHoldsAPartialLineUntilItsNewline(t *testing.T) {
	for _, w := range followWakes {
		t.Run(w.name, func(t *testing.T) {
			path := writeFile(t, "grow.log", "a\n")
			src := source.Lines(path, source.Follow(), source.FollowInterval(w.interval))
			defer src.Close()
			require.Equal(t, []string{"a"}, values(followUntil(t, src, 1)))

			appendLine(t, path, "b\r\nc")
			require.Equal(t, []string{"b"}, values(followUntil(t, src, 1)))

			ctx, cancel := context.WithTimeout(context.Background(), 20*followInterval)
			defer cancel()
			batch, err := src.Read(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded, "the partial \"c\" is held back, and the end is no io.EOF")
			require.Empty(t, batch)

			appendLine(t, path, "d\n")
			got := followUntil(t, src, 1)
			require.Equal(t, []string{"cd"}, values(got))
			require.Equal(t, int64(2), got[0].Offset)
			require.Equal(t, int64(3), src.Position())
		})
	}
}

// TestLinesFollowRenameAndCreateFinishesTheOldFileThenReadsTheNewFromLine0
// ensures a rename-and-create rotation loses nothing: the lines written to
// the old file before it was renamed (an unterminated last one included)
// come first, then the new file from its first line, as a new generation
// whose offsets continue.
func TestLinesFollowRenameAndCreateFinishesTheOldFileThenReadsTheNewFromLine0(t *testing.T) {
	for _, w := range followWakes {
		t.Run(w.name, func(t *testing.T) {
			path := writeFile(t, "app.log", "1\n2\n")
			var changes []*source.FileChangedError
			src := source.Lines(path, source.Follow(), source.FollowInterval(w.interval),
				source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e) }))
			defer src.Close()
			require.NoError(t, src.Resume(context.Background(), &checkpoint.MemoryStore{}))
			require.Equal(t, []string{"1", "2"}, values(followUntil(t, src, 2)))

			appendLine(t, path, "3\n4") // the writer still has the old file open
			require.NoError(t, os.Rename(path, path+".1"))
			require.NoError(t, os.WriteFile(path, []byte("n1\nn2\n"), 0o600))

			got := followUntil(t, src, 4)
			require.Equal(t, []string{"3", "4", "n1", "n2"}, values(got))
			offs, epochs := offsetsAndEpochs(got)
			require.Equal(t, []int64{2, 3, 4, 5}, offs)
			require.Equal(t, []int32{0, 0, 1, 1}, epochs)
			require.Len(t, changes, 1)
			require.Equal(t, source.FileReplaced, changes[0].Change)
			require.Equal(t, int64(4), changes[0].Position)
		})
	}
}

// TestLinesFollowCopyTruncateStartsTheFileAgainFromLine0 ensures a
// copy-truncate rotation (the file cut to 0 and written again, whether the
// new content is shorter or longer than what was read) is read from its
// first line.
func TestLinesFollowCopyTruncateStartsTheFileAgainFromLine0(t *testing.T) {
	for _, c := range []struct {
		name    string
		written string
		lines   []string
		change  source.FileChange
	}{
		{"shorter than what was read", "x\n", []string{"x"}, source.FileTruncated},
		{"longer than what was read", "xxxxxxxx\nyy\n", []string{"xxxxxxxx", "yy"}, source.FileRewritten},
	} {
		for _, w := range followWakes {
			t.Run(c.name+"/"+w.name, func(t *testing.T) {
				path := writeFile(t, "app.log", "1\n2\n3\n")
				var changes []source.FileChange
				src := source.Lines(path, source.Follow(), source.FollowInterval(w.interval),
					source.OnFileChanged(func(e *source.FileChangedError) { changes = append(changes, e.Change) }))
				defer src.Close()
				require.NoError(t, src.Resume(context.Background(), &checkpoint.MemoryStore{}))
				require.Equal(t, []string{"1", "2", "3"}, values(followUntil(t, src, 3)))

				require.NoError(t, os.Truncate(path, 0))
				appendLine(t, path, c.written)
				got := followUntil(t, src, len(c.lines))
				require.Equal(t, c.lines, values(got))
				offs, epochs := offsetsAndEpochs(got)
				require.Equal(t, int64(3), offs[0], "offsets continue")
				require.Equal(t, int32(1), epochs[0], "a new generation")
				require.Equal(t, []source.FileChange{c.change}, changes)
			})
		}
	}
}

// TestLinesFollowPipelineFollowsARotationAndEndsOnCancel ensures the
// checkpointed pipeline over a following source handles lines as they are
// appended and across a rotation, returns promptly when its context is
// cancelled, and leaves a position that a resumed run finds nothing after.
func TestLinesFollowPipelineFollowsARotationAndEndsOnCancel(t *testing.T) {
	path := writeFile(t, "live.log", "")
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	src := source.Lines(path, source.Follow(), source.FollowInterval(followInterval), source.LinesFromStore(store))

	var mu sync.Mutex
	var handled []string
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- stream.From(src).
			Tap(func(_ context.Context, v string) error {
				mu.Lock()
				defer mu.Unlock()
				handled = append(handled, v)
				return nil
			}).
			Checkpointing(store, stream.CheckpointEachBatch()).
			Run(ctx)
	}()

	appendLine(t, path, "a\nb\n")
	require.Eventually(t, func() bool { return count() == 2 }, 2*time.Second, followInterval)
	require.NoError(t, os.Rename(path, path+".1"))
	appendLine(t, path, "c\n")
	require.Eventually(t, func() bool { return count() == 3 }, 2*time.Second, followInterval)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	require.Equal(t, []string{"a", "b", "c"}, handled)
	pos := savedPosition(t, store, "live.log")
	require.Equal(t, checkpoint.Position{Offset: 3, Epoch: 1}, pos, "the new file's generation")

	r := runLines(t, path, store, source.OnFileChange(source.FileChangeFail))
	require.NoError(t, r.err)
	require.Empty(t, r.handled)
}

// TestLinesFollowCancelEndsAWaitingRead ensures a Read waiting for lines
// returns ctx.Err(), bare, when its context is cancelled.
func TestLinesFollowCancelEndsAWaitingRead(t *testing.T) {
	path := writeFile(t, "idle.log", "")
	src := source.Lines(path, source.Follow(), source.FollowInterval(time.Hour))
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := src.Read(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		require.True(t, errors.Is(err, context.Canceled))
		require.Equal(t, context.Canceled, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Read did not return after cancel")
	}
}

// TestLinesFollowWaitingReadIsWokenByInotify ensures a Read already waiting,
// with an interval of an hour, is woken by inotify when the file grows or is
// rotated: the change is made only once the wait is about to block.
func TestLinesFollowWaitingReadIsWokenByInotify(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(path string) error
		want   []string
	}{
		{"append", func(path string) error { return appendFile(path, "b\n") }, []string{"b"}},
		{"rename and create", func(path string) error {
			if err := os.Rename(path, path+".1"); err != nil {
				return err
			}
			return appendFile(path, "n0\n")
		}, []string{"n0"}},
		{"copy-truncate", func(path string) error { return os.Truncate(path, 0) }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "app.log", "a\n")
			var changes atomic.Int32
			src := source.Lines(path, source.Follow(), source.FollowInterval(time.Hour),
				source.OnFileChanged(func(*source.FileChangedError) { changes.Add(1) }))
			defer src.Close()
			require.Equal(t, []string{"a"}, values(followUntil(t, src, 1)))

			var calls atomic.Int32
			changed := make(chan error, 1)
			defer source.SetWaitingHook(func() {
				if calls.Add(1) == 1 {
					changed <- c.change(path)
				}
			})()
			if c.want != nil {
				require.Equal(t, c.want, values(followUntil(t, src, len(c.want))))
				require.NoError(t, <-changed)
				require.Equal(t, int32(1), calls.Load(), "one wait, woken by inotify")
				return
			}
			// A truncation has no line to return: it is seen as a restart,
			// after which the Read waits again.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := src.Read(ctx)
				done <- err
			}()
			require.NoError(t, <-changed)
			require.Eventually(t, func() bool { return calls.Load() >= 2 }, 2*time.Second, time.Millisecond,
				"woken, restarted and waiting again")
			cancel()
			require.Equal(t, context.Canceled, <-done)
			require.Equal(t, int32(1), changes.Load())
		})
	}
}

// appendFile appends s to the file at path, creating it when missing.
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// TestLinesFollowKeepsOnlyTheIdentitiesAPositionCanName ensures the identity
// snapshot does not grow with every rotation: it keeps the generation of the
// saved position and the later ones.
func TestLinesFollowKeepsOnlyTheIdentitiesAPositionCanName(t *testing.T) {
	path := writeFile(t, "app.log", "a0\n")
	var store checkpoint.MemoryStore
	ctx := context.Background()
	src := source.Lines(path, source.Follow(), source.FollowInterval(followInterval))
	defer src.Close()
	require.NoError(t, src.Resume(ctx, &store))
	generations := func() []int32 {
		data, found, err := store.LoadState(ctx, "lines-identity.app.log")
		require.NoError(t, err)
		require.True(t, found)
		var snap struct {
			Files []struct {
				Generation int32 `json:"generation"`
			} `json:"files"`
		}
		require.NoError(t, json.Unmarshal(data, &snap))
		var gens []int32
		for _, f := range snap.Files {
			gens = append(gens, f.Generation)
		}
		return gens
	}

	for gen := range int32(4) {
		got := followUntil(t, src, 1)
		require.Equal(t, []string{fmt.Sprintf("a%d", gen)}, values(got))
		require.Equal(t, gen, got[0].Epoch)
		// What a pipeline would save once the line is handled.
		require.NoError(t, store.Save(ctx, "app.log", 0, checkpoint.Position{Offset: got[0].Offset + 1, Epoch: gen}))
		if gen > 0 {
			require.Equal(t, []int32{gen - 1, gen}, generations())
		}
		require.NoError(t, os.Rename(path, path+".old"))
		appendLine(t, path, fmt.Sprintf("a%d\n", gen+1))
	}
}

// TestLinesFollowLosesNoLineOfAWriterRotatingByRename ensures a follower
// keeps up with a writer that appends and rotates by rename-and-create
// while the follower reads: every line comes exactly once, in order, with
// dense offsets. As with tail -F, a file renamed away before the follower
// reached it would be missed, so the writer rotates a file only once the
// follower has begun it.
func TestLinesFollowLosesNoLineOfAWriterRotatingByRename(t *testing.T) {
	const lines, perFile = 2000, 200
	path := filepath.Join(t.TempDir(), "busy.log")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	src := source.Lines(path, source.Follow(), source.FollowInterval(followInterval), source.MaxLines(64))
	defer src.Close()

	var mu sync.Mutex
	progress := sync.NewCond(&mu)
	read, stopped := 0, false // lines the follower has returned; the test ended
	defer func() {
		mu.Lock()
		stopped = true
		progress.Broadcast()
		mu.Unlock()
	}()
	begun := func(line int) bool { // waits until the follower returned line
		mu.Lock()
		defer mu.Unlock()
		for read <= line && !stopped {
			progress.Wait()
		}
		return !stopped
	}

	written := make(chan error, 1)
	go func() {
		written <- func() error {
			for i := range lines {
				if i > 0 && i%perFile == 0 {
					if !begun(i - perFile) {
						return nil
					}
					if err := os.Rename(path, fmt.Sprintf("%s.%d", path, i/perFile)); err != nil {
						return err
					}
				}
				// Half a line, then the rest: the follower may see either.
				if err := appendFile(path, fmt.Sprintf("line-%d", i)); err != nil {
					return err
				}
				if err := appendFile(path, "\n"); err != nil {
					return err
				}
			}
			return nil
		}()
	}()

	var got []stream.Element[string]
	for len(got) < lines {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		batch, err := src.Read(ctx)
		cancel()
		require.NoError(t, err, "after %d lines", len(got))
		got = append(got, batch...)
		mu.Lock()
		read = len(got)
		progress.Broadcast()
		mu.Unlock()
	}
	require.NoError(t, <-written)
	require.Len(t, got, lines)
	for i, e := range got {
		require.Equal(t, fmt.Sprintf("line-%d", i), e.Value)
		require.Equal(t, int64(i), e.Offset)
	}
}
