package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// createTopic creates topic with n partitions in lg.
func createTopic(t *testing.T, lg *log.Log, topic string, n int) *log.Topic {
	t.Helper()
	tp, err := lg.CreateTopic(topic, n)
	require.NoError(t, err)
	return tp
}

// value is the value of the record test code appends at offset i.
func value(i int64) string { return fmt.Sprintf("value-%04d", i) }

// appendRange appends records with values value(from) .. value(to-1) to
// partition 0 of topic, checking they land at offsets from .. to-1.
func appendRange(t *testing.T, lg *log.Log, topic string, from, to int64) {
	t.Helper()
	tp, err := lg.Topic(topic)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	recs := make([]log.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, log.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(value(i))})
	}
	first, err := p.Append(context.Background(), recs...)
	require.NoError(t, err)
	require.Equal(t, from, first, "records must land at the offsets the test expects")
}

// readUntilEOF reads src until io.EOF and returns every element.
func readUntilEOF[T any](t *testing.T, src stream.Source[T]) []stream.Element[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var all []stream.Element[T]
	for {
		batch, err := src.Read(ctx)
		if errors.Is(err, io.EOF) {
			require.Empty(t, batch, "io.EOF comes without a batch")
			return all
		}
		require.NoError(t, err)
		all = append(all, batch...)
	}
}

// requireOffsets checks that elems are the records at offsets from .. to-1 of
// partition 0 of topic, in order, with matching lineage and values.
func requireOffsets(t *testing.T, elems []stream.Element[log.Record], topic string, from, to int64) {
	t.Helper()
	require.Len(t, elems, int(to-from))
	for i, e := range elems {
		off := from + int64(i)
		require.Equal(t, topic, e.Topic, "lineage topic at %d", off)
		require.Equal(t, int32(0), e.Partition, "lineage partition at %d", off)
		require.Equal(t, off, e.Offset, "lineage offset")
		require.Equal(t, off, e.Value.Offset, "record offset")
		require.Equal(t, topic, e.Value.Topic)
		require.Equal(t, value(off), string(e.Value.Value))
	}
}
