package checkpoint

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore is a [Store] and a [StateStore] that keeps positions and state
// snapshots in memory. The zero value is ready to use, and a MemoryStore is
// safe for concurrent use. Positions and snapshots are lost when the process
// exits. A MemoryStore must not be copied after first use.
type MemoryStore struct {
	mu        sync.Mutex
	positions map[memoryKey]Position            // guarded by mu; nil until the first Save
	states    map[string][]byte                 // guarded by mu; nil until the first SaveState; owned copies
	changes   map[changelogKey]*memoryChangelog // guarded by mu; nil until the first SaveChanges
}

// changelogKey names the changes of one stage's state of one partition.
type changelogKey struct {
	stage, topic string
	partition    int32
}

// memoryChangelog is the changes of one stage's state of one partition,
// in the order they were saved, compacted as Kafka compacts a changelog
// topic: an earlier change of a key is dropped once a later one exists,
// except among the last memoryCompactionLag changes, which are kept whole
// as Kafka keeps its active segment (a reader of the tail sees what each
// key held before the last changes, which a save cut short needs).
type memoryChangelog struct {
	entries []memoryChange
	index   map[string]int // key -> its entry
	dead    int            // entries replaced by a later change of their key
}

type memoryChange struct {
	key, value []byte
	dead       bool
}

// NewMemoryStore returns an empty MemoryStore, for symmetry with
// [NewFileStore]: swapping one store for the other is a one-line change.
// It cannot fail. The zero value works as well (var store MemoryStore, or
// &MemoryStore{}); NewMemoryStore is the same thing, already a pointer.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// The interfaces a MemoryStore implements.
var (
	_ StateStore     = (*MemoryStore)(nil)
	_ ChangelogStore = (*MemoryStore)(nil)
)

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

// SaveChanges keeps copies of changes (checkpoint.ChangelogStore), each
// key's last change replacing its earlier ones. It returns an error
// wrapping [ErrInvalidChange] for a change with an invalid stage name,
// topic or partition or a nil key, and saves none of changes then. Like
// Save it ignores ctx.
func (m *MemoryStore) SaveChanges(_ context.Context, changes []Change) error {
	for i := range changes {
		if err := validateChange(&changes[i]); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changes == nil {
		m.changes = make(map[changelogKey]*memoryChangelog)
	}
	for i := range changes {
		c := &changes[i]
		k := changelogKey{c.Stage, c.Topic, c.Partition}
		cl := m.changes[k]
		if cl == nil {
			cl = &memoryChangelog{index: make(map[string]int)}
			m.changes[k] = cl
		}
		cl.add(c.Key, c.Value)
	}
	return nil
}

// memoryCompactionLag is how many of the last changes of a partition a
// MemoryStore never compacts (Kafka's min.compaction.lag, counted in
// changes).
const memoryCompactionLag = 4096

func (cl *memoryChangelog) add(key, value []byte) {
	if i, ok := cl.index[string(key)]; ok {
		cl.entries[i].dead = true // kept until compacted: see memoryChangelog
		cl.dead++
	}
	var v []byte
	if value != nil {
		v = append(make([]byte, 0, len(value)), value...)
	}
	cl.index[string(key)] = len(cl.entries)
	cl.entries = append(cl.entries, memoryChange{key: append([]byte(nil), key...), value: v})
	if cl.dead > memoryCompactionLag && cl.dead > len(cl.entries)/2 {
		old := len(cl.entries) - memoryCompactionLag
		live := cl.entries[:0]
		dead := 0
		for i, e := range cl.entries {
			if e.dead && i < old {
				continue
			}
			if e.dead {
				dead++
			} else {
				cl.index[string(e.key)] = len(live)
			}
			live = append(live, e)
		}
		clear(cl.entries[len(live):])
		cl.entries, cl.dead = live, dead
	}
}

// RestoreChanges calls fn with the changes saved for stage's state of
// topic-partition in the order they were saved (checkpoint.ChangelogStore):
// each key's last change, and the earlier changes compaction has not
// dropped yet (see memoryChangelog), a deleted key's with a nil value. It
// returns fn's first error, wrapped with the stage and partition.
func (m *MemoryStore) RestoreChanges(ctx context.Context, stage, topic string, partition int32, fn func(key, value []byte) error) error {
	if err := validateName(ErrInvalidChange, stage); err != nil {
		return err
	}
	if err := validateKey(topic, partition); err != nil {
		return err
	}
	m.mu.Lock()
	var entries []memoryChange
	if cl := m.changes[changelogKey{stage, topic, partition}]; cl != nil {
		entries = append(entries, cl.entries...) // fn runs unlocked: it may save
	}
	m.mu.Unlock()
	for _, e := range entries {
		if err := fn(e.key, e.value); err != nil {
			return fmt.Errorf("checkpoint: restore the state %q of %s/%d: %w", stage, topic, partition, err)
		}
	}
	return nil
}

// validateChange checks what a ChangelogStore needs of a change.
func validateChange(c *Change) error {
	if err := validateName(ErrInvalidChange, c.Stage); err != nil {
		return err
	}
	if err := validateKey(c.Topic, c.Partition); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidChange, err)
	}
	if c.Key == nil {
		return fmt.Errorf("%w: stage %q, %s/%d: nil key", ErrInvalidChange, c.Stage, c.Topic, c.Partition)
	}
	return nil
}
