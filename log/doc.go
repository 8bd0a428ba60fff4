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
// first record zero-padded to 20 digits plus ".log", and its recovery point
// (see "Recovery"):
//
//	events/
//	  topic.json
//	  writer.lock
//	  0/00000000000000000000.log
//	  0/00000000000000004096.log
//	  0/recovery-point.json
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
//	 4  int64   offset
//	12  int64   timestamp, milliseconds since the Unix epoch
//	20  int32   key length, -1 for a nil key; then the key bytes
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
// end. Either way one partition has one writer at a time: concurrent
// appenders are written together, by whichever of them finds no write in
// progress, with one pwrite or one copy (see "Durability"). Reads always use pread, whatever the mode, so a reader is never
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
// offset. What that stop means is decided by where it is:
//
//   - In the last segment, with nothing intact behind it and at or above
//     the recovery point, it is the end of the log (a clean end of file or
//     the zero tail of a pre-sized segment) or a torn tail, the remains of
//     an append a crash cut short: the tail is truncated (and the
//     truncation forced to disk), the next append reuses the offset, and
//     Partition.Recovery reports the cut.
//   - In the last segment with an intact frame behind it (the file is
//     scanned on from the stop at every 8-byte boundary for a frame that
//     verifies and holds the expected offset or a later one), or below the
//     recovery point, or in an earlier segment (sealed segments were forced
//     to disk before the next one was created), it is corruption: opening
//     fails with a *CorruptError (ErrCorrupt) naming topic, partition,
//     segment, byte position and offset, unless the log was opened
//     WithRepair, which cuts there, deletes any later segments, lowers the
//     recovery point and reports how many records it dropped.
//
// Valid records are never dropped silently.
//
// The recovery point, recovery-point.json in the partition folder, records
// the end of what is known to be on disk: segment base offset, byte
// position and offset. It is written after syncs, at most once a second,
// and by Close (temporary file, fsync, rename, fsync of the folder), so it
// costs nothing per append; it may lag the synced end by up to a second of
// appends. Truncate and repair lower it before they cut. A read-only log
// does not look at it.
//
// # Durability
//
// What an append promises when it returns is its ack policy: WithAck sets
// the log's (AckWritten by default), Partition.AppendAck and
// Topic.AppendAck choose per call.
//
//   - AckNone: the records are accepted: validated, given their offsets and
//     encoded in memory, to be written by the appender that is writing for
//     the partition (the caller itself when none is). They are lost if the
//     process dies before that write, typically microseconds later, and
//     are exposed afterwards like AckWritten records. A write error is
//     returned by the next append, Sync or Close.
//   - AckWritten: the records are in the operating system's page cache.
//     Readers, also in other processes, see them; they survive the death
//     of the writing process (a panic, SIGKILL), but a kernel crash or
//     power loss loses those not yet synced.
//   - AckSynced: the records are on stable storage. A sync that began after
//     they were written has completed (fdatasync for ModeFile, msync with
//     MS_SYNC for ModeMmap), and their segment's directory entry was
//     fsynced when the segment was created, before anything in it was
//     acked. They survive power loss, as far as the disk honours cache
//     flushes.
//
// The loss window of AckNone and AckWritten records, on a crash of the
// machine, is everything written since the last sync. Syncs happen on
// Partition.Sync and Topic.Sync, an AckSynced append, a segment roll (the
// full segment is synced before the next is created) and Close (which
// writes what AckNone accepted and syncs it). Without a flush policy, the
// default, nothing else syncs: the window is whatever the kernel has not
// yet written back on its own (on Linux, dirty pages older than
// vm.dirty_expire_centisecs, 30 s by default, are written within about
// another 5 s). WithFlushPolicy(n, d) bounds it: a sync starts once n
// records are unsynced (run by the appender that crosses the bound), and
// d after a record was written at the latest (run by a background
// goroutine); either bound may be zero to disable it. The window is then
// about the last n records or the last d plus the duration of one sync,
// whichever is less.
//
// Concurrent appends to a partition are grouped: the records of every
// appender waiting are stored with one write, and AckSynced appenders share
// one sync, so a sync's cost is divided among them. A failed write or sync
// fails the partition: every later append returns the error until the log
// is reopened (a failed fsync may have dropped the dirty pages, so
// retrying it could report success for data that is gone).
//
// Every file creation, rename and deletion is followed by an fsync of its
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
