package checkpoint

import (
	"context"
	"sync"
)

// MemoryStore is a [Store] that keeps positions in memory. The zero value is
// ready to use, and a MemoryStore is safe for concurrent use. Positions are
// lost when the process exits. A MemoryStore must not be copied after first
// use.
type MemoryStore struct {
	mu        sync.Mutex
	positions map[memoryKey]Position // guarded by mu; nil until the first Save
}

type memoryKey struct {
	topic     string
	partition int32
}

// Load returns the position last saved for topic-partition. It returns
// (Position{}, false, nil) when none was saved, and an error wrapping [ErrInvalidTopic]
// or [ErrInvalidPosition] for an invalid topic or a negative partition.
func (m *MemoryStore) Load(_ context.Context, topic string, partition int32) (Position, bool, error) {
	if err := validateKey(topic, partition); err != nil {
		return Position{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pos, ok := m.positions[memoryKey{topic, partition}]
	return pos, ok, nil
}

// Save records position for topic-partition. It returns an error wrapping
// [ErrInvalidTopic] or [ErrInvalidPosition] for an invalid topic, a negative
// partition or a negative position, and stores nothing in that case.
func (m *MemoryStore) Save(_ context.Context, topic string, partition int32, position Position) error {
	if err := validateSave(topic, partition, position); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.positions == nil {
		m.positions = make(map[memoryKey]Position)
	}
	m.positions[memoryKey{topic, partition}] = position
	return nil
}
