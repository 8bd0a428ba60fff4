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

// StateSave is one successful call of [RecordingStore.SaveState].
type StateSave struct {
	Name      string
	SizeBytes int // len(state) of the snapshot saved
	// Seq numbers this save among every successful save of the store,
	// Save and SaveState together, from 1 with no gaps: a state save with
	// Seq 3 came after the save whose number in SaveSeqs is 2 and before
	// the one numbered 4.
	Seq int
}

// RecordingStore is a [checkpoint.StateStore] backed by a
// [checkpoint.MemoryStore] that records every successful Save and SaveState
// in order and can fail a chosen Save, a chosen SaveState or every Load. The
// zero value is ready to use. It is safe for concurrent use and must not be
// copied after first use.
type RecordingStore struct {
	mem checkpoint.MemoryStore

	mu              sync.Mutex
	saves           []Save
	saveSeqs        []int // saveSeqs[i] is the Seq of saves[i]
	stateSaves      []StateSave
	seq             int // successful saves of both kinds
	saveCalls       int
	stateSaveCalls  int
	loads           int
	failSaveAt      map[int]error
	failStateSaveAt map[int]error
	loadErr         error
}

var _ checkpoint.StateStore = (*RecordingStore)(nil)

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
	s.seq++
	s.saveSeqs = append(s.saveSeqs, s.seq)
	return nil
}

// SaveState stores a copy of state under name and records it, or returns
// the FailStateSaveAt error for the chosen call and then stores and records
// nothing. State saves are numbered in the same sequence as position saves
// (see [StateSave.Seq]).
func (s *RecordingStore) SaveState(ctx context.Context, name string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateSaveCalls++
	if err, ok := s.failStateSaveAt[s.stateSaveCalls]; ok {
		return err
	}
	if err := s.mem.SaveState(ctx, name, state); err != nil {
		return err
	}
	s.seq++
	s.stateSaves = append(s.stateSaves, StateSave{Name: name, SizeBytes: len(state), Seq: s.seq})
	return nil
}

// LoadState returns a copy of the snapshot last saved under name, as a
// MemoryStore does. FailLoad does not affect it, and Loads does not count it.
func (s *RecordingStore) LoadState(ctx context.Context, name string) ([]byte, bool, error) {
	return s.mem.LoadState(ctx, name)
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

// FailStateSaveAt makes call number n of SaveState (counting from 1, failed
// calls included; Save calls are counted apart, by FailSaveAt) return err
// and store nothing.
func (s *RecordingStore) FailStateSaveAt(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failStateSaveAt == nil {
		s.failStateSaveAt = make(map[int]error)
	}
	s.failStateSaveAt[n] = err
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

// SaveSeqs returns the sequence number of every successful Save, in the
// order of Saves (SaveSeqs()[i] belongs to Saves()[i]), counted with state
// saves as [StateSave.Seq] is, so a test can tell which came first.
func (s *RecordingStore) SaveSeqs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.saveSeqs...)
}

// StateSaves returns a copy of every successful SaveState, in call order.
func (s *RecordingStore) StateSaves() []StateSave {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StateSave(nil), s.stateSaves...)
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
