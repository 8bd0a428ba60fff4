package sink

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// sampleTxn is a transaction with every field in use.
func sampleTxn() *txnRecord {
	return &txnRecord{
		seq:  42,
		ends: []int64{0, 17, 1 << 40},
		positions: map[tpKey]checkpoint.Position{
			{"in", 0}:        {Offset: 5, Epoch: checkpoint.NoEpoch},
			{"in", 3}:        {Offset: 1 << 33, Epoch: 7},
			{"other.t_-", 1}: {Offset: 0, Epoch: 0},
		},
		states: map[string][]byte{"agg": []byte("gob bytes"), "empty": {}},
	}
}

// TestTransactionFileRoundTrips ensures a transaction encodes to one set
// of bytes and decodes back to itself.
func TestTransactionFileRoundTrips(t *testing.T) {
	r := sampleTxn()
	b := r.encode()
	require.Equal(t, b, sampleTxn().encode(), "the encoding is deterministic")
	got, err := decodeTxn("f", b)
	require.NoError(t, err)
	require.Equal(t, r, got)
}

// FuzzDecodeTransactionFile ensures decodeTxn never panics or allocates
// past its input on any bytes, that what it accepts encodes to bytes that
// decode to the same transaction, and that any other input is
// checkpoint.ErrCorrupt.
func FuzzDecodeTransactionFile(f *testing.F) {
	f.Add(sampleTxn().encode())
	f.Add((&txnRecord{ends: []int64{3}}).encode())
	f.Add([]byte("STROMTX\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeTxn("f", b)
		if err != nil {
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			return
		}
		again, err := decodeTxn("f", r.encode())
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}
