package checkpoint

import (
	"context"
	"errors"
)

// ChangelogStore is a [Store] that also keeps the state of a pipeline's
// stateful stages per source partition, as a log of changes keyed by state
// key: Kafka Streams' changelog topics. Where a [StateStore] replaces one
// snapshot of the whole state at every checkpoint, a ChangelogStore is
// given only the keys that changed since the last one (the cost grows with
// the keys changed, not with the state), and can restore, drop or hand
// over the state of one partition at a time: what a consumer group needs
// when a partition moves to another process.
//
// A change names the stateful stage (its name, as [Change].Stage), the
// source topic-partition whose records made it, an opaque key and the
// key's new value; a nil Value deletes the key (a tombstone). The store
// never looks inside keys or values. For every (Stage, Topic, Partition)
// RestoreChanges must give back, for each key, the value of its last
// change (a store may give the earlier changes too, in order, or drop
// them: a compacted topic does), and nothing of a deleted key, or its
// tombstone. A store should give the last changes whole, with those they
// replaced, for a while (Kafka's min.compaction.lag.ms): the pipeline
// closes each save with a change of its own and, at a restore, undoes the
// changes of a save a crash cut short, which needs what they replaced.
//
// A pipeline saves its changes (SaveChanges) at every checkpoint before it
// saves the positions they reflect, so that a saved position never passes
// a record whose effect on the state is not saved.
//
// Implementations must be safe for concurrent use.
type ChangelogStore interface {
	Store

	// SaveChanges saves changes, durably when it returns nil, in order:
	// a later change of a key replaces an earlier one, also within one
	// call. On an error the caller must assume any prefix of them may
	// have been saved. The store does not keep the slices after it
	// returns.
	SaveChanges(ctx context.Context, changes []Change) error

	// RestoreChanges calls fn with the saved changes of stage's state of
	// topic-partition, oldest first (see the type's doc), in slices fn
	// must not keep, and returns fn's first error, wrapped. A stage or a
	// partition with nothing saved calls fn never and returns nil.
	RestoreChanges(ctx context.Context, stage, topic string, partition int32, fn func(key, value []byte) error) error
}

// Change is one change of a stateful stage's state for [ChangelogStore]:
// Key's value is now Value (nil: Key was deleted), in the state Stage
// keeps for the records of Topic/Partition. Stage follows the rule of
// state names ([StateStore]).
type Change struct {
	Stage     string
	Topic     string
	Partition int32
	Key       []byte
	Value     []byte // nil: deleted
}

// ErrInvalidChange is wrapped by the error of a [Change] that cannot be
// saved: a stage name that breaks the rule of state names, an invalid
// topic, a negative partition or a nil key.
var ErrInvalidChange = errors.New("checkpoint: invalid state change")
