package stream

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type namedCount int64

type point struct {
	X, Y int
	At   time.Time
}

func roundTrip[T any](t *testing.T, v T) {
	t.Helper()
	c := newCodec[T]()
	b, err := c.append(nil, v)
	require.NoError(t, err)
	got, err := c.decode(b)
	require.NoError(t, err)
	require.Equal(t, v, got)
}

func TestCodecRoundTripsEveryKindItEncodes(t *testing.T) {
	roundTrip(t, "key-42")
	roundTrip(t, "")
	roundTrip(t, []byte{0, 1, 255})
	roundTrip(t, int64(-1<<62))
	roundTrip(t, 7)
	roundTrip(t, namedCount(99))
	roundTrip(t, uint32(1<<31))
	roundTrip(t, int8(-3))
	roundTrip(t, 2.5)
	roundTrip(t, float32(0.25))
	roundTrip(t, true)
	roundTrip(t, point{X: 1, Y: -2, At: time.Unix(10, 0).UTC()})
	roundTrip(t, map[string]int64{"a": 1})
}

func TestCodecRefusesBytesThatAreNotItsEncoding(t *testing.T) {
	_, err := newCodec[int64]().decode([]byte{0x80})
	require.Error(t, err)
	_, err = newCodec[int8]().decode([]byte{0x80, 0x04}) // 256: overflows
	require.Error(t, err)
	_, err = newCodec[bool]().decode([]byte{2})
	require.Error(t, err)
	_, err = newCodec[float64]().decode([]byte{1, 2})
	require.Error(t, err)
}
