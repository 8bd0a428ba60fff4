package service

// PublisherStats is the JSON body of the publisher's GET /stats.
type PublisherStats struct {
	// Topic is the topic the publisher writes.
	Topic string `json:"topic"`
	// Sent counts the records this process appended, all partitions together.
	Sent int64 `json:"sent"`
	// PerPartition[p] counts the records this process appended to partition p.
	PerPartition []int64 `json:"perPartition"`
	// LastOffset[p] is the offset of the last record this process appended to partition p,
	// -1 when it appended none.
	LastOffset []int64 `json:"lastOffset"`
	// NextOffset[p] is partition p's high watermark (next offset) when the stats were read,
	// records appended before this process started included.
	NextOffset []int64 `json:"nextOffset"`
	// Stopped is true once the publisher has stopped sending: POST /stop, --count reached,
	// or the end of the --input file.
	Stopped bool `json:"stopped"`
}

// ConsumerStats is the JSON body of the consumer's GET /stats. Pointer fields are JSON null
// when the value does not exist yet.
type ConsumerStats struct {
	// Name is the consumer's --name.
	Name string `json:"name"`
	// Topic is the topic it reads.
	Topic string `json:"topic"`
	// Partition is the partition it reads.
	Partition int32 `json:"partition"`
	// Handled counts the records this process handled (replays included).
	Handled int64 `json:"handled"`
	// Position is the last position saved by this process (the next offset to read), or the
	// position it resumed from before it saved any; null when there is neither.
	Position *int64 `json:"position"`
	// Lag is the partition's high watermark minus Position (minus the log start offset while
	// Position is null); null while the topic does not exist.
	Lag *int64 `json:"lag"`
	// ResumedFrom is the offset the consumer resumed reading at: the position loaded from the
	// checkpoint store at startup, or, once the source has opened the partition, where it
	// reset that position when it was no longer there (below the log start, or saved against a
	// topic since deleted and created again: 0 then, its start); null on a first run (nothing
	// saved yet).
	ResumedFrom *int64 `json:"resumedFrom"`
	// Reconnects counts source failures the consumer backed off from and resumed after
	// (a topic that does not exist yet counts too).
	Reconnects int64 `json:"reconnects"`
	// LastRecord is the last record handled, null before the first.
	LastRecord *RecordView `json:"lastRecord"`
}

// RecordView is a record as the consumer reports it.
type RecordView struct {
	// Offset is the record's offset in its partition.
	Offset int64 `json:"offset"`
	// Key is the record's key as a string, null for a nil key.
	Key *string `json:"key"`
	// Value is the record's value as a string.
	Value string `json:"value"`
}

// OutLine is one line of the consumer's --out file: one JSON object per handled record,
// written before the handler returns, so the file proves which records were handled.
type OutLine struct {
	// Partition is the record's partition.
	Partition int32 `json:"partition"`
	// Offset is the record's offset.
	Offset int64 `json:"offset"`
	// Key is the record's key as a string, null for a nil key.
	Key *string `json:"key"`
	// Value is the record's value as a string.
	Value string `json:"value"`
}
