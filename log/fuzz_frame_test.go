package log

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The fuzz targets of the log's decoders (make fuzz runs each for FUZZTIME;
// go test runs their seeds as plain tests). Each says what must hold for
// any input: never a panic, never a record accepted that its bytes do not
// hold, never an allocation sized by a length read from the input.

// fuzzBigLengths are the damaged length prefixes and counts every target is
// seeded with: 1 MiB, 2^28, 2^31-1 and 2^32-16 (untrusted_test.go's range).
var fuzzBigLengths = []uint32{1 << 20, 1 << 28, 1<<31 - 1, 1<<32 - 16}

// fuzzRecords are the records the seeds are made of: nil and empty keys and
// values, headers with nil and empty values.
var fuzzRecords = []Record{
	{Value: []byte("v0")},
	{Key: []byte("k1"), Value: []byte("value-1"), Timestamp: 1700000000000},
	{Key: []byte{}, Value: nil, Headers: []Header{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}},
	{Key: []byte("k3"), Value: []byte{}, Headers: []Header{{Key: "trace", Value: []byte{}}}},
}

// fuzzFrames returns n frames of fuzzRecords (cycled) from offset off.
func fuzzFrames(off int64, n int) []byte {
	var b []byte
	for i := range n {
		r := fuzzRecords[i%len(fuzzRecords)]
		b = appendFrame(b, &r, off+int64(i), 0)
	}
	return b
}

// FuzzDecodeBody ensures that for any body decodeBody never panics, that
// checkBody accepts exactly what decodeBody accepts at the offset the body
// claims (recovery relies on it), that bodyHeaders counts what decodeBody
// returns (reads size their header slice with it), that every keyStore
// decodes the same record, and that an accepted body is the encoding of the
// record it decoded to (attribute and reserved bytes included): no byte of
// the body is ignored.
func FuzzDecodeBody(f *testing.F) {
	for i := range fuzzRecords {
		b := appendFrame(nil, &fuzzRecords[i], int64(i), 3)
		f.Add(b[frameHeaderBytes:frameHeaderBytes+bodySize(&fuzzRecords[i])], int64(i))
	}
	b := appendFrame(nil, &fuzzRecords[2], 7, 0)
	body := b[frameHeaderBytes : frameHeaderBytes+bodySize(&fuzzRecords[2])]
	f.Add(body[:len(body)-1], int64(7)) // truncated
	attrs := bytes.Clone(body)
	attrs[1] = 1
	f.Add(attrs, int64(7)) // attributes set
	for _, n := range fuzzBigLengths {
		for _, at := range []int{24, 28 + 2, len(body) - 4 - 15, len(body) - 15} { // key, value, header count, header key lengths
			d := bytes.Clone(body)
			binary.LittleEndian.PutUint32(d[at:], n)
			f.Add(d, int64(7))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, off int64) {
		var r Record
		err := decodeBody(body, &r)
		if got, want := checkBody(body, off), err == nil && r.Offset == off; got != want {
			t.Fatalf("checkBody(off %d) = %v, decodeBody err %v offset %d", off, got, err, r.Offset)
		}
		if len(body) >= bodyFixedBytes && checkBody(body, bodyOffset(body)) != (err == nil) {
			t.Fatalf("checkBody at the body's own offset disagrees with decodeBody err %v", err)
		}
		n, keyBytes, ok := bodyHeaders(body)
		if err != nil {
			return
		}
		if !ok || n != len(r.Headers) {
			t.Fatalf("bodyHeaders = %d, %v; decodeBody returned %d headers", n, ok, len(r.Headers))
		}
		sum := 0
		for _, h := range r.Headers {
			sum += len(h.Key)
		}
		if keyBytes != sum {
			t.Fatalf("bodyHeaders counts %d header key bytes, the headers hold %d", keyBytes, sum)
		}
		for _, ks := range []*keyStore{{alias: true}, {buf: make([]byte, 0, keyBytes)}} {
			var r2 Record
			hdrs, err := decodeBodyInto(body, &r2, make([]Header, 1, 1+n), ks)
			if err != nil || len(hdrs) != 1+n || !sameRecord(&r, &r2) {
				t.Fatalf("decodeBodyInto(keyStore %+v) = %+v, %v; decodeBody %+v", ks, r2, err, r)
			}
		}
		frame := appendFrame(nil, &r, r.Offset, r.Epoch)
		if got := frame[frameHeaderBytes : frameHeaderBytes+len(body)]; !bytes.Equal(got, body) {
			t.Fatalf("the decoded record encodes to\n%x\nnot the body\n%x", got, body)
		}
		if l, crc := frameHeader(frame); l != uint32(len(body)) || crc != crcOf(frame[frameHeaderBytes:frameHeaderBytes+len(body)]) {
			t.Fatalf("frame header length %d CRC %#x for a body of %d bytes", l, crc, len(body))
		}
	})
}

// sameRecord reports whether a and b hold the same fields, nil and empty
// told apart.
func sameRecord(a, b *Record) bool {
	if a.Offset != b.Offset || a.Epoch != b.Epoch || a.Timestamp != b.Timestamp ||
		!sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// FuzzKafkaPartition ensures that KafkaPartition never panics for a
// positive count, returns a partition in [0, n) for every n in [1, 2^31-1],
// the same one for the same key, and the one franz-go's default partitioner
// (the Kafka murmur2 hasher) picks; and that KafkaPartitioner, whose count is
// an int, does the same for counts above 32 bits too. The int64 argument
// gives both counts: itself (made positive) for the partitioner, and that
// folded into [1, 2^31-1] for KafkaPartition.
func FuzzKafkaPartition(f *testing.F) {
	f.Add([]byte(nil), int64(1))
	f.Add([]byte{}, int64(3))
	f.Add([]byte("key-1"), int64(12))
	f.Add([]byte("\x80\x81\x82"), int64(math.MaxInt32))
	f.Add([]byte("key-1"), int64(1<<32))
	f.Add([]byte("key-2"), int64(1<<32+3))
	f.Add(bytes.Repeat([]byte{0xff}, 64), int64(-7))
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	f.Fuzz(func(t *testing.T, key []byte, n64 int64) {
		big := int(n64)
		if big <= 0 {
			big = max(int(uint64(n64)>>1), 1) // positive, up to 2^63-1
		}
		n := int32(uint64(big-1)%math.MaxInt32) + 1 // big itself up to 2^31-1
		p := KafkaPartition(key, n)
		if p < 0 || p >= n {
			t.Fatalf("KafkaPartition(%x, %d) = %d, outside [0, %d)", key, n, p, n)
		}
		if again := KafkaPartition(bytes.Clone(key), n); again != p {
			t.Fatalf("KafkaPartition(%x, %d) = %d, then %d", key, n, p, again)
		}
		if key == nil {
			key = []byte{} // kgo and KafkaPartitioner send a nil key round-robin; KafkaPartition hashes it as empty
		}
		if want := kp.Partition(&kgo.Record{Key: key}, int(n)); int(p) != want {
			t.Fatalf("KafkaPartition(%x, %d) = %d, franz-go picks %d", key, n, p, want)
		}
		var kpr KafkaPartitioner
		got := kpr.PartitionFor(key, big)
		if want := kp.Partition(&kgo.Record{Key: key}, big); got < 0 || int(got) != want {
			t.Fatalf("KafkaPartitioner.PartitionFor(%x, %d) = %d, franz-go picks %d", key, big, got, want)
		}
	})
}
