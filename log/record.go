package log

// Header is one key/value pair attached to a record. Headers keep their
// order; a key may repeat, as in Kafka.
type Header struct {
	Key   string
	Value []byte // nil and empty are stored and returned distinctly
}

// Record is one entry of a partition.
//
// When appending, only Key, Value, Timestamp and Headers are read; the log
// sets Topic, Partition and Offset on the records it returns from reads.
type Record struct {
	// Key picks the partition on Topic.Append (Kafka's murmur2). nil and an
	// empty slice are different: nil means "no key" (round-robin), an empty
	// key hashes like any other.
	Key []byte
	// Value is the payload. It may be empty. On a compacted topic a nil
	// Value is a tombstone (it deletes its key, see "Compaction" in the
	// package doc); an empty non-nil one is data.
	Value []byte
	// Timestamp is in milliseconds since the Unix epoch, as Kafka's. Zero on
	// append means "now".
	Timestamp int64
	// Headers are ordered key/value pairs.
	Headers []Header

	// Topic is set by readers to the topic the record was read from.
	Topic string
	// Partition is set by readers.
	Partition int32
	// Offset is set by readers: the record's 0-based index in its partition.
	Offset int64
	// Epoch is set by readers: the partition's epoch when the record was
	// appended (see Partition.Epoch). A checkpoint saves it with the
	// position so a resume can tell offsets reused after a crash recovery.
	Epoch int32
}
