// Package log is strom's embedded segmented log: topics of partitions,
// partitions of segment files, records addressed by 0-based offsets (dense,
// except where compaction removed records), on local disk, with crash
// recovery.
//
// # Layout
//
// A log directory holds one folder per topic. Open creates the directory
// only when given CreateIfMissing (the process that makes the log: a
// publisher, a test); otherwise a missing directory fails Open with
// ErrNoLog, so a mistyped path is reported at once instead of becoming an
// empty log whose topics stay unknown. A topic folder holds
// topic.json (name and partition count, fixed at creation, the topic's ID,
// and the optional retention policy, see "Retention"), writer.lock
// (held with flock by the one process that writes the topic; it contains
// that process's pid) and one folder per partition, named by its number.
// A partition folder holds its segments, each named by the offset of its
// first record zero-padded to 20 digits plus ".log"; next to each sealed
// segment its seal marker, the same name with ".sealed" (see "Seal
// markers"); its recovery point (see "Recovery"); once a ModeMmap
// writer has opened it, follow.waiters (see "Readers"); and in a compacted
// topic the compacted flag of each segment the cleaner rewrote
// (<base>.compacted) and the cleaner's checkpoint, cleaner-checkpoint (see
// "Compaction"):
//
//	events/
//	  topic.json
//	  writer.lock
//	  0/leader-epoch-checkpoint
//	  0/00000000000000000000.log
//	  0/00000000000000000000.sealed
//	  0/00000000000000004096.log
//	  0/recovery-point.json
//	  0/follow.waiters
//	  1/leader-epoch-checkpoint
//	  1/00000000000000000000.log
//
// Topic names follow Kafka's rule (1 to 249 of [a-zA-Z0-9._-], not "." or
// ".."), so no name can leave the directory. Nor can a link planted in it
// lead the log out: an entry named like a segment that is not a regular
// file (a directory, a symbolic link, a device) fails the partition's open
// with ErrCorrupt naming it, and writer.lock and follow.waiters, the files
// opened in place rather than replaced by rename, are opened with
// O_NOFOLLOW (a symbolic link writer.lock is ErrCorrupt; follow.waiters is
// then done without, followers polling), as are topic.json,
// recovery-point.json and leader-epoch-checkpoint, read only when they are
// regular files (a link to /dev/zero or a FIFO there is ErrCorrupt, not an
// open or a read that never ends).
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
// end of the log in a reserved (ModeMmap) segment. The body and CRC are
// stored before the length: the mmap path publishes the length with one
// aligned 4-byte atomic store, so a reader in another process that sees a
// length also sees the body and CRC. The offset inside the body lets
// recovery check that frames are contiguous. A body whose version byte is
// not 1, or whose attribute or reserved bytes (1 to 3) are not zero, fails
// the frame check like a CRC mismatch: a later format (compression in the
// attributes) must never be read as this one. Seal markers likewise
// require their reserved and padding bytes to be zero.
//
// # Write paths
//
// ModeFile writes frames with pwrite; the file length is the end of the
// active segment. ModeMmap copies frames into a shared mapping of the
// active segment, whose file it reserves with fallocate in steps before
// writing into them (1 MiB first, then the rest of the segment's
// capacity: an idle partition holds at most 1 MiB on disk, and a full
// disk is ENOSPC from the append that needed the space, never SIGBUS);
// the first zero length prefix is the end. A ModeMmap write of 4 KiB or
// more (a group of records) goes into the same pages with one pwrite, as
// in ModeFile (page faults made mapped copies of large groups run at under
// half the speed of pwrite); a kill during it leaves a torn tail, as a
// ModeFile pwrite does. Either way one partition has one writer at a time: concurrent
// appenders are written together, by whichever of them finds no write in
// progress, with one pwrite or one copy (see "Durability"). Reads always use pread, whatever the mode, so a reader is never
// killed by SIGBUS when a mapped file shrinks under it. A segment rolls when
// the next frame would not fit in WithSegmentBytes (64 MiB by default):
// in ModeMmap the full segment is shrunk to its frames, its successor is
// created, and a sealer goroutine then forces the full segment and the
// directory to disk and writes its seal marker, off the append path (see
// "Durability").
//
// # Recovery
//
// Opening a topic recovers its partitions in parallel, and the segments of
// each partition in parallel too (up to GOMAXPROCS walks at once in the
// process). A segment with a successor (a sealed one) whose seal marker
// matches the file is trusted without reading its frames: its size and
// next offset come from the marker, and its sparse in-memory index (one
// entry every WithIndexIntervalBytes, 4 KiB by default; there is no index
// file) is built on its first read, by walking it once. Every other
// segment, the last one always, is walked at open: its frames are read in
// 1 MiB chunks, each CRC checked, and the index built on the way. A walk
// stops at the first frame that is not intact: a length of zero, a length that runs past the end of the
// file, a CRC mismatch, or a body that does not decode or holds the wrong
// offset. No length, count or offset read from a file sizes a buffer
// before it is checked against what can be true: a frame's length must end
// inside the file, and a body larger than the walk's 1 MiB buffer must
// match its CRC32C, computed in 1 MiB pieces, before a buffer of its size
// is made (a real frame that large is read twice); the scan for intact
// frames behind a stop, Verify and ScanSegment do the same. A damaged
// length prefix, anywhere from 1 MiB to 2^32-1, costs a walk its buffers
// and at most a read of the rest of the segment, never an allocation of
// its size. Likewise an epoch file's count is bounded by the file's bytes,
// a seal marker's next offset by its segment's size (one record per 48
// bytes at most), and the recovery point and topic.json files are read no
// further than 4 KiB and 64 KiB (a larger one is corrupt). What a stop
// means is decided by where it is:
//
//   - In the last segment, with nothing intact behind it and at or above
//     the recovery point, it is the end of the log (a clean end of file or
//     the zero tail of a reserved segment, zeros only) or a torn tail, the
//     remains of an append a crash cut short (a bad frame, or a zero length
//     followed by non-zero bytes: a body stored without its length): the
//     tail is truncated (and the truncation forced to disk), the next
//     append reuses the offset, and Partition.Recovery reports the cut.
//   - In the last segment with an intact frame behind it (the file is
//     scanned on from the stop at every 8-byte boundary for a frame that
//     verifies and holds the expected offset or a later one), or below the
//     recovery point, or in an earlier segment (sealed segments were forced
//     to disk by their sealers before any sync of the next one), it is
//     corruption: opening
//     fails with a *CorruptError (ErrCorrupt) naming topic, partition,
//     segment, byte position and offset, unless the log was opened
//     WithRepair, which cuts there, deletes any later segments, lowers the
//     recovery point and reports how many records it dropped.
//
// Valid records are never dropped silently.
//
// A log opened ReadOnly judges the end of a partition's last segment by
// the same rules, without cutting anything: a stop of any kind, a zero
// length or a length past the end of the file as much as a CRC mismatch,
// with an intact frame behind it, and an end below the recovery point,
// fail the open with the same *CorruptError a writer's open returns;
// anything else is the end as far as the reader can tell, and later reads
// look again. The reader reads the recovery point before it lists the
// segments: a writer raises it only past frames already in the files, so
// everything below it must be there; before it reports an end below it,
// the reader lists the segments again (one the listing missed, or one
// created since, is walked) and reads the point again (lower now: a
// Truncate or repair, which lower it before they cut, not damage). A writer in another process
// may be appending there: a ModeMmap group write stores its frames' lengths
// one after the other while the reader's pread copies alongside, so the
// reader can see one frame's length still zero and later ones already
// stored, and a pwrite (ModeFile, or a ModeMmap group of 4 KiB or more)
// can be seen half done. So the open reads
// the stop again 20 ms later and reports damage only when the walk has not
// moved and the writer began no epoch meanwhile (a Truncate rewrites the
// tail after it records its epoch). The scan skips blocks of zeros at the
// speed of a compare and holes unread (SEEK_DATA), but reads the zero tail
// of a live reserved segment as far as the file system holds data for it:
// a read-only open of a live ModeMmap partition took 10 to 17 ms against
// 2 to 4 ms for ModeFile (an 8 MiB data region on ext4, 2-core machine
// under load, 2026-11-30).
//
// The recovery point, recovery-point.json in the partition folder, records
// the end of what is known to be on disk: segment base offset, byte
// position and offset. It is written after syncs, at most once a second,
// and by Close (temporary file, fsync, rename, fsync of the folder), so it
// costs nothing per append; it may lag the synced end by up to a second of
// appends. Truncate and repair lower it before they cut. A read-only open
// checks the end against it as a writer's does (see above).
//
// Trusting a marker moves the check of a sealed segment's frames from Open
// to its first read: a sealed segment damaged since it was sealed (a
// flipped byte on disk) opens, and its first read, the walk that builds its
// index, fails with the same *CorruptError, on every read of that segment
// until the log is reopened WithRepair, which walks every segment whatever
// the markers say. Opening 1 GiB of 64 B records took 0.002 s with markers
// (0.006 times a bare sequential CRC32C read of the same files) and 0.91 to
// 1.06 times that read without; of 1 KiB records, 0.001 to 0.03 s with
// markers (the last, 64 MiB segment is walked either way) and 0.68 to 1.05
// times the read without (BenchmarkRecovery, 2026-11-30, 2-core machine
// shared with other work; the parallel walk gains most when a core is
// free).
//
// # Seal markers
//
// When a segment is sealed at roll, its sealer goroutine forces its bytes
// and final size to disk, then writes a 56-byte marker to a temporary
// file, fsyncs it, renames it to <base>.sealed and fsyncs the directory;
// the roll removed any older marker of that name before it created the
// next segment. Little-endian, like frames:
//
//	 0  uint32  magic "SEAL" (0x4c414553)
//	 4  uint16  marker version (1)
//	 6  uint16  reserved (0)
//	 8  int64   base offset (the segment's name)
//	16  int64   next offset: one past the segment's last record
//	24  int64   size in bytes of the segment's frames (the file's size)
//	32  int64   byte position of the last frame (-1 for an empty segment)
//	40  [8]byte the last frame's length prefix and CRC, as in the file
//	48  uint32  CRC32C of bytes 0 to 47
//	52  uint32  padding (0)
//
// Open trusts a marker only for a segment below the last one, and only
// when its CRC, version and base match, the file's size is the recorded
// size, and the recorded header is found at the recorded position, ending
// exactly at that size; anything else (a missing, torn or stale marker, a
// file that grew or shrank) is walked instead. A marker that disagrees with
// the next segment's base gets its segment walked too. Markers whose
// segment is gone are removed by the Truncate or retention that deleted it
// and at open. A failure to write a marker does not fail the roll; the
// segment is walked at the next open, as is one whose process died before
// its sealer wrote the marker.
//
// # Epochs
//
// Every open of a partition for writing, and every Truncate that removes
// records, starts a new
// epoch at the partition's end, recorded (in Kafka's leader-epoch-checkpoint
// format: "epoch startOffset" lines) before anything is appended in it, and
// every record carries the epoch it was appended in (Record.Epoch). The open
// records it at once, or, when the disk is full, at the first append (which
// fails with ENOSPC while there is no room): a log that filled its disk
// still opens for writing, to be read, truncated or freed by retention. An epoch
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
// # Topic IDs
//
// Epochs count within one topic; a topic deleted (its folder removed) and
// created again under the same name starts again at offset 0 and epoch 0,
// and a consumer's saved (position, epoch) would pass as valid once the new
// topic holds more records, skipping its first ones. So every topic has an
// identity, Kafka's topic ID (KIP-516): 16 random bytes drawn by
// CreateTopic and stored in topic.json ("id", 22 characters of unpadded
// URL-safe base64, as Kafka prints them), returned by Topic.ID and saved
// with every checkpointed position (checkpoint.Position.TopicID), so a
// source resuming from a position of another incarnation of the topic
// notices it (source.ErrTopicRecreated).
//
// A topic created by a version of strom before topic IDs has no "id": it
// opens as before, with the zero TopicID (unknown, not checked), until a
// process opens it for writing (its first append, LockWriter, WriteTopic or
// CreateTopic), which draws an ID and rewrites topic.json with it
// (temporary file, fsync, rename, directory fsync). A reader that opened
// the topic before goes on seeing the zero ID until it opens the topic
// again. Versions of strom before topic IDs refuse a topic.json with an
// "id" (ErrCorruptMetadata: an unknown field), as they refuse one with a
// retention bound.
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
//     process dies before that write: under a steady load of AckNone
//     appenders, up to 4 MiB of accepted frames per partition (the bound on
//     what may wait) can be lost that way. After the write they are exposed
//     like AckWritten records. A write error is
//     returned by the next append, Sync or Close.
//   - AckWritten: the records are in the operating system's page cache.
//     Readers, also in other processes, see them; they survive the death
//     of the writing process (a panic, SIGKILL), but a kernel crash or
//     power loss loses those not yet synced.
//   - AckSynced: the records are on stable storage. A sync that began after
//     they were written has completed (fdatasync for ModeFile, msync with
//     MS_SYNC for ModeMmap), the segments before theirs were synced by
//     their sealers, and their segment's directory entry was fsynced
//     (by the previous segment's sealer, or when the partition was
//     created) before anything in it was acked. They survive power loss, as far as the disk honours cache
//     flushes.
//
// The loss window of AckNone and AckWritten records, on a crash of the
// machine, is everything written since the last sync. Syncs happen on
// Partition.Sync and Topic.Sync, an AckSynced append, a segment roll (the
// full segment is synced by a sealer goroutine after its successor is
// created) and Close (which writes what AckNone accepted and syncs it).
// Every sync of the active segment first waits for the sealers of the
// segments before it, so a synced record has every record below it on disk,
// and a sealed segment's records count as synced (recovery point, seal
// marker) only once its sealer is done. A process killed meanwhile loses
// nothing (the page cache holds the full segment); a power failure during a
// sealer's sync can damage that segment's records, which no sync had
// covered, and recovery reports that as corruption of the segment, as for
// the active segment's unsynced pages (WithRepair cuts it). Without a flush policy, the
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
// Follow never ends. Reading below the log start offset or above the high
// watermark is ErrOffsetOutOfRange.
//
// In-process appends wake followers at once. A follower in a process that
// opened the log ReadOnly sleeps on inotify, through one inotify instance
// per process: a watch on the partition directory wakes it for a ModeFile
// append (its pwrite raises IN_MODIFY) and a new segment (IN_CREATE). A
// ModeMmap append raises nothing (stores into a shared mapping are
// invisible to inotify), so followers and writer share follow.waiters, a
// 64-byte file both map: byte 0 is a uint32 flag a follower sets to 1
// (after watching the file for IN_ACCESS, before its last look for new
// records), and the writer, after each append, clears it when set and
// reads one byte of the file, which wakes every watcher; the other bytes
// are reserved. Sequentially consistent atomics on both sides make a lost
// wake-up impossible, and an appender pays one atomic load per Append while
// nobody waits. A follower also looks every WithPollInterval (100 ms)
// whatever happens, the only wake-up where inotify is missing or blind
// (network file systems) or the process may not write follow.waiters.
// Measured from an Append in one process to Next returning it in another:
// p50 0.13 to 0.16 ms, p99 1.0 to 1.8 ms (BenchmarkFollowLatency,
// 2026-11-30, 2-core machine under load).
//
// A read preads its segment into a pooled buffer, checks every frame's
// CRC32C there, and copies the frames of the batch it returns into one
// buffer of exactly their size, which the records' keys, values and headers
// alias (their []Header carved from one slice per batch): a batch costs one
// allocation, two with headers, never one per record, and its records stay
// valid for as long as they are kept. Reader.NextInto also reuses the
// caller's []Record, and Reader.SetReuseBytes reads into the Reader's own
// buffer, overwritten by the next call, for loops that finish each batch
// before the next read (one 1 MiB batch of 64 B records: 1 allocation and
// 0.94 MB by default, none with reuse, 2 to 5 times faster;
// BenchmarkReaderNextInto).
//
// Reads pread the segment
// without holding the partition lock (see "Retention" for how a segment
// outlives its deletion while a read is in it); a read that overlapped a
// Truncate reads again. A read-only reader cannot see the writer's
// Truncate begin: a read of frames it verified that the writer then cut
// and rewrote finds them changed, so before it reports that as a
// *CorruptError it reloads the epoch file, at once and again 20 ms later
// (a Truncate records its epoch after it cuts), and reads again from disk
// when the writer began an epoch below what it had walked.
//
// # Readers and writers in one process
//
// Open a directory once per process, read-write, whatever the process
// does with it. Log.Topic takes no lock: a topic is read exactly as through
// a Log opened ReadOnly (refreshed on every read, followed through inotify,
// retention deletions noticed) until the process first writes it: Append,
// AppendAck, AppendBatch, AppendBatchAck, Truncate, EnforceRetention or
// CreateTopic on it, or Topic.LockWriter and Log.WriteTopic, which ask for
// the lock outright. That first write takes the topic's writer lock; when
// another process holds it, the write fails with a *LockedError naming its
// pid, nothing changes and reading goes on. Otherwise every partition is
// switched in place, under its lock, from following to writing: the
// followed segments are let go (reads in flight finish with them, then
// read again), and the open of a writer runs (recovery point, torn tail
// cut, corruption checks, a new epoch) before the first append. *Topic,
// *Partition and Reader values stay valid across the switch. So a process
// can read topic A, written by another process, and write topic B with one
// Log; and it can take A over once its writer is gone.
//
// Recovery (a torn tail cut, a new epoch) therefore comes at the first
// write of a topic opened with Log.Topic, while the *CorruptError of damage
// (an end below the recovery point included) comes at Log.Topic already, as
// through a ReadOnly log; Log.WriteTopic opens, locks and
// recovers at once, as Log.Topic did before this rule. The background
// retention check of a read-write Log applies only to the topics it holds
// the lock of.
//
// # Retention
//
// A topic may bound how much each partition keeps, by size and by age, as
// Kafka's retention.bytes and retention.ms do. CreateTopic takes the bounds
// as options and stores them in topic.json beside the partition count:
//
//	lg.CreateTopic("events", 3, log.RetentionBytes(1<<30), log.Retention(7*24*time.Hour))
//	{"version":1,"name":"events","partitions":3,"retentionBytes":1073741824,"retentionMs":604800000,"id":"ZtbcOJ8_SA-ji9PcQpfNBw"}
//
// Both fields are optional; absent or -1 means unlimited, the default. Calling
// CreateTopic again on an existing topic with either option replaces that
// bound (the file is rewritten: temporary file, fsync, rename, directory
// fsync); options not given keep their stored value.
//
// Retention deletes whole segments, oldest first, and never the active one
// (the one appends go to). A check looks at the oldest segment and deletes it
// when either bound wants it gone, then looks at the next, and stops at the
// first segment that stays:
//
//   - by age: the segment's newest record timestamp is more than the bound
//     before the time of the check. The newest timestamp, not the file's
//     modification time, because record timestamps are what the user sees
//     and set (a backfill appends old timestamps today), they survive a copy
//     of the directory, and they are free to keep: recovery decodes every
//     frame anyway and appends know the timestamp they write. A single
//     recent record keeps its whole segment.
//   - but never by a timestamp ahead of the clock: a segment whose newest
//     timestamp lies ahead of the time of the check is aged by its file's
//     modification time instead (the fallback Kafka chose), and an mtime
//     ahead of the check too makes it younger than any bound. So one record
//     stamped ten years ahead, already on disk, cannot pin its segment and
//     every segment after it, and a clock stepped backwards deletes nothing
//     early: a segment whose records are all newer than the (stepped back)
//     clock stays unless its file was last written more than the bound
//     before that clock.
//   - by size: what would remain after deleting it still holds at least the
//     bound, so a partition keeps between the bound and the bound plus one
//     segment (Kafka's rule). A bound of 0 keeps only the active segment.
//
// Each deletion takes the segment out of the partition's list under the
// partition lock, unlinks the file, and fsyncs the directory before the next
// one, so a crash can leave an older segment only together with every newer
// one: the remaining segments are always contiguous. The log start offset
// rises to the base offset of the oldest segment left. Because the active
// segment is never deleted and its file name is its base offset, emptying a
// partition never moves its next offset backwards, also across a restart.
//
// Time the log trusts: an append refuses a record whose timestamp is more
// than WithMaxTimestampAhead (one hour by default, Kafka's KIP-937; 0 turns
// the check off) ahead of the writer's clock, with a *TimestampAheadError
// (ErrTimestampAhead), and stores none of that call's records. A topic
// created with WithTimestampType(LogAppendTime) stores the writer's clock
// instead of the record's timestamp ("timestampType":"LogAppendTime" in
// topic.json; absent means CreateTime, the default).
//
// A writable Log checks every topic it has open every
// WithRetentionCheckInterval (5 minutes by default, Kafka's
// log.retention.check.interval.ms; 0 disables it) in one background
// goroutine that Close stops; WithRetentionObserver receives what each check
// deleted and its errors. Topic.EnforceRetention applies the policy at once,
// as of a given time, and reports what it deleted. A log opened ReadOnly
// never deletes.
//
// Readers and deletion: a segment's descriptor is reference counted. A read
// takes a reference under the partition lock and preads without it (so
// appends are not blocked by reads), and the last of the partition and the
// reads in flight to let go closes the descriptor. A read in a segment that
// retention unlinks therefore finishes with the segment's bytes; the next
// read below the new log start offset gets an *OffsetOutOfRangeError whose
// StartOffset is the new start. A reader in another process (a log opened
// ReadOnly) notices that leading segments are gone (their files have no link
// left) when a read falls in its first segment, on every StartOffset, and at
// least every second otherwise, and then reports the writer's log start
// offset and closes the deleted files, which frees their disk space.
//
// # Compaction
//
// A topic of cleanup policy CleanupCompact or CleanupCompactDelete
// (WithCleanupPolicy, Kafka's cleanup.policy) keeps the latest record of
// each key, as Kafka's log cleaner does, in passes over a
// partition's sealed segments (the active segment is never compacted):
//
//  1. Map: walk the sealed segments from the cleaner's checkpoint (where
//     the last pass stopped mapping, the dirty section) and note the last
//     offset of every key, within 64 MiB of map (whole segments; at least
//     one).
//  2. Clean: rewrite every sealed segment from the log start to the end of
//     the mapped section, keeping a record unless the map holds a later
//     offset for its key, and unless it is a tombstone (a nil Value) that
//     a pass first kept more than TombstoneRetention ago (the compacted
//     flag carries that time; a pass that keeps tombstones in a segment it
//     does not rewrite writes the flag for it). Kept frames
//     are copied byte for byte: offsets, CRCs, timestamps and headers are
//     unchanged. A segment that loses nothing is left as it is.
//  3. Swap, per segment: the cleaned copy is written to <base>.cleaned and
//     fsynced; the compacted flag (compacted.go) is written; then under the
//     partition lock, if no Truncate ran and the segment is still there
//     (retention), the seal marker is removed, the copy renamed over
//     <base>.log and put in the segment set; the directory is fsynced and a
//     new seal marker written.
//  4. The checkpoint moves to the end of the mapped section.
//
// Appends never wait for a pass: only the rename and the swap in the set
// take the partition lock. Reads in flight keep the old file (its
// descriptor is reference counted) and read the same offsets; a read-only
// log in another process notices the replacement (refresher). A crash at
// any step leaves either the old file or the cleaned one under the
// segment's name, both whole; the flag is on disk before the rename; a
// leftover <base>.cleaned is removed by the writer's next open
// (removeOrphanMarkers). TestCompactionKilledAtEachFileOperation kills a
// pass at each of its file operations.
//
// Offsets never change: a compacted segment skips the offsets of the
// records removed, and its compacted flag says so (a gap in any other
// segment is corruption, as before) and where the segment ends, so that it
// still meets its successor's base offset when its last records went. A
// read from an offset that was removed returns the records from the next
// one kept, as Kafka's fetch does; compaction never moves the log start
// offset or the high watermark. Every record appended to a compacted topic needs a
// key (ErrKeyRequired); a tombstone is a record with a nil Value, kept for
// TombstoneRetention (Kafka's delete.retention.ms, 24 hours) after the
// pass that first kept it, so a consumer reading from the start sees the
// deletion. A writable Log runs passes in the background every
// WithCleanerInterval (15 s) over the partitions whose dirty ratio (sealed
// bytes not yet mapped over all sealed bytes) is at least 0.5, Kafka's
// min.cleanable.dirty.ratio; Topic.Compact runs one now; Topic.CleanerStates
// reports where each partition stands. CleanupCompact alone applies no
// retention bounds; CleanupCompactDelete applies them too. A Truncate waits
// for a pass in progress and refuses (ErrCompacted) to cut below the end
// of a section a pass mapped: a record there may have replaced one the
// pass removed. Kafka's cleaner stops at the high watermark, below which
// Kafka never truncates; strom's Truncate can cut anywhere, so the
// cleaner's reach bounds it instead. (An exactly-once log sink aborting a
// transaction on a compacted topic is therefore refused once a pass mapped
// the aborted records; the background cleaner only maps sealed segments.)
//
// # Partitioning
//
// Topic.Append picks the partition from the record's key with Kafka's
// default partitioner (murmur2, sign bit masked, modulo the partition
// count), so a key lands in the same partition number here and in Kafka.
// Records with a nil key go round-robin. Topic.PartitionFor answers where a
// record would go without moving the round-robin counter.
//
// # Metrics
//
// A Log reports to an OpenTelemetry MeterProvider (go.opentelemetry.io/otel):
// the one given with WithMeterProvider, else the global one as Open finds it
// (otel.GetMeterProvider()), which discards everything until the program
// installs a provider (otel.SetMeterProvider). The meter is named
// ScopeName. Each metric has one series per partition this process can
// write (a topic it created or locked), with the attributes
// messaging.system="strom", messaging.operation.name="append",
// messaging.destination.name (the topic) and
// messaging.destination.partition.id (the partition number, as a string):
//
//	name                            instrument           unit       what it counts
//	messaging.client.sent.messages  counter (async)      {message}  records appended by this process since Open, counted when written to the page cache
//	strom.log.bytes                 counter (async)      By         bytes of those records' frames (header, body, padding): what they take on disk
//	strom.log.syncs                 counter (async)      {sync}     syncs of the active segment (AckSynced rounds, Sync, the flush policy, Close); a roll's sync of the segment it seals is not counted
//	strom.log.sync.duration         histogram            s          one value per sync counted above: the fdatasync (ModeFile) or msync (ModeMmap)
//
// The counters cost an append nothing: the writer counts records and bytes
// once per group write (one atomic add each, not one per record), and the
// callback reads them when a reader collects. The sync duration is recorded
// once per sync, and not even timed while no reader wants it
// (Float64Histogram.Enabled). Close unregisters the callback. Measured
// on this project's 2-core machine with no provider installed
// (BenchmarkTopicAppendBatch, BenchmarkSegmentAppend and
// BenchmarkSyncedAppend, ModeMmap, 64 B records, 2026-11-30, run
// alternately against the code before metrics): the same allocs/op and
// B/op, and ns/op within the run-to-run spread.
//
// # Inside a partition
//
// A Partition is the public face of parts with one job each, as Kafka's
// UnifiedLog sits over LocalLog, LogSegments and the leader-epoch cache.
// The parts reach each other through method calls and small interfaces,
// never through each other's fields; Partition composes them, and its
// methods are each a few lines that call into them:
//
//	part            file                     owns
//	segmentSet      segments.go              the segments in offset order: lookup by offset, create, roll, write frames, drop from the front (retention) or the back (Truncate); the walk buffer
//	segment         segment.go               one file: its descriptor (reference counted), write path, sparse index, frame walks and reads
//	groupWriter     writer.go, syncer.go     group commit (the writer role), acks, sync rounds, the flusher, the sealers of rolled segments (roll.go); reaches the segments only through frameStore
//	writeStats      telemetry.go             the writer's counters (syncs, writes, records and bytes) and sync durations, for the metrics and the tests
//	recoveryPoints  recoverypoint.go         the recovery point file: what is known synced, saved at most once a second
//	epochCache      epoch_cache.go           the epoch history and its file (KIP-320), reloaded by a read-only partition when the writer replaced it
//	recovery        recovery.go, tail.go     one open's walk of the segments: torn tail, corruption, repair, read-only checks (prewalk.go walks in parallel)
//	refresher       readonly.go              a read-only partition's looks at the writer's files: new frames and segments, deleted leading segments, a reset after a rewrite (and its read-only recovery), the recheck of a read that raced the writer's Truncate
//	crossProcess    follow.go                inotify watches and the waiters file that wake followers in other processes
//	waiters         wait.go                  in-process wake-ups of followers
//	retention       retention.go             one retention check at a time, deleting through the partition (retentionTarget)
//	cleaner         cleaner.go, compacted.go compaction passes: map keys, copy kept frames, swap the copy in through the partition (cleanerTarget); compacted flags
//
// Lock order: an arrow reads "may be held while taking"; no lock is taken
// against an arrow:
//
//	Topic.lockMu -> Partition.mu -> groupWriter.segMu -> groupWriter.mu
//	retention.mu -> Partition.mu (a retention check, a cleaner pass)
//	retention.mu -> the writer role -> Partition.mu (Truncate waits for a pass)
//	Partition.mu -> crossProcess.mu
//	Partition.mu -> recoveryPoints.mu (Truncate lowers the point)
//	Partition.mu -> lazyIndex.mu (Truncate finds its cut in a segment whose index is unbuilt)
//	waiters.mu: taken alone
//
// Partition.mu guards the segment set, the epoch history, the refresher and
// the recovery report; the segment set, the epoch cache, the refresher and
// a recovery have no lock of their own. groupWriter.mu is never held during
// I/O, and nothing takes Partition.mu or segMu while holding it: the writer
// role releases it around every write (frameStore.writeFrames takes
// Partition.mu), and the recovery point is saved after it is released. A
// crossProcess event releases crossProcess.mu before it refreshes the
// partition (Partition.mu). TestStressEveryPartOfAPartitionAtOnceUnderTheRaceDetector
// runs every part at once under the race detector: a cycle would hang it.
//
// Partition's own methods are its public API and the places that take
// Partition.mu around a part: open and upgrade to a writer
// (becomeWriterLocked), close, writable, the read path (readInto, acquire:
// the segment is read without the lock), the writer's frameStore
// (writeFrames), the refresher's runs (refresh), retention's unlink
// (unlinkOldest), the epoch step back of a Reader (stepBack), and the
// publishing of a new end to waiters (publishLocked, wait).
package log
