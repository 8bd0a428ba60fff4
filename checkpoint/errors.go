package checkpoint

import "errors"

var (
	// ErrCorrupt is returned by [FileStore.Load] when a position file exists but
	// does not hold exactly one valid position record (empty, NUL bytes,
	// truncated or malformed JSON, unknown fields, wrong version, a topic or
	// partition other than the one asked for, a negative position). The
	// returned error names the file and says what is wrong with it; test for it
	// with errors.Is. A corrupt checkpoint is never reported as "not found".
	ErrCorrupt = errors.New("checkpoint: corrupt position file")

	// ErrInvalidTopic is returned by Load and Save of the stores in this
	// package when the topic name breaks Kafka's rule: 1 to 249 characters
	// from [a-zA-Z0-9._-], and not "." or "..". The returned error names the
	// topic.
	ErrInvalidTopic = errors.New("checkpoint: invalid topic")

	// ErrInvalidPosition is returned by Save of the stores in this package
	// when the position or the partition is negative. The returned error
	// gives the value.
	ErrInvalidPosition = errors.New("checkpoint: invalid position")
)
