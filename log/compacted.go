package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// A compacted flag is a small sidecar file, <base>.compacted next to
// <base>.log, that the cleaner writes before it renames a cleaned segment
// over the original (see cleaner.go). It says three things about the
// segment of its base: its frames may skip offsets (compaction removed the
// records between them); the segment ends at the flag's next offset, even
// when its last frames were removed, so that it still meets its
// successor's base offset as every segment does; and the records removed
// were replaced by later records of their keys below the flag's mapped
// offset, which a Truncate must therefore not cut below (Partition.Truncate
// refuses: cutting a replacing record would leave its key with nothing,
// the record it replaced being gone). Without the flag a gap is corruption, as
// before compaction existed. The flag is written, fsynced and its name
// fsynced before the cleaned file takes the segment's name, so a segment
// with gaps never lacks it; a flag beside a segment without gaps (a crash
// between the two) only allows what the segment does not use.
//
// It also records when a pass first kept tombstones of the segment (unix
// ms, 0 for none): they go in a later pass once tombstone retention has
// passed since then, however often the segment is rewritten meanwhile
// (Kafka's delete horizon, KIP-534, kept per segment: a sealed segment
// gains no tombstones). A pass that keeps tombstones in a segment it does
// not rewrite writes the flag for that time alone.
const (
	compactedSuffix = ".compacted"
	// compactedMagic is "CMPT" as little-endian bytes.
	compactedMagic   = 0x54504d43
	compactedVersion = 1
	// compactedBytes is the flag's size: magic, version, reserved, next,
	// mapped, the tombstones' first pass and their CRC32C.
	compactedBytes = 36
)

func compactedName(base int64) string { return fmt.Sprintf("%020d%s", base, compactedSuffix) }

func encodeCompactedFlag(next, mapped, tombAt int64) []byte {
	b := make([]byte, 0, compactedBytes)
	b = binary.LittleEndian.AppendUint32(b, compactedMagic)
	b = binary.LittleEndian.AppendUint16(b, compactedVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(next))
	b = binary.LittleEndian.AppendUint64(b, uint64(mapped))
	b = binary.LittleEndian.AppendUint64(b, uint64(tombAt))
	return binary.LittleEndian.AppendUint32(b, crcOf(b))
}

// writeCompactedFlag durably records that the segment of base in the
// partition folder dir may skip offsets, ends at next, lost records to
// later ones below mapped, and had its tombstones first kept at tombAt
// (unix ms, 0: none) (replaceFile: the flag is whole or absent after a
// crash, and its name is on disk when it returns).
func writeCompactedFlag(dir string, base, next, mapped, tombAt int64) error {
	if err := replaceFile(dir, compactedName(base), encodeCompactedFlag(next, mapped, tombAt)); err != nil {
		return fmt.Errorf("write compacted flag of segment %d: %w", base, err)
	}
	return nil
}

// removeCompactedFlag removes the compacted flag of the segment of base,
// if there is one.
func removeCompactedFlag(dir string, base int64) error {
	if err := os.Remove(filepath.Join(dir, compactedName(base))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove compacted flag: %w", err)
	}
	return nil
}

// loadCompacted reads the compacted flag of s, if it has one, into s.ends,
// s.mapped and s.tombAt. A flag that does not decode (damaged: it is written whole
// or not at all) still says the segment may skip offsets, with no end
// beyond its frames and no cut allowed below the log's end (mapped is the
// largest offset): reads stay possible, the gap it leaves before the
// successor's base is reported by recovery as any gap is, and Truncate
// refuses to cut anywhere it could have mattered.
func (s *segment) loadCompacted(dir string) error {
	b, err := readRegularFile(filepath.Join(dir, compactedName(s.base)), compactedBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("log: segment %s: read compacted flag: %w", s.path, err)
	}
	s.gaps, s.mapped = true, math.MaxInt64
	if len(b) == compactedBytes && binary.LittleEndian.Uint32(b) == compactedMagic &&
		binary.LittleEndian.Uint16(b[4:]) == compactedVersion && binary.LittleEndian.Uint16(b[6:]) == 0 &&
		binary.LittleEndian.Uint32(b[32:]) == crcOf(b[:32]) {
		if next := int64(binary.LittleEndian.Uint64(b[8:])); next >= s.base {
			s.ends = next
		}
		s.mapped = int64(binary.LittleEndian.Uint64(b[16:]))
		s.tombAt = int64(binary.LittleEndian.Uint64(b[24:]))
	}
	return nil
}
