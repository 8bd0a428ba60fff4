package checkpoint_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// testTopicID is a topic ID as the log draws them.
var testTopicID = mustParseTopicID("ZtbcOJ8_SA-ji9PcQpfNBw")

func mustParseTopicID(s string) checkpoint.TopicID {
	id, err := checkpoint.ParseTopicID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// TestFileStoreSavesTheTopicIDAsVersion2 ensures a position with a topic ID
// is written as a version 2 file carrying it, and loads back whole; and
// that one without is still written as version 1, the format of versions
// before topic IDs.
func TestFileStoreSavesTheTopicIDAsVersion2(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	want := checkpoint.Position{Offset: 95, Epoch: 3, TopicID: testTopicID}
	require.NoError(t, s.Save(ctx, "events", 0, want))
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"version":2,"topic":"events","partition":0,"position":95,"epoch":3,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`+"\n", string(b))
	got, found, err := s.Load(ctx, "events", 0)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, want, got)
	assert.Equal(t, "offset 95 (epoch 3) of topic ID ZtbcOJ8_SA-ji9PcQpfNBw", got.String())

	require.NoError(t, s.SaveBatch(ctx, []checkpoint.TopicPosition{{Topic: "events", Partition: 0, Position: checkpoint.Position{Offset: 96, Epoch: 3}}, {Topic: "events", Partition: 1, Position: want}}))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"version":1,"topic":"events","partition":0,"position":96,"epoch":3}`+"\n", string(b), "no topic ID: version 1")
	got, _, err = s.Load(ctx, "events", 1)
	require.NoError(t, err)
	assert.Equal(t, want, got, "SaveBatch keeps the topic ID too")
}

// TestFileStoreLoadsVersion1FilesAsPositionsWithoutTopicID ensures a
// position file of a version before topic IDs (with or without an epoch)
// still loads, with the zero topic ID: unknown.
func TestFileStoreLoadsVersion1FilesAsPositionsWithoutTopicID(t *testing.T) {
	s := newFileStore(t)
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	for content, want := range map[string]checkpoint.Position{
		`{"version":1,"topic":"events","partition":0,"position":41,"epoch":2}`: {Offset: 41, Epoch: 2},
		`{"version":1,"topic":"events","partition":0,"position":41}`:           checkpoint.At(41),
	} {
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
		got, found, err := s.Load(context.Background(), "events", 0)
		require.NoError(t, err, content)
		require.True(t, found)
		assert.Equal(t, want, got, content)
		assert.True(t, got.TopicID.IsZero())
	}
}

// TestFileStoreRejectsTopicIDsSaveDidNotWrite ensures a topic ID in a
// version 1 file, a version 2 file without one (or without an epoch), an
// empty or malformed ID, and an unknown version are corruption naming
// what is wrong.
func TestFileStoreRejectsTopicIDsSaveDidNotWrite(t *testing.T) {
	s := newFileStore(t)
	path, err := s.Path("events", 0)
	require.NoError(t, err)
	for content, want := range map[string]string{
		`{"version":1,"topic":"events","partition":0,"position":5,"epoch":0,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`: `field "topicId" in a version 1 file`,
		`{"version":2,"topic":"events","partition":0,"position":5,"epoch":0}`:                                    `missing field "topicId"`,
		`{"version":2,"topic":"events","partition":0,"position":5,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`:           `missing field "epoch"`,
		`{"version":2,"topic":"events","partition":0,"position":5,"epoch":0,"topicId":""}`:                       `empty "topicId"`,
		`{"version":2,"topic":"events","partition":0,"position":5,"epoch":0,"topicId":"ZtbcOJ8"}`:                `topic ID "ZtbcOJ8"`,
		`{"version":2,"topic":"events","partition":0,"position":5,"epoch":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}`: `all zero bytes`,
		`{"version":3,"topic":"events","partition":0,"position":5,"epoch":0,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`: `version 3, want 1 or 2`,
		`{"version":2,"topic":"events","partition":0,"position":5,"epoch":0,"topicid":"ZtbcOJ8_SA-ji9PcQpfNBw"}`: `not in the form Save writes`,
	} {
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
		_, _, err := s.Load(context.Background(), "events", 0)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, content)
		assert.Contains(t, err.Error(), want, content)
		assert.Contains(t, err.Error(), path)
	}
}

// TestTrackerPositionCarriesTheTopicID ensures the topic ID set on a
// partition tracker comes back with every position it gives, and a
// MemoryStore keeps it.
func TestTrackerPositionCarriesTheTopicID(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("events", 0)
	begin(t, p, 0, 1)
	p.Done(0, 1)
	pos, ok := p.Position()
	require.True(t, ok)
	assert.True(t, pos.TopicID.IsZero(), "unknown until set")
	p.SetTopicID(testTopicID)
	pos, ok = p.Position()
	require.True(t, ok)
	assert.Equal(t, checkpoint.Position{Offset: 2, Epoch: checkpoint.NoEpoch, TopicID: testTopicID}, pos)

	ms := checkpoint.NewMemoryStore()
	require.NoError(t, ms.Save(context.Background(), "events", 0, pos))
	got, _, err := ms.Load(context.Background(), "events", 0)
	require.NoError(t, err)
	assert.Equal(t, pos, got)
}
