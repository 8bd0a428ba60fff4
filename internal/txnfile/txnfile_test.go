package txnfile

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// sampleTxn is a transaction with every field in use.
func sampleTxn() *Record {
	return &Record{
		Seq:  42,
		Ends: []int64{0, 17, 1 << 40},
		Positions: map[TP]checkpoint.Position{
			{"in", 0}:        {Offset: 5, Epoch: checkpoint.NoEpoch},
			{"in", 3}:        {Offset: 1 << 33, Epoch: 7},
			{"other.t_-", 1}: {Offset: 0, Epoch: 0},
		},
		States: map[string][]byte{"agg": []byte("gob bytes"), "empty": {}},
	}
}

// TestTransactionFileRoundTrips ensures a transaction encodes to one set
// of bytes and decodes back to itself.
func TestTransactionFileRoundTrips(t *testing.T) {
	r := sampleTxn()
	b := r.Encode()
	require.Equal(t, b, sampleTxn().Encode(), "the encoding is deterministic")
	got, err := Decode("f", b)
	require.NoError(t, err)
	require.Equal(t, r, got)
}

// TestTransactionFileKeepsTopicIDsAsVersion2 ensures a transaction with a
// topic ID in a position is written as version 2 and decodes back with it,
// and one without any is still version 1.
func TestTransactionFileKeepsTopicIDsAsVersion2(t *testing.T) {
	r := sampleTxn()
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(r.Encode()[8:]))
	r.Positions[TP{"in", 3}] = checkpoint.Position{Offset: 1 << 33, Epoch: 7, TopicID: checkpoint.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	b := r.Encode()
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(b[8:]))
	got, err := Decode("f", b)
	require.NoError(t, err)
	require.Equal(t, r, got)
}

// FuzzDecodeTransactionFile ensures Decode never panics or allocates
// past its input on any bytes, that what it accepts encodes to bytes that
// decode to the same transaction, and that any other input is
// checkpoint.ErrCorrupt.
func FuzzDecodeTransactionFile(f *testing.F) {
	f.Add(sampleTxn().Encode())
	f.Add((&Record{Ends: []int64{3}}).Encode())
	withID := sampleTxn()
	withID.Positions[TP{"in", 0}] = checkpoint.Position{Offset: 5, Epoch: 1, TopicID: checkpoint.TopicID{0x66, 0xd6, 0xdc, 0x38, 0x9f, 0x3f, 0x48, 0x0f, 0xa3, 0x8b, 0xd3, 0xdc, 0x42, 0x97, 0xcd, 0x07}}
	f.Add(withID.Encode())
	f.Add([]byte("STROMTX\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode("f", b)
		if err != nil {
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			return
		}
		again, err := Decode("f", r.Encode())
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}
