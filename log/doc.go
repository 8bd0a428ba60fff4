// Package log is strom's embedded segmented log: topics of partitions,
// partitions of segment files, records addressed by dense 0-based offsets,
// on local disk, with crash recovery.
//
// # Layout
//
// A log directory holds one folder per topic. A topic folder holds
// topic.json (name and partition count, fixed at creation), writer.lock
// (held with flock by the one process that writes the topic; it contains
// that process's pid) and one folder per partition, named by its number.
// A partition folder holds its segments, each named by the offset of its
// first record zero-padded to 20 digits plus ".log":
//
//	events/
//	  topic.json
//	  writer.lock
//	  0/leader-epoch-checkpoint
//	  0/00000000000000000000.log
//	  0/00000000000000004096.log
//	  1/leader-epoch-checkpoint
//	  1/00000000000000000000.log
//
// Topic names follow Kafka's rule (1 to 249 of [a-zA-Z0-9._-], not "." or
// ".."), so no name can leave the directory.
//
// # Frame format (version 1)
//
// A segment is a sequence of frames, each starting at a multiple of 8
// bytes. All integers are little-endian.
//
//	 0      4      8                                    8+L   padded to 8
//	 +------+------+-------------------------------------+-----+
//	 |  L   | CRC  |               body (L bytes)        | 0.. |
//	 +------+------+-------------------------------------+-----+
//	 L:   uint32, length of the body; never 0 for a record
//	 CRC: uint32, CRC32C (Castagnoli) of the body
//
//	body:
//	 0  uint8   format version (1)
//	 1  uint8   attributes (0)
//	 2  uint16  reserved (0)
//	 4  int32   epoch of the partition when the record was appended
//	 8  int64   offset
//	16  int64   timestamp, milliseconds since the Unix epoch
//	24  int32   key length, -1 for a nil key; then the key bytes
//	    int32   value length, -1 for a nil value; then the value bytes
//	    uint32  header count; then per header:
//	              uint32 key length, key bytes,
//	              int32 value length (-1 nil), value bytes
//
// The length prefix is never zero for a record, so a zero length marks the
// end of the log in a pre-sized (ModeMmap) segment. The body and CRC are
// stored before the length: the mmap path publishes the length with one
// aligned 4-byte atomic store, so a reader in another process that sees a
// length also sees the body and CRC. The offset inside the body lets
// recovery check that frames are contiguous.
//
// # Write paths
//
// ModeFile writes frames with pwrite; the file length is the end of the
// active segment. ModeMmap pre-sizes the active segment with fallocate and
// copies frames into a shared mapping; the first zero length prefix is the
// end. Reads always use pread, whatever the mode, so a reader is never
// killed by SIGBUS when a mapped file shrinks under it. A segment rolls when
// the next frame would not fit in WithSegmentBytes (64 MiB by default); the
// full segment is forced to disk and, in ModeMmap, shrunk to its frames
// before its successor is created.
//
// # Recovery
//
// Opening a topic walks the frames of each partition's segments, rebuilding
// the sparse in-memory index (one entry every WithIndexIntervalBytes, 4 KiB
// by default; there is no index file), and stops at the first frame that
// is not intact: a length of zero, a length that runs past the end of the
// file, a CRC mismatch, or a body that does not decode or holds the wrong
// offset. In the last segment that is a torn tail, left by a crash during
// an append: it is truncated (and the truncation forced to disk), and the
// next append reuses the offset; Partition.Recovery reports the cut. In an
// earlier segment it is corruption, because sealed segments were forced to
// disk before the next one was created: opening fails with a *CorruptError
// naming topic, partition, segment, byte position and offset, unless the
// log was opened WithRepair, which cuts there, deletes the later segments
// and reports how many records it dropped. Valid records are never dropped
// silently.
//
// # Epochs
//
// Every open of a partition for writing, and every Truncate, starts a new
// epoch at the partition's end, recorded (in Kafka's leader-epoch-checkpoint
// format: "epoch startOffset" lines) before anything is appended in it, and
// every record carries the epoch it was appended in (Record.Epoch). An epoch
// begins at every open, not only after a torn tail was cut: records that were
// in the page cache but never reached the disk vanish in a machine crash
// without leaving a torn frame, and a consumer may already have handled
// them. Their offsets are then reused by records of a later epoch.
// Partition.ResumeOffset applies KIP-320's check to a saved (position,
// epoch): when a later epoch began below the position, the consumer resumes
// there, so the new records at reused offsets are handled, not skipped; a
// Reader does the same between batches. A position above the end of the
// current epoch is ErrOffsetOutOfRange, never a silent jump.
//
// # Durability
//
// Append returns once the frames are in the page cache: they survive the
// death of the process, not a crash of the machine. Partition.Sync (and
// Topic.Sync) force them to disk (fdatasync, or msync for ModeMmap). Every
// file creation, rename and deletion is followed by an fsync of its
// directory.
//
// # Readers
//
// Partition.Read reads by offset with a byte budget. Replay reads up to the
// high watermark as it was when the replay began and then returns io.EOF;
// Follow never ends. In-process appends wake followers at once; a process
// that opened the log with ReadOnly looks for another process's appends
// every WithPollInterval (2 ms). Reading below the log start offset or
// above the high watermark is ErrOffsetOutOfRange.
//
// # Partitioning
//
// Topic.Append picks the partition from the record's key with Kafka's
// default partitioner (murmur2, sign bit masked, modulo the partition
// count), so a key lands in the same partition number here and in Kafka.
// Records with a nil key go round-robin. Topic.PartitionFor answers where a
// record would go without moving the round-robin counter.
package log
