package checkpoint

import "errors"

var (
	// ErrCorrupt is returned by [FileStore.Load] when a position file exists but
	// does not hold exactly one valid position record (empty, NUL bytes,
	// truncated or malformed JSON, unknown fields, wrong version, a topic or
	// partition other than the one asked for, a negative position), and by
	// [FileStore.LoadState] when a state file exists but is not one whole
	// snapshot (shorter than its header, bad magic, unknown version, a body
	// length other than the file holds, a CRC32C mismatch), and by both when
	// the file is a symbolic link or a special file such as a FIFO (the store
	// writes only regular files, and is never led by a link to read elsewhere
	// or to wait on a FIFO; a directory is an I/O error). The returned error
	// names the file and says what is wrong with it; test for it with
	// errors.Is. A corrupt checkpoint is never reported as "not found".
	ErrCorrupt = errors.New("checkpoint: corrupt position file")

	// ErrInvalidTopic is returned by Load and Save of the stores in this
	// package when the topic name breaks Kafka's rule: 1 to 249 characters
	// from [a-zA-Z0-9._-], and not "." or "..". The returned error names the
	// topic.
	ErrInvalidTopic = errors.New("checkpoint: invalid topic")

	// ErrInvalidStateName is returned by SaveState and LoadState of the
	// stores in this package when a state name breaks the rule topic names
	// follow (1 to 249 characters from [a-zA-Z0-9._-], and not "." or ".."),
	// which keeps the state file inside the store's directory. It is a
	// sentinel of its own, not [ErrInvalidTopic], because a state name is not
	// a topic. The returned error names the name.
	ErrInvalidStateName = errors.New("checkpoint: invalid state name")

	// ErrInvalidPosition is returned by Save of the stores in this package
	// when the position or the partition is negative. The returned error
	// gives the value.
	ErrInvalidPosition = errors.New("checkpoint: invalid position")
)
