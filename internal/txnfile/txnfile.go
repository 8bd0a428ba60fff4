// Package txnfile reads and writes the transaction file of a log topic
// written exactly once (sink.LogSink under stream.ExactlyOnce): the last
// committed transaction, with the committed end of each partition of the
// topic, the input positions and the state snapshots committed with it.
// The sink writes it; readers that must see only committed records
// (source.ReadCommitted, sink.CommittedEnds) read it. It is its own package
// because both sides need the format and neither may import the other.
package txnfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
)

// Name is the name of the file, in the output topic's folder
// (log.Topic.Dir), that holds the last transaction a sink.LogSink committed
// under stream.ExactlyOnce. Renaming a new one over it is the commit. The
// log reads nothing of that name (it reads topic.json, writer.lock and the
// partition folders), so the file does not change the topic.
const Name = "exactly-once.txn"

// The layout of a transaction file. All fixed-size integers are
// little-endian; the body is a sequence of unsigned varints (uvarint) and
// bytes, in this order:
//
//	header, 24 bytes:
//	  0  magic "STROMTX\x00"  8 bytes
//	  8  format version       uint32 (1, or 2 with topic IDs)
//	 12  body length          uint64
//	 20  CRC32C of the body   uint32 (Castagnoli, as the log's frames)
//	body:
//	  sequence number                      uvarint (0: the start, before any commit)
//	  P, the output topic's partitions     uvarint
//	  P committed ends                     uvarint each, partition 0 first
//	  N, the input positions               uvarint
//	  N times: topic length, topic bytes, partition, offset uvarint; epoch+1 uvarint (0: none);
//	           version 2 only: topic ID length (0: none, or 16), topic ID bytes
//	  S, the state snapshots               uvarint
//	  S times: name length, name bytes, data length, data bytes
//
// Positions are sorted by topic and partition, snapshots by name, so one
// transaction always encodes to the same bytes. A transaction none of
// whose positions has a topic ID (checkpoint.Position.TopicID) is written
// as version 1, which versions of strom before topic IDs read; one with is
// version 2, which they refuse by its version.
const (
	txnMagic       = "STROMTX\x00"
	txnVersion     = 1
	txnVersionIDs  = 2
	txnHeaderBytes = 24
	topicIDBytes   = len(checkpoint.TopicID{})
)

// castagnoli is the CRC32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one committed transaction of a LogSink: what its file holds.
type Record struct {
	Seq       uint64                     // 0: the file BeginTransactions writes before any commit
	Ends      []int64                    // per output partition (partition 0 first): its next offset at the commit
	Positions map[TP]checkpoint.Position // the input positions committed with the records below Ends
	States    map[string][]byte          // the state snapshots, by name
}

// TP is a topic-partition.
type TP struct {
	Topic     string
	Partition int32
}

