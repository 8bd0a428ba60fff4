package source_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// expectedLines splits data the way the source documents: on '\n', one '\r'
// before it stripped, no line after a final '\n'.
func expectedLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	parts := strings.Split(string(data), "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		parts[i] = strings.TrimSuffix(p, "\r")
	}
	return parts
}

// values returns the values of elems.
func values[T any](elems []stream.Element[T]) []T {
	out := make([]T, len(elems))
	for i, e := range elems {
		out[i] = e.Value
	}
	return out
}

// writeFile writes content to a file named name in a fresh directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestLinesLoghubFilesYieldExactly2000LinesEach ensures every real sample,
// CRLF with or without a final terminator, gives exactly its 2,000 lines, the
// text of each equal to the file split on '\n' with the '\r' stripped, with
// lineage topic = file name, partition 0, offset = line index.
func TestLinesLoghubFilesYieldExactly2000LinesEach(t *testing.T) {
	loghubDir := loghub.Dir(t)
	for _, name := range loghub.Files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(loghubDir, name)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			want := expectedLines(data)
			require.Len(t, want, 2000)

			elems := readUntilEOF[string](t, source.Lines(path))
			require.Len(t, elems, 2000)
			require.Equal(t, want, values(elems))
			for i, e := range elems {
				require.Equal(t, name, e.Topic)
				require.Equal(t, int32(0), e.Partition)
				require.Equal(t, int64(i), e.Offset)
				require.NotContains(t, e.Value, "\r")
				require.NotContains(t, e.Value, "\n")
			}
		})
	}
}

// TestLinesStripsOnlyTheTerminator ensures '\n' and one '\r' before it are
// stripped and every other byte (trailing spaces, a second '\r', empty lines)
// is kept, and that the end of the file is handled as documented.
func TestLinesStripsOnlyTheTerminator(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"empty file", "", nil},
		{"one empty line", "\n", []string{""}},
		{"final newline adds no line", "a\nb\n", []string{"a", "b"}},
		{"last line without terminator", "a\nb", []string{"a", "b"}},
		{"trailing spaces kept", "a  \r\n b \n", []string{"a  ", " b "}},
		{"only one CR stripped", "a\r\r\n\r\n", []string{"a\r", ""}},
		{"CR inside a line kept", "a\rb\r\n", []string{"a\rb"}},
		{"empty lines kept", "\n\r\n\nx", []string{"", "", "", "x"}},
		{"unterminated last line loses its CR", "a\r\nb\r", []string{"a", "b"}},
		{"bytes kept as they are", "\x00\xff é\r\n", []string{"\x00\xff é"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "f.txt", c.content)
			got := values(readUntilEOF[string](t, source.Lines(path)))
			if c.want == nil {
				require.Empty(t, got)
			} else {
				require.Equal(t, c.want, got)
			}
			require.Equal(t, c.want, expectedLines([]byte(c.content)), "the test's own splitter agrees")
		})
	}
}

// TestLinesKeepCRKeepsOnlyTheLineEndingsCR ensures KeepCR strips the '\n'
// alone: the '\r' of a CRLF ending (on the last, unterminated line too) is
// kept, as strom produce --keep-cr keeps it.
func TestLinesKeepCRKeepsOnlyTheLineEndingsCR(t *testing.T) {
	path := writeFile(t, "f.txt", "a \r\nb\rc\r\r\n\r\nd\ne\r")
	got := values(readUntilEOF[string](t, source.Lines(path, source.KeepCR())))
	require.Equal(t, []string{"a \r", "b\rc\r\r", "\r", "d", "e\r"}, got)
}

// TestLinesReadsLinesOfAnyLength ensures there is no line-length limit (a
// bufio.Scanner would stop at 64 KiB).
func TestLinesReadsLinesOfAnyLength(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	path := writeFile(t, "long.txt", "short\r\n"+long+"\r\nend")
	got := values(readUntilEOF[string](t, source.Lines(path)))
	require.Len(t, got, 3)
	require.Equal(t, "short", got[0])
	require.Equal(t, len(long), len(got[1]))
	require.Equal(t, long, got[1])
	require.Equal(t, "end", got[2])
}

