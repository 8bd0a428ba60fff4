package sink_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/sink"
)

// TestFuncPassesBatchesAndReturnsTheFuncsError ensures Func hands each
// non-empty batch to the function and returns its error unchanged.
func TestFuncPassesBatchesAndReturnsTheFuncsError(t *testing.T) {
	var got [][]int
	boom := errors.New("boom")
	s := sink.Func(func(_ context.Context, vs []int) error {
		got = append(got, append([]int(nil), vs...))
		if vs[0] < 0 {
			return boom
		}
		return nil
	})
	require.NoError(t, s.Write(context.Background(), []int{1, 2}))
	require.NoError(t, s.Write(context.Background(), nil))
	require.Equal(t, boom, s.Write(context.Background(), []int{-1}))
	require.Equal(t, [][]int{{1, 2}, {-1}}, got)

	require.ErrorIs(t, sink.Func[int](nil).Write(context.Background(), []int{1}), sink.ErrNilFunc)
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	calls int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.calls++
	return w.Buffer.Write(p)
}

// TestLinesWritesEachValueAndNewlineInOneWritePerBatch ensures the line sink
// adds '\n' after every value and calls Write once per non-empty batch.
func TestLinesWritesEachValueAndNewlineInOneWritePerBatch(t *testing.T) {
	var w countingWriter
	s := sink.Lines(&w)
	require.NoError(t, s.Write(context.Background(), []string{"a", "", "b c "}))
	require.NoError(t, s.Write(context.Background(), nil))
	require.NoError(t, s.Write(context.Background(), []string{"d"}))
	require.Equal(t, "a\n\nb c \nd\n", w.String())
	require.Equal(t, 2, w.calls)
}

// shortWriter accepts at most n bytes per call and reports no error.
type shortWriter struct{ n int }

func (w shortWriter) Write(p []byte) (int, error) { return min(len(p), w.n), nil }

// failingWriter fails every write.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestLinesReportsShortAndFailedWrites ensures a short write is
// io.ErrShortWrite and a writer's error is wrapped, both naming the sink.
func TestLinesReportsShortAndFailedWrites(t *testing.T) {
	err := sink.Lines(shortWriter{n: 2}).Write(context.Background(), []string{"abc"})
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.Contains(t, err.Error(), "sink: lines: wrote 2 of 4 bytes")

	cause := errors.New("pipe closed")
	err = sink.Lines(failingWriter{err: cause}).Write(context.Background(), []string{"abc"})
	require.ErrorIs(t, err, cause)

	require.ErrorIs(t, sink.Lines(nil).Write(context.Background(), []string{"x"}), sink.ErrNilWriter)
}
