package log

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// checkBodyAgrees fails t when checkBody and decodeBody disagree on body.
func checkBodyAgrees(t *testing.T, body []byte, off int64) {
	t.Helper()
	var r Record
	want := decodeBody(body, &r) == nil && r.Offset == off
	if got := checkBody(body, off); got != want {
		t.Fatalf("checkBody = %v, decodeBody accepts = %v, for body %x offset %d", got, want, body, off)
	}
}

// TestCheckBodyAcceptsExactlyWhatDecodeBodyDoes ensures recovery's cheap
// frame check and the reader's decoder agree on every record shape (nil
// and empty keys and values, headers) and on bodies with each length field
// damaged, cut short or extended.
func TestCheckBodyAcceptsExactlyWhatDecodeBodyDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bytesOrNil := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		return make([]byte, rng.IntN(40))
	}
	for i := range 20000 {
		r := Record{Key: bytesOrNil(), Value: bytesOrNil(), Timestamp: int64(i)}
		for range rng.IntN(3) {
			r.Headers = append(r.Headers, Header{Key: string(make([]byte, rng.IntN(5))), Value: bytesOrNil()})
		}
		off := int64(rng.IntN(1000))
		frame := appendFrame(nil, &r, off, int32(rng.IntN(5)))
		bodyLen, _ := frameHeader(frame)
		body := frame[frameHeaderBytes : frameHeaderBytes+bodyLen]
		checkBodyAgrees(t, body, off)
		checkBodyAgrees(t, body, off+1)
		// Damage one 4-byte field at a 4-aligned place after the fixed part.
		b := append([]byte(nil), body...)
		at := 20 + 4*rng.IntN((len(b)-20)/4)
		vals := []uint32{0, 1, 0xffffffff, 0xfffffffe, 0x7fffffff, 0x80000000, uint32(rng.IntN(64))}
		binary.LittleEndian.PutUint32(b[at:], vals[rng.IntN(len(vals))])
		checkBodyAgrees(t, b, off)
		checkBodyAgrees(t, body[:rng.IntN(len(body))], off)
		checkBodyAgrees(t, append(append([]byte(nil), body...), make([]byte, 1+rng.IntN(8))...), off)
		b = append([]byte(nil), body...)
		b[0] = 2
		checkBodyAgrees(t, b, off)
	}
}

// FuzzCheckBody extends the test above to arbitrary bytes.
func FuzzCheckBody(f *testing.F) {
	r := Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h", Value: nil}}}
	frame := appendFrame(nil, &r, 7, 1)
	f.Add(frame[frameHeaderBytes:], int64(7))
	f.Fuzz(func(t *testing.T, body []byte, off int64) { checkBodyAgrees(t, body, off) })
}
