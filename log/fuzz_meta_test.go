package log

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseEpochs ensures that parseEpochs never panics nor sizes anything
// by the count line (allocation under 1 MiB for a file of at most 64 KiB),
// and that what it accepts is a history in order whose file says exactly
// what was read: its encoding, parsed again, gives the same history, and
// every entry line is two decimal integers and nothing else.
func FuzzParseEpochs(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n3\n0 0\n1 95\n2 140\n"))
	f.Add([]byte("0\n2\n0 0\n1 95"))
	f.Add([]byte("0\n2\n0 0\n"))
	f.Add([]byte("0\n1\n0 0 7\n"))
	f.Add([]byte("0\n1\n-1 0\n"))
	f.Add([]byte("0\n+1\n0 007\n"))
	f.Add([]byte("0\r\n1\r\n0 0\r\n"))
	f.Add([]byte("1\n0\n"))
	for _, n := range fuzzBigLengths {
		f.Add(fmt.Appendf(nil, "0\n%d\n0 0\n", n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 64<<10 {
			return
		}
		var e epochs
		var err error
		if alloc := fuzzAllocated(func() { e, err = parseEpochs(b) }); alloc > 1<<20+uint64(16*len(b)) {
			t.Errorf("parseEpochs allocated %d bytes for a file of %d", alloc, len(b))
		}
		if err != nil {
			return
		}
		for i := 1; i < len(e); i++ {
			if e[i].epoch <= e[i-1].epoch || e[i].start < e[i-1].start {
				t.Fatalf("accepted history out of order: %v", e)
			}
		}
		again, err := parseEpochs(e.encode())
		if err != nil || fmt.Sprint(again) != fmt.Sprint(e) {
			t.Fatalf("history %v encodes to %q, which parses to %v, %v", e, e.encode(), again, err)
		}
		lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
		for i, want := range strings.Split(strings.TrimSuffix(string(e.encode()), "\n"), "\n") {
			if lines[i] != want {
				t.Fatalf("line %q accepted as %q", lines[i], want)
			}
		}
	})
}

// FuzzLoadRecoveryPoint ensures that loadRecoveryPoint never panics, that
// a file it does not accept is ErrCorrupt naming it, and that what it
// accepts is one JSON object of a point that can be true (no negative
// position, offset not below the segment's base), which saves and loads
// back the same.
func FuzzLoadRecoveryPoint(f *testing.F) {
	f.Add([]byte(`{"version":1,"segment":4096,"position":81920,"offset":5120}` + "\n"))
	f.Add([]byte(`{"version":1,"segment":0,"position":0,"offset":0}`))
	f.Add([]byte(`{"version":1,"segment":0,"position":0,"offset":0}{}`))
	f.Add([]byte(`{"version":1,"segment":0,"position":0,"offset":0} trailing`))
	f.Add([]byte(`{"version":2,"segment":0,"position":0,"offset":0}`))
	f.Add([]byte(`{"version":1,"segment":9,"position":0,"offset":3}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"version":1,"segment":0,"position":0,"offset":0`))
	for _, n := range fuzzBigLengths {
		f.Add(fmt.Appendf(nil, `{"version":1,"segment":0,"position":%d,"offset":%d}`, n, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, recoveryPointFile)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		pt, err := loadRecoveryPoint(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("loadRecoveryPoint: %v, not ErrCorrupt naming %s", err, path)
			}
			return
		}
		if len(b) > recoveryPointMaxBytes {
			t.Fatalf("a file of %d bytes accepted, the limit is %d", len(b), recoveryPointMaxBytes)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil || len(bytes.TrimSpace(b[dec.InputOffset():])) != 0 {
			t.Fatalf("accepted %q, which is not one JSON object (%v)", b, err)
		}
		if pt.Segment < 0 || pt.Position < 0 || pt.Offset < pt.Segment {
			t.Fatalf("accepted an impossible point %+v", pt)
		}
		if err := saveRecoveryPoint(dir, pt); err != nil {
			t.Fatal(err)
		}
		if again, err := loadRecoveryPoint(dir); err != nil || again != pt {
			t.Fatalf("point %+v saved and loaded back as %+v, %v", pt, again, err)
		}
	})
}

// FuzzLoadTopicMeta ensures that loadTopicMeta never panics, that a
// topic.json it does not accept is ErrCorruptMetadata naming it, and that
// what it accepts names the topic, has a partition count in range, and
// writes and loads back the same (its ID too, or no ID for one without).
func FuzzLoadTopicMeta(f *testing.F) {
	f.Add([]byte(fuzzTopicMeta))
	f.Add([]byte(`{"version":1,"name":"events","partitions":3,"retentionBytes":1024,"retentionMs":-1,"timestampType":"LogAppendTime"}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":2,"id":"ZtbcOJ8_SA-ji9PcQpfNBw"}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":2,"id":""}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":2,"id":"AAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":2,"id":"ZtbcOJ8_SA-ji9PcQpfNBw=="}`))
	f.Add([]byte(`{"version":1,"name":"other","partitions":1}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":0}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":1,"extra":true}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":1}{}`))
	f.Add([]byte(`{"version":1,"name":"events","partitions":1`))
	for _, n := range fuzzBigLengths {
		f.Add(fmt.Appendf(nil, `{"version":1,"name":"events","partitions":%d}`, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tdir := t.TempDir()
		path := filepath.Join(tdir, topicMetaFile)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := loadTopicMeta("events", tdir)
		if err != nil {
			if !errors.Is(err, ErrCorruptMetadata) || !strings.Contains(err.Error(), path) {
				t.Fatalf("loadTopicMeta: %v, not ErrCorruptMetadata naming %s", err, path)
			}
			return
		}
		if m.Name != "events" || m.Partitions < 1 || m.Partitions > MaxPartitions {
			t.Fatalf("accepted %+v", m)
		}
		if err := writeTopicMeta(tdir, m); err != nil {
			t.Fatal(err)
		}
		again, err := loadTopicMeta("events", tdir)
		if err != nil || fmt.Sprintf("%+v %v %v", again, deref(again.RetentionBytes), deref(again.RetentionMs)) !=
			fmt.Sprintf("%+v %v %v", m, deref(m.RetentionBytes), deref(m.RetentionMs)) {
			// pointers differ between loads: compare what they point at
			a, b := again, m
			a.RetentionBytes, a.RetentionMs, b.RetentionBytes, b.RetentionMs = nil, nil, nil, nil
			if err != nil || a != b || deref(again.RetentionBytes) != deref(m.RetentionBytes) || deref(again.RetentionMs) != deref(m.RetentionMs) {
				t.Fatalf("metadata %+v written and loaded back as %+v, %v", m, again, err)
			}
		}
	})
}

func deref(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// FuzzSealMarker ensures that decodeSealMarker never panics and accepts
// only markers that encode back to the same bytes (reserved and padding
// bytes included); and,
// with the fuzzed marker (its CRC fixed or not) beside a sealed segment of
// 4 valid frames and its successor, that Open never fails and never loses
// or invents a record: a marker that disagrees with the file is not
// trusted, or its disagreement is found when the segment is first read.
func FuzzSealMarker(f *testing.F) {
	seg := fuzzFrames(0, 4)
	good := sealMarker{base: 0, next: 4, size: int64(len(seg)), lastPos: int64(len(seg) - padded(frameHeaderBytes+bodySize(&fuzzRecords[3])))}
	good.lastHeader = binary.LittleEndian.Uint64(seg[good.lastPos:])
	f.Add(good.encode(), false)
	for _, change := range []func(m *sealMarker){
		func(m *sealMarker) { m.next = 3 },
		func(m *sealMarker) { m.next = 5 },
		func(m *sealMarker) { m.size -= 8 },
		func(m *sealMarker) { m.lastPos -= 8 },
		func(m *sealMarker) { m.lastPos = -1 },
		func(m *sealMarker) { m.base = 1 },
		func(m *sealMarker) { m.lastHeader++ },
	} {
		m := good
		change(&m)
		f.Add(m.encode(), false)
	}
	for _, n := range fuzzBigLengths {
		m := good
		m.next = int64(n)
		f.Add(m.encode(), false)
		m = good
		m.size, m.lastPos = int64(n), int64(n)-48
		f.Add(m.encode(), false)
	}
	f.Add(good.encode()[:48], true)
	reserved := good.encode()
	reserved[6] = 1
	f.Add(reserved, true) // reserved bytes set, CRC fixed
	padding := good.encode()
	padding[55] = 1
	f.Add(padding, false)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if len(b) > 4<<10 {
			return
		}
		if fixCRC && len(b) >= 52 {
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[48:], crcOf(b[:48]))
		}
		if m, ok := decodeSealMarker(b); ok {
			if got := m.encode(); !bytes.Equal(got, b) {
				t.Fatalf("marker %x decodes to %+v, which encodes to %x", b, m, got)
			}
		}
		dir, pdir := fuzzPartitionDir(t)
		files := map[string][]byte{
			segmentName(0): seg,
			sealedName(0):  b,
			segmentName(4): appendFrame(nil, &Record{Value: []byte("after")}, 4, 0),
		}
		for name, c := range files {
			if err := os.WriteFile(filepath.Join(pdir, name), c, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		lg, p, err := fuzzOpen(dir, WithSegmentBytes(fuzzSegmentBytes))
		if err != nil {
			t.Fatalf("Open with seal marker %x: %v", b, err)
		}
		defer lg.Close()
		recs, err := readEverything(p)
		if err != nil || len(recs) != 5 {
			t.Fatalf("read %d records, %v; want 5 with seal marker %x", len(recs), err, b)
		}
		verifyRecords(t, seg, 0, recs[:4])
	})
}
