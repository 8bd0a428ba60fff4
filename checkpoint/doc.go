// Package checkpoint keeps a consumer's position per topic-partition, so that a
// pipeline restarted after a crash or a deploy goes on where it left off.
//
// # Positions
//
// A position is the offset a consumer will read next, never the last offset it
// handled: after handling offsets 0 to 40 of partition 0 of "events", a consumer
// saves 41. Loading 41 means "start reading at 41". A topic-partition that was
// never saved has no position; [Store.Load] reports found == false and the
// caller picks where to start (usually the log start offset).
//
// A [Position] also carries the epoch of the last record handled (Kafka's
// leader epoch, KIP-320). The log starts a new epoch each time it is opened
// for writing and each time it is truncated; a source resuming from a
// position asks the log where the saved epoch ended and resumes there when
// that is below the saved offset, so records appended at offsets reused after
// a crash recovery are handled, not skipped.
//
// It carries the identity of the topic too ([TopicID], Kafka's topic ID of
// KIP-516; log.Topic.ID): a topic deleted and created again under the same
// name has another ID, and its offsets count other records, so a source
// resuming from a position of the old topic does not trust the offset (see
// source.ErrTopicRecreated) where it would otherwise skip the new topic's
// first records. A position without a topic ID (saved before topic IDs, or
// by a source without them) is trusted as it is.
//
// strom saves a position only after every record below it has been completely
// handled (see package stream), which makes delivery at-least-once: a crash
// between handling a record and saving its position replays it, and nothing is
// ever skipped. For the same reason a checkpoint that cannot be read is an
// error, never "not found": starting over from the beginning would replay
// everything, and starting from the end would skip records.
//
// # FileStore format and durability
//
// [FileStore] keeps one file per topic-partition in its directory, named
// <topic>-<partition>.position (for example events-0.position). Topic names
// follow Kafka's rule ([a-zA-Z0-9._-], 1 to 249 characters, not "." or ".."),
// so a name can never leave the directory; any other name is rejected with
// [ErrInvalidTopic], and so is a topic so long that its file name would pass
// the 255-byte file-name limit of common filesystems (topics up to 235 bytes
// always fit). The file holds one line of JSON and a newline; version 1 for
// a position without a topic ID, version 2 for one with:
//
//	{"version":1,"topic":"events","partition":0,"position":41,"epoch":2}
//	{"version":2,"topic":"events","partition":0,"position":41,"epoch":2,"topicId":"ZtbcOJ8_SA-ji9PcQpfNBw"}
//
// A position without a topic ID keeps version 1, the format of versions of
// strom before topic IDs, which can then still read it; they refuse a
// version 2 file (corrupt: its version). Load reads both strictly: exactly
// the bytes Save writes (in version 1 epoch may be absent, and then reads
// as [NoEpoch]; no spaces, no duplicate or differently cased keys),
// optionally followed by one newline, the topic and partition of the file
// name, a position >= 0, an epoch >= -1, and in version 2 a topic ID of 22
// characters of unpadded URL-safe base64 (see [TopicID]); a version 1 file
// loads with the zero TopicID, unknown, which a source trusts as positions
// were trusted before topic IDs. Anything else (an empty
// file, NUL bytes left by a crash, truncated JSON, a file of another topic) is
// an error wrapping [ErrCorrupt] and naming the file:
//
//	checkpoint: corrupt position file /var/lib/app/events-0.position: empty file
//
// Save never modifies a position file in place. It writes the new content to a
// temporary file in the same directory (.<topic>-<partition>.position.tmp-*,
// the name cut short for very long topics),
// fsyncs it, closes it, renames it over the position file and fsyncs the
// directory, so that after a crash the file holds either the old position or
// the new one, whole. Save returns after the directory fsync: a position it
// saved survives a power loss. A crash mid-save can leave a temporary file
// behind; Load never reads temporary files and they do not block later saves,
// so they are harmless and may be deleted by hand. Position files are created
// with mode 0600.
//
// One FileStore is safe for concurrent use. Two processes saving the same
// topic-partition in the same directory do not corrupt the file (the last
// rename wins), but strom expects one consumer per topic-partition and store.
//
// # State snapshots
//
// A pipeline's stateful stages (windows, per-key aggregates) keep their state
// through a [StateStore]: SaveState stores an opaque snapshot (bytes) under a
// name, LoadState returns it when the pipeline starts. The store never looks
// inside a snapshot. Names follow the rule of topic names; any other name is
// rejected with [ErrInvalidStateName].
//
// [FileStore] keeps each snapshot in dir/<name>.state (a 249-byte name gives a
// 255-byte file name, so every valid name fits). The file is a 24-byte header
// and the body, all integers little-endian:
//
//	offset  size  field
//	     0     8  magic "STROMST\x00" (53 54 52 4f 4d 53 54 00)
//	     8     4  format version, uint32: 1
//	    12     8  body length in bytes, uint64
//	    20     4  CRC32C (Castagnoli) of the body, uint32
//	    24     n  body: the snapshot as given to SaveState (n may be 0)
//
// LoadState checks the file before trusting it: a file that is empty or
// shorter than the header, has another magic or version, whose body length
// differs from what the file holds after the header (either way), or whose
// body does not match the CRC is an error wrapping [ErrCorrupt] and naming the
// file:
//
//	checkpoint: corrupt state file /var/lib/app/window.state: header gives a 4096-byte body, the file holds 100 bytes after the header (truncated)
//
// The body is read into a buffer sized by the file's size, once the header's
// length has been found equal to it, so a damaged header never makes
// LoadState allocate more than the file holds. There is no limit on a
// snapshot's size.
//
// SaveState replaces the file as Save does (temporary file
// .<name>.state.tmp-*, fsync, close, rename, directory fsync) and returns after
// the directory fsync, so that after a crash LoadState returns the old
// snapshot or the new one, whole, and a snapshot SaveState saved survives a
// power loss. A snapshot and the positions it reflects are separate files,
// each replaced atomically on its own, not together: a crash between
// SaveState and the Save that follows it leaves the new snapshot beside the
// old positions, and a caller that must tell the two apart keeps the
// positions it reflects inside the snapshot. [FileStore.List] skips state
// files.
//
// # MemoryStore
//
// [MemoryStore] keeps positions and state snapshots in maps. Make one with
// [NewMemoryStore], beside [NewFileStore]; its zero value is ready to use as
// well. It is safe for concurrent use. It forgets everything
// when the process exits, so it serves tests, and consumers that choose to
// start from a fixed place on every run.
package checkpoint
