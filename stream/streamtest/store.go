package streamtest

import (
	"context"
	"sync"

	"github.com/strom-dev/strom/checkpoint"
)

// Save is one successful call of [RecordingStore.Save].
type Save struct {
	Topic     string
	Partition int32
	Position  int64 // the offset saved: the next offset to read
	Epoch     int32 // the epoch saved with it (checkpoint.NoEpoch for Slice)
}

// RecordingStore is a [checkpoint.Store] backed by a [checkpoint.MemoryStore]
// that records every successful Save in order and can fail a chosen Save or
// every Load. The zero value is ready to use. It is safe for concurrent use
// and must not be copied after first use.
type RecordingStore struct {
	mem checkpoint.MemoryStore

	mu         sync.Mutex
	saves      []Save
	saveCalls  int
	loads      int
	failSaveAt map[int]error
	loadErr    error
}

var _ checkpoint.Store = (*RecordingStore)(nil)

// Load returns the error set by FailLoad, if any, and otherwise the position
// last saved, as a MemoryStore does.
func (s *RecordingStore) Load(ctx context.Context, topic string, partition int32) (checkpoint.Position, bool, error) {
	s.mu.Lock()
	s.loads++
	err := s.loadErr
	s.mu.Unlock()
	if err != nil {
		return checkpoint.Position{}, false, err
	}
	return s.mem.Load(ctx, topic, partition)
}

// Save stores and records position, or returns the FailSaveAt error for the
// chosen call and then stores and records nothing. Saves are recorded in call
// order.
func (s *RecordingStore) Save(ctx context.Context, topic string, partition int32, position checkpoint.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saveCalls++
	if err, ok := s.failSaveAt[s.saveCalls]; ok {
		return err
	}
	if err := s.mem.Save(ctx, topic, partition, position); err != nil {
		return err
	}
	s.saves = append(s.saves, Save{Topic: topic, Partition: partition, Position: position.Offset, Epoch: position.Epoch})
	return nil
}

// FailSaveAt makes call number n of Save (counting from 1, failed calls
// included) return err and store nothing.
func (s *RecordingStore) FailSaveAt(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failSaveAt == nil {
		s.failSaveAt = make(map[int]error)
	}
	s.failSaveAt[n] = err
}

// FailLoad makes every Load return err, until FailLoad(nil).
func (s *RecordingStore) FailLoad(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadErr = err
}

// Saves returns a copy of every successful Save, in call order.
func (s *RecordingStore) Saves() []Save {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Save(nil), s.saves...)
}

// Loads returns how many times Load was called, failed calls included.
func (s *RecordingStore) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// Position returns the offset last saved for topic-partition (the next
// offset to read), and whether there is one.
func (s *RecordingStore) Position(topic string, partition int32) (int64, bool) {
	pos, found, err := s.mem.Load(context.Background(), topic, partition)
	if err != nil {
		return 0, false
	}
	return pos.Offset, found
}
