package sink

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// TestKafkaPositionValueKeepsTheTopicID ensures a position with a topic ID
// is written as a version 2 value of 29 bytes and decodes back with it,
// that one without is still the 13-byte version 1 value, and that values
// of neither form are refused.
func TestKafkaPositionValueKeepsTheTopicID(t *testing.T) {
	id, err := checkpoint.ParseTopicID("ZtbcOJ8_SA-ji9PcQpfNBw")
	require.NoError(t, err)
	for _, p := range []checkpoint.Position{{Offset: 42, Epoch: 3, TopicID: id}, {Offset: 7, Epoch: checkpoint.NoEpoch}} {
		v := encodePosition(p)
		want := byte(1)
		if !p.TopicID.IsZero() {
			want = 2
		}
		assert.Equal(t, want, v[0], "version of %v", p)
		got, err := decodePosition(v)
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	v2 := encodePosition(checkpoint.Position{Offset: 42, Epoch: 3, TopicID: id})
	for _, bad := range [][]byte{
		v2[:13],
		append([]byte{1}, v2[1:]...),
		append(append([]byte{}, v2[:13]...), make([]byte, 16)...),
		append([]byte{3}, v2[1:]...),
	} {
		_, err := decodePosition(bad)
		assert.Error(t, err, "%x", bad)
	}
}