// Encode returns the file's bytes: header, then body, in one allocation
// sized up front (a state snapshot is most of it, and is copied once).
func (r *Record) Encode() []byte {
	size := txnHeaderBytes + 4*binary.MaxVarintLen64 + len(r.Ends)*binary.MaxVarintLen64
	for k := range r.Positions {
		size += len(k.Topic) + 5*binary.MaxVarintLen64
	}
	for n, st := range r.States {
		size += len(n) + len(st) + 2*binary.MaxVarintLen64
	}
	version := uint32(txnVersion)
	for _, p := range r.Positions {
		if !p.TopicID.IsZero() {
			version = txnVersionIDs
			size += len(r.Positions) * (1 + topicIDBytes)
			break
		}
	}
	data := make([]byte, txnHeaderBytes, size)
	body := binary.AppendUvarint(data[txnHeaderBytes:], r.Seq)
	body = binary.AppendUvarint(body, uint64(len(r.Ends)))
	for _, e := range r.Ends {
		body = binary.AppendUvarint(body, uint64(e))
	}
	keys := make([]TP, 0, len(r.Positions))
	for k := range r.Positions {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b TP) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	body = binary.AppendUvarint(body, uint64(len(keys)))
	for _, k := range keys {
		p := r.Positions[k]
		body = appendBytes(body, []byte(k.Topic))
		body = binary.AppendUvarint(body, uint64(k.Partition))
		body = binary.AppendUvarint(body, uint64(p.Offset))
		body = binary.AppendUvarint(body, uint64(int64(p.Epoch)+1))
		switch {
		case version == txnVersion:
		case p.TopicID.IsZero():
			body = appendBytes(body, nil)
		default:
			body = appendBytes(body, p.TopicID[:])
		}
	}
	names := make([]string, 0, len(r.States))
	for n := range r.States {
		names = append(names, n)
	}
	slices.Sort(names)
	body = binary.AppendUvarint(body, uint64(len(names)))
	for _, n := range names {
		body = appendBytes(body, []byte(n))
		body = appendBytes(body, r.States[n])
	}
	copy(data, txnMagic)
	binary.LittleEndian.PutUint32(data[8:], version)
	binary.LittleEndian.PutUint64(data[12:], uint64(len(body)))
	binary.LittleEndian.PutUint32(data[20:], crc32.Checksum(body, castagnoli))
	return data[:txnHeaderBytes+len(body)]
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Decode parses the bytes of a transaction file read from path. Every
// length is checked against what is left before anything is allocated, so
// a damaged file can never make it allocate more than the file holds.
func Decode(path string, data []byte) (*Record, error) {
	switch {
	case len(data) < txnHeaderBytes:
		return nil, Corrupt(path, "%d bytes, shorter than the %d-byte header", len(data), txnHeaderBytes)
	case string(data[:8]) != txnMagic:
		return nil, Corrupt(path, "magic %q, want %q", data[:8], txnMagic)
	}
	version := binary.LittleEndian.Uint32(data[8:])
	length := binary.LittleEndian.Uint64(data[12:])
	sum := binary.LittleEndian.Uint32(data[20:])
	body := data[txnHeaderBytes:]
	switch {
	case version != txnVersion && version != txnVersionIDs:
		return nil, Corrupt(path, "format version %d, want %d or %d", version, txnVersion, txnVersionIDs)
	case length != uint64(len(body)):
		return nil, Corrupt(path, "header gives a %d-byte body, the file holds %d bytes after the header", length, len(body))
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, Corrupt(path, "CRC32C of the %d-byte body is %#08x, the header says %#08x", len(body), got, sum)
	}
	d := decoder{b: body}
	r := &Record{Seq: d.uvarint("sequence number")}
	nEnds := d.count("partition count", 1)
	if d.err == nil && (nEnds < 1 || nEnds > math.MaxInt32) {
		d.fail("%d partitions", nEnds)
	}
	for i := 0; d.err == nil && i < nEnds; i++ {
		r.Ends = append(r.Ends, d.int63(fmt.Sprintf("end of partition %d", i)))
	}
	nPos := d.count("position count", 4)
	r.Positions = make(map[TP]checkpoint.Position, nPos)
	for i := 0; d.err == nil && i < nPos; i++ {
		topic := string(d.bytes("position topic"))
		part := d.int63("position partition")
		off := d.int63("position offset")
		epoch := d.int63("position epoch") - 1
		var id checkpoint.TopicID
		if version == txnVersionIDs {
			switch b := d.bytes("position topic ID"); {
			case d.err != nil:
			case len(b) == topicIDBytes && [16]byte(b) != [16]byte{}:
				id = checkpoint.TopicID(b)
			case len(b) != 0:
				d.fail("position %d: topic ID of %d bytes, want 0 (none) or %d not all zero", i, len(b), topicIDBytes)
			}
		}
		switch {
		case d.err != nil:
		case topicname.Validate(topic) != nil:
			d.fail("position %d: invalid topic: %v", i, topicname.Validate(topic))
		case part > math.MaxInt32:
			d.fail("position %d: partition %d", i, part)
		case epoch > math.MaxInt32:
			d.fail("position %d: epoch %d", i, epoch)
		default:
			k := TP{topic, int32(part)}
			if _, dup := r.Positions[k]; dup {
				d.fail("position %s/%d twice", topic, part)
			}
			r.Positions[k] = checkpoint.Position{Offset: off, Epoch: int32(epoch), TopicID: id}
		}
	}
	nStates := d.count("state count", 2)
	r.States = make(map[string][]byte, nStates)
	for i := 0; d.err == nil && i < nStates; i++ {
		name := string(d.bytes("state name"))
		state := d.bytes("state data")
		switch {
		case d.err != nil:
		case topicname.Validate(name) != nil:
			d.fail("state %d: invalid name: %v", i, topicname.Validate(name))
		default:
			if _, dup := r.States[name]; dup {
				d.fail("state %q twice", name)
			}
			r.States[name] = bytes.Clone(state)
			if r.States[name] == nil {
				r.States[name] = []byte{}
			}
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the last state", len(d.b))
	}
	if d.err != nil {
		return nil, Corrupt(path, "%v", d.err)
	}
	return r, nil
}

// decoder reads the body of a transaction file; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: bad or truncated varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int63 reads a uvarint that must fit in an int64.
func (d *decoder) int63(what string) int64 {
	v := d.uvarint(what)
	if v > math.MaxInt64 {
		d.fail("%s: %d is out of range", what, v)
		return 0
	}
	return int64(v)
}

// count reads a count of items each at least minBytes long, which must
// fit in what is left.
func (d *decoder) count(what string, minBytes int) int {
	v := d.uvarint(what)
	if d.err == nil && v > uint64(len(d.b)/minBytes) {
		d.fail("%s: %d does not fit in the %d bytes left", what, v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s: %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// corruptError is a damaged transaction file: Error names the file and
// what is wrong with it, and errors.Is matches checkpoint.ErrCorrupt (a
// sink.LogSink is the pipeline's checkpoint store).
type corruptError struct {
	path, what string
}

// Corrupt returns an error for the damaged transaction file at path,
// saying what is wrong (format, args as fmt.Sprintf); errors.Is matches
// checkpoint.ErrCorrupt.
func Corrupt(path, format string, args ...any) error {
	return &corruptError{path: path, what: fmt.Sprintf(format, args...)}
}

func (e *corruptError) Error() string {
	return "txnfile: corrupt transaction file " + e.path + ": " + e.what
}

func (e *corruptError) Unwrap() error { return checkpoint.ErrCorrupt }

// Read reads and decodes the transaction file of the topic folder
// dir: (nil, nil) when there is none.
func Read(dir string) (*Record, error) {
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("txnfile: read transaction file %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck // read-only
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("txnfile: read transaction file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, Corrupt(path, "not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, fi.Size()))
	if err != nil {
		return nil, fmt.Errorf("txnfile: read transaction file %s: %w", path, err)
	}
	return Decode(path, data)
}

// tempPrefix begins the name of a transaction file being written.
const tempPrefix = "." + Name + ".tmp-"

// Write replaces the transaction file of the topic folder dir with
// r, the steps in the order a crash needs: write a temporary file in dir,
// fsync it, rename it over the file (the commit), fsync dir. A crash at any
// point leaves the old transaction or the new one, whole. The file is 0644
// (os.CreateTemp makes 0600) because readers of the topic may run as
// another user.
func Write(dir string, r *Record) error {
	path := filepath.Join(dir, Name)
	tmp, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("txnfile: write transaction file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // a no-op once renamed
	step := "chmod"
	if err = tmp.Chmod(0o644); err == nil {
		step = "write"
		_, err = tmp.Write(r.Encode())
	}
	if err == nil {
		step = "fsync"
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		step, err = "close", cerr
	}
	if err == nil {
		step = "rename"
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		step = "fsync the folder"
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("txnfile: write transaction file %s: %s: %w", path, step, err)
	}
	return nil
}

// RemoveTemps removes the temporary files a write killed midway left in
// dir. Only the topic's writer calls it, holding the writer lock.
func RemoveTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("txnfile: list %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("txnfile: remove %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// syncDir fsyncs the folder dir, so a rename in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
