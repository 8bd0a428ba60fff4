package checkpoint

import (
	"context"
	"fmt"
)

// Store keeps a consumer's position (the NEXT offset to read) per
// topic-partition.
//
// Implementations must be safe for concurrent use. A Save that returns nil
// must be visible to every later Load; whether it also survives a crash is the
// implementation's to document ([FileStore]: yes; [MemoryStore]: no).
type Store interface {
	// Load returns (position, true, nil) when found, (0, false, nil) when never
	// saved, (0, false, err) on failure (a corrupt file is ErrCorrupt naming the
	// path).
	Load(ctx context.Context, topic string, partition int32) (position int64, found bool, err error)

	// Save records position as the next offset to read from topic-partition,
	// replacing any earlier position. It returns an error when the position
	// could not be stored; the caller must then assume nothing was stored.
	Save(ctx context.Context, topic string, partition int32, position int64) error
}

// maxTopicLen is Kafka's limit on the length of a topic name, in bytes.
const maxTopicLen = 249

// validateTopic checks topic against Kafka's naming rule, which also
// guarantees that a file named after it stays inside the store's directory.
func validateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w %q: empty", ErrInvalidTopic, topic)
	case topic == "." || topic == "..":
		return fmt.Errorf("%w %q: not allowed", ErrInvalidTopic, topic)
	case len(topic) > maxTopicLen:
		return fmt.Errorf("%w %q: %d bytes, the limit is %d", ErrInvalidTopic, topic, len(topic), maxTopicLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w %q: character %q at byte %d is not one of [a-zA-Z0-9._-]",
				ErrInvalidTopic, topic, c, i)
		}
	}
	return nil
}

// validateKey checks a topic-partition for Load and Save.
func validateKey(topic string, partition int32) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	if partition < 0 {
		return fmt.Errorf("%w: partition %d of topic %q is negative", ErrInvalidPosition, partition, topic)
	}
	return nil
}

// validateSave checks the arguments of Save.
func validateSave(topic string, partition int32, position int64) error {
	if err := validateKey(topic, partition); err != nil {
		return err
	}
	if position < 0 {
		return fmt.Errorf("%w: position %d for %s-%d is negative", ErrInvalidPosition, position, topic, partition)
	}
	return nil
}
