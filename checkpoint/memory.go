package checkpoint

import (
	"context"
	"sync"
)

// MemoryStore is a [Store] and a [StateStore] that keeps positions and state
// snapshots in memory. The zero value is ready to use, and a MemoryStore is
// safe for concurrent use. Positions and snapshots are lost when the process
// exits. A MemoryStore must not be copied after first use.
type MemoryStore struct {
	mu        sync.Mutex
	positions map[memoryKey]Position // guarded by mu; nil until the first Save
	states    map[string][]byte      // guarded by mu; nil until the first SaveState; owned copies
}

// NewMemoryStore returns an empty MemoryStore, for symmetry with
// [NewFileStore]: swapping one store for the other is a one-line change.
// It cannot fail. The zero value works as well (var store MemoryStore, or
// &MemoryStore{}); NewMemoryStore is the same thing, already a pointer.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// The interfaces a MemoryStore implements.
var _ StateStore = (*MemoryStore)(nil)

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

// SaveState keeps a copy of state under name, replacing any earlier
// snapshot (checkpoint.StateStore); the caller may reuse state once it
// returns. It returns an error wrapping [ErrInvalidStateName] for an invalid
// name, and stores nothing in that case. Like Save it ignores ctx: it never
// blocks.
func (m *MemoryStore) SaveState(_ context.Context, name string, state []byte) error {
	if err := validateName(ErrInvalidStateName, name); err != nil {
		return err
	}
	snapshot := append(make([]byte, 0, len(state)), state...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = make(map[string][]byte)
	}
	m.states[name] = snapshot
	return nil
}

// LoadState returns a copy of the snapshot last saved under name, non-nil
// when found (checkpoint.StateStore). It returns (nil, false, nil) when none
// was saved, and an error wrapping [ErrInvalidStateName] for an invalid name.
func (m *MemoryStore) LoadState(_ context.Context, name string) ([]byte, bool, error) {
	if err := validateName(ErrInvalidStateName, name); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	snapshot, ok := m.states[name]
	if !ok {
		return nil, false, nil
	}
	return append(make([]byte, 0, len(snapshot)), snapshot...), true, nil
}
