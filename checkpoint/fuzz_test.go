package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The fuzz targets of the checkpoint files' decoders (make fuzz runs each
// for FUZZTIME; go test runs their seeds as plain tests).

// fuzzBigLengths are the damaged lengths the targets are seeded with: 1 MiB,
// 2^28, 2^31-1, 2^32-16, and for the state file's 64-bit length, its
// largest value.
var fuzzBigLengths = []uint64{1 << 20, 1 << 28, 1<<31 - 1, 1<<32 - 16, math.MaxUint64}

// FuzzDecodePosition ensures that decodePosition never panics and accepts
// only exactly what Save writes for the topic-partition (version 1 without
// a topic ID, its epoch optional; version 2 with one; trailing newline
// optional), and that FileStore.Load of the same bytes
// gives the same position, or an error wrapping ErrCorrupt naming the file.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition("events", 0, Position{Offset: 42, Epoch: 3}), int32(0))
	f.Add(encodePosition("events", 7, Position{Offset: 0, Epoch: NoEpoch}), int32(7))
	f.Add([]byte(`{"version":1,"topic":"events","partition":0,"position":42}`), int32(0))
	f.Add(encodePosition("events", 3, Position{Offset: 42, Epoch: 3, TopicID: TopicID{0x66, 0xd6, 0xdc, 0x38, 0x9f, 0x3f, 0x48, 0x0f, 0xa3, 0x8b, 0xd3, 0xdc, 0x42, 0x97, 0xcd, 0x07}}), int32(3))
	f.Add([]byte(`{"version":2,"topic":"events","partition":0,"position":42,"epoch":3,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`), int32(0))
	f.Add([]byte(`{"version":2,"topic":"events","partition":0,"position":42,"epoch":3}`), int32(0))
	f.Add([]byte(`{"version":2,"topic":"events","partition":0,"position":42,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`), int32(0))
	f.Add([]byte(`{"version":2,"topic":"events","partition":0,"position":42,"epoch":3,"topicId":""}`), int32(0))
	f.Add([]byte(`{"version":1,"topic":"events","partition":0,"position":42,"epoch":3,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}`), int32(0))
	f.Add([]byte(`{"version":1,"topic":"events","partition":0,"position":42,"epoch":-2}`), int32(0))
	f.Add([]byte(`{"version":1,"topic":"events","partition":0,"position":42,"Position":43}`), int32(0))
	f.Add([]byte(`{"version":1,"topic":"events","partition":0,"position":4`), int32(0))
	f.Add([]byte{}, int32(0))
	for _, n := range fuzzBigLengths {
		f.Add(fmt.Appendf(nil, `{"version":1,"topic":"events","partition":0,"position":%d,"epoch":%d}`, n, n), int32(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, partition int32) {
		if partition < 0 {
			partition = -(partition + 1)
		}
		pos, err := decodePosition(data, "events", partition)
		if err == nil {
			want := encodePosition("events", partition, pos)
			if !bytes.Contains(data, []byte(`"epoch"`)) {
				want = fmt.Appendf(nil, `{"version":1,"topic":"events","partition":%d,"position":%d}`+"\n", partition, pos.Offset)
			}
			if got := append(bytes.TrimSuffix(bytes.Clone(data), []byte("\n")), '\n'); !bytes.Equal(got, want) {
				t.Fatalf("accepted %q as %+v, which Save writes as %q", data, pos, want)
			}
			if pos.Offset < 0 || pos.Epoch < NoEpoch {
				t.Fatalf("accepted an impossible position %+v", pos)
			}
		}
		s, err2 := NewFileStore(t.TempDir())
		if err2 != nil {
			t.Fatal(err2)
		}
		path, err2 := s.Path("events", partition)
		if err2 != nil {
			t.Fatal(err2)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, found, lerr := s.Load(context.Background(), "events", partition)
		switch {
		case err == nil && (lerr != nil || !found || got != pos):
			t.Fatalf("Load = %+v, %v, %v; decodePosition = %+v", got, found, lerr, pos)
		case err != nil && (!errors.Is(lerr, ErrCorrupt) || !strings.Contains(lerr.Error(), path)):
			t.Fatalf("Load of a file decodePosition rejects (%v): %v, not ErrCorrupt naming %s", err, lerr, path)
		}
	})
}

// FuzzReadState ensures that readState never panics, never allocates more
// than the file holds whatever its length field says (the bytes read, the
// file's size, and 64 KiB for the rest), returns an error wrapping
// ErrCorrupt for a file that is not one whole snapshot, and returns exactly
// the body of one that is: the file is encodeState of what it returns.
func FuzzReadState(f *testing.F) {
	f.Add(encodeState([]byte("state")))
	f.Add(encodeState(nil))
	f.Add(encodeState(bytes.Repeat([]byte{0xa5}, 300)))
	f.Add(encodeState([]byte("state"))[:20])
	f.Add(append(encodeState([]byte("state")), 0))
	f.Add([]byte{})
	for _, n := range fuzzBigLengths {
		b := encodeState([]byte("state"))
		binary.LittleEndian.PutUint64(b[12:], n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		path := filepath.Join(t.TempDir(), "s"+stateSuffix)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		var body []byte
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		body, err = readState(fh, path)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(data))+64<<10 {
			t.Errorf("readState allocated %d bytes for a file of %d", alloc, len(data))
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("readState: %v, not ErrCorrupt naming %s", err, path)
			}
			return
		}
		if !bytes.Equal(encodeState(body), data) {
			t.Fatalf("accepted %x as the snapshot %x", data, body)
		}
	})
}