// TestLinesBatchesHoldAtMostMaxLines ensures batches are full until the last
// one, at the default of 500 lines and with MaxLines.
func TestLinesBatchesHoldAtMostMaxLines(t *testing.T) {
	path := writeFile(t, "n.txt", strings.Repeat("line\n", 1200))
	for _, c := range []struct {
		opts []source.LinesOption
		want []int
	}{
		{nil, []int{500, 500, 200}},
		{[]source.LinesOption{source.MaxLines(7)}, append(repeatInt(7, 171), 3)},
		{[]source.LinesOption{source.MaxLines(0)}, []int{500, 500, 200}},
	} {
		src := source.Lines(path, c.opts...)
		var sizes []int
		for {
			batch, err := src.Read(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			sizes = append(sizes, len(batch))
		}
		require.Equal(t, c.want, sizes)
		require.Equal(t, int64(1200), src.Position())
		_, err := src.Read(context.Background())
		require.Equal(t, io.EOF, err, "io.EOF repeats, bare")
		require.NoError(t, src.Close())
	}
}

// repeatInt returns n copies of v.
func repeatInt(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestLinesResumeSkipsLinesBelowTheStoredPosition ensures a resumed line
// source starts at the saved line index, and at the first line without one.
func TestLinesResumeSkipsLinesBelowTheStoredPosition(t *testing.T) {
	path := filepath.Join(loghub.Dir(t), "OpenSSH_2k.log")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := expectedLines(data)

	src := source.Lines(path, source.MaxLines(300))
	first, err := src.Read(context.Background())
	require.NoError(t, err)
	require.Len(t, first, 300)

	var store checkpoint.MemoryStore
	require.NoError(t, store.Save(context.Background(), "OpenSSH_2k.log", 0, checkpoint.At(1500)))
	require.NoError(t, src.Resume(context.Background(), &store))
	rest := readUntilEOF[string](t, src)
	require.Len(t, rest, 500)
	require.Equal(t, int64(1500), rest[0].Offset)
	require.Equal(t, want[1500:], values(rest))

	require.NoError(t, src.Resume(context.Background(), &checkpoint.MemoryStore{}))
	require.Len(t, readUntilEOF[string](t, src), 2000)

	require.NoError(t, store.Save(context.Background(), "OpenSSH_2k.log", 0, checkpoint.At(2000)))
	require.NoError(t, src.Resume(context.Background(), &store))
	require.Empty(t, readUntilEOF[string](t, src), "everything was handled")
}

// TestLinesResumeWithCorruptStoreFailsWithErrCorrupt ensures a broken
// checkpoint stops a line source instead of restarting it at line 0.
func TestLinesResumeWithCorruptStoreFailsWithErrCorrupt(t *testing.T) {
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	p, err := store.Path("f.txt", 0)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, make([]byte, 16), 0o600))

	src := source.Lines(writeFile(t, "f.txt", "a\nb\n"))
	err = src.Resume(context.Background(), store)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	var fe *source.FileError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, src.Resume(context.Background(), nil), source.ErrNilStore)
}

// TestLinesCloseThenReadContinues ensures Close keeps the position: the next
// Read reopens the file and returns the next line.
func TestLinesCloseThenReadContinues(t *testing.T) {
	path := writeFile(t, "f.txt", "0\n1\n2\n3\n4\n")
	src := source.Lines(path, source.MaxLines(2))
	var got []string
	for {
		batch, err := src.Read(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, values(batch)...)
		require.NoError(t, src.Close())
	}
	require.Equal(t, []string{"0", "1", "2", "3", "4"}, got)
}

// TestLinesTopicIsALegalTopicName ensures the default lineage topic is the
// file name made legal, and that an illegal LinesTopic is refused.
func TestLinesTopicIsALegalTopicName(t *testing.T) {
	require.Equal(t, "auth_log.txt", source.Lines("/var/log/auth log.txt").Topic())
	require.Equal(t, "a_b_c", source.Lines("a:b@c").Topic())
	require.Equal(t, "lines", source.Lines("").Topic())
	require.Equal(t, "_", source.Lines("/").Topic())
	require.Len(t, source.Lines(strings.Repeat("n", 300)).Topic(), 249)
	require.Equal(t, "custom", source.Lines("x.log", source.LinesTopic("custom")).Topic())

	src := source.Lines(writeFile(t, "f.txt", "a\n"), source.LinesTopic("bad/name"))
	_, err := src.Read(context.Background())
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	require.ErrorIs(t, src.Resume(context.Background(), &checkpoint.MemoryStore{}), log.ErrInvalidTopic)
}

// TestLinesMissingFileFailsWithFileError ensures a file that cannot be opened
// is an error naming it.
func TestLinesMissingFileFailsWithFileError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.log")
	_, err := source.Lines(path).Read(context.Background())
	require.ErrorIs(t, err, fs.ErrNotExist)
	var fe *source.FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, path, fe.Path)
	require.True(t, strings.HasPrefix(err.Error(), "source: file "+path+": "))
}

// TestLinesCancelledContextReturnsCtxErr ensures a done context is returned
// bare, not wrapped.
func TestLinesCancelledContextReturnsCtxErr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := source.Lines(writeFile(t, "f.txt", "a\n")).Read(ctx)
	require.Equal(t, context.Canceled, err)
}

// TestLinesReadErrorIsAFileErrorNamingTheLine ensures a read that fails (here
// on a directory, which opens but cannot be read) is an error naming the file
// and the line, not io.EOF.
func TestLinesReadErrorIsAFileErrorNamingTheLine(t *testing.T) {
	dir := t.TempDir()
	_, err := source.Lines(dir).Read(context.Background())
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF)
	var fe *source.FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, dir, fe.Path)
	require.Contains(t, err.Error(), "reading line 0: ")
}
