package stream_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// identifiedSource is a slice source that reports a topic ID for its
// topic, as source.Partition does for a log topic.
type identifiedSource struct {
	*streamtest.SliceSource[int]
	id checkpoint.TopicID
}

func (s identifiedSource) TopicID(topic string, partition int32) checkpoint.TopicID {
	if topic != streamtest.Topic || partition != streamtest.Partition {
		return checkpoint.TopicID{}
	}
	return s.id
}

// TestRunSavesTheSourcesTopicIDWithEveryPosition ensures a pipeline whose
// source is a stream.TopicIdentifier saves the topic ID it reports with
// the partition's positions, and one whose source is not saves none.
func TestRunSavesTheSourcesTopicIDWithEveryPosition(t *testing.T) {
	id, err := checkpoint.ParseTopicID("ZtbcOJ8_SA-ji9PcQpfNBw")
	require.NoError(t, err)
	ctx := context.Background()
	values := []int{1, 2, 3, 4, 5}

	store := checkpoint.NewMemoryStore()
	src := identifiedSource{streamtest.Slice(values, streamtest.BatchSize(2)), id}
	require.NoError(t, stream.From[int](src).Checkpointing(store).Run(ctx))
	pos, found, err := store.Load(ctx, streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, checkpoint.Position{Offset: 5, Epoch: checkpoint.NoEpoch, TopicID: id}, pos)

	store = checkpoint.NewMemoryStore()
	require.NoError(t, stream.From[int](streamtest.Slice(values)).Checkpointing(store).Run(ctx))
	pos, _, err = store.Load(ctx, streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	assert.Equal(t, checkpoint.At(5), pos, "a source without topic IDs saves none")
}
