package stream

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/checkpoint"
)

// Assignable is implemented by sources whose partitions are assigned to the
// pipeline and taken from it while it runs: source.Kafka, a member of a
// consumer group. Run calls SetRebalanceHooks with its hooks before the
// first Read and SetRebalanceHooks(nil) after the last one; the source
// calls the hooks as its group rebalances, from any goroutine, never two
// at once.
//
// A pipeline on an Assignable source keeps the state of its stateful
// stages per source partition, so that a partition's state can follow the
// partition to the process that owns it (see the package doc's "Scaling
// out").
type Assignable interface {
	SetRebalanceHooks(h RebalanceHooks)
}

// PartitionStart is a partition newly assigned to a pipeline and the
// offset it starts reading at: the group's commit, or -1 when the group
// has none (the source's start policy then decides).
type PartitionStart struct {
	TopicPartition
	Offset int64
}

// RebalanceHooks is what Run gives an [Assignable] source, to be called as
// partitions come and go. The source calls them outside its own locks:
// they may call back into it (a save, a commit).
type RebalanceHooks interface {
	// Assigned is called when partitions become the pipeline's, before
	// Read returns any record of them. It restores their state (from a
	// checkpoint.ChangelogStore among the pipeline's stores) and tells
	// the stateful stages that the partitions are theirs: an Assigned
	// partition that has delivered nothing holds a Window's watermark
	// back. It may lower a start's Offset in place, to the offset the
	// partition's restored state reflects when that is below the group's
	// commit (a state saved before a commit it did not reach): the source
	// must then start the partition there. An error (the state could not
	// be read) is for the source to return from its next Read.
	Assigned(ctx context.Context, starts []PartitionStart) error

	// Revoked is called when partitions are being taken from the
	// pipeline, before the source commits their positions and lets them
	// go. No record of them starts in a stage after it begins (records
	// queued in Parallel and KeyOrdered stages are dropped, unfinished);
	// it waits until the records of them already started have finished,
	// or ctx is done (the source gives the rebalance timeout), then saves
	// their state (to a checkpoint.ChangelogStore) and drops it. The
	// positions the pipeline then gives ([Positions]) are the ones to
	// commit.
	Revoked(ctx context.Context, parts []TopicPartition)

	// Lost is called when partitions were taken from the pipeline without
	// a revocation (the member's session expired: the group gave them to
	// another member already). Their records not started are dropped and
	// their state is dropped unsaved: the new owner restores it from what
	// was saved. It does not wait.
	Lost(parts []TopicPartition)
}

// The runtime is the RebalanceHooks of its pipeline's Assignable sources.
var _ RebalanceHooks = (*runtime)(nil)

// Assigned gives each newly assigned partition a fresh tracker (its
// earlier assignment's, revoked, stays with that assignment's records),
// restores every stateful stage's table of it from the changelog store,
// and marks it assigned in the stages. A start whose state reflects fewer
// records than the group's commit is lowered to the state's offset: the
// records between are read again and applied, instead of skipped.
func (rt *runtime) Assigned(ctx context.Context, starts []PartitionStart) error {
	if err := rt.transactorStarts(ctx, starts); err != nil {
		return err
	}
	rt.beginMu.Lock()
	for _, s := range starts {
		if pt := rt.tracker.Partition(s.Topic, s.Partition); pt.Revoked() {
			rt.tracker.Replace(s.Topic, s.Partition)
			if rt.eos != nil {
				// Its records still running write into the open
				// transaction: its end waits for them (drainTxn).
				rt.retired = append(rt.retired, pt)
			}
		}
	}
	rt.beginMu.Unlock()
	if len(rt.stateful) == 0 {
		return nil
	}
	rt.stateMu.Lock()
	defer rt.stateMu.Unlock()
	// Each table is rebuilt as the store reads it, outside the stages'
	// locks (records of the other partitions flow meanwhile), then put in
	// place under them.
	rs := make([][]partRestorer, len(starts)) // [start][stage]
	for i, s := range starts {
		rs[i] = make([]partRestorer, len(rt.stateful))
		for j, st := range rt.stateful {
			r := st.restorer(partKey{s.Topic, s.Partition})
			rs[i][j] = r
			if rt.changelog == nil {
				continue
			}
			if err := rt.changelog.RestoreChanges(ctx, st.stateName(), s.Topic, s.Partition, r.apply); err != nil {
				return fmt.Errorf("stream: restore the state of stage %q for %s/%d: %w", st.stateName(), s.Topic, s.Partition, err)
			}
		}
	}
	rt.lockStates()
	defer rt.unlockStates()
	for i := range starts {
		s := &starts[i]
		pk := partKey{s.Topic, s.Partition}
		for j, st := range rt.stateful {
			next, err := rs[i][j].installLocked()
			if err != nil {
				return err
			}
			st.assignPartLocked(pk)
			if next >= 0 && s.Offset >= 0 && next < s.Offset {
				// Saved before a commit it did not reach (its save at a
				// revoke failed, or the changelog lost its tail): read
				// from where the state is, not from the commit.
				s.Offset = next
			}
		}
	}
	return nil
}

// Revoked stops the records of the partitions that have not started,
// waits for those started, saves the partitions' state and drops it.
func (rt *runtime) Revoked(ctx context.Context, parts []TopicPartition) {
	if rt.eos != nil {
		// Exactly once: the transaction open now aborts (the partitions
		// moved under it), and the new owner starts from the last one
		// committed. Nothing is saved outside a transaction.
		rt.Lost(parts)
		return
	}
	pts := rt.revoke(parts)
	// Once Run's goroutines have returned (the source closes after Run,
	// and leaving the group revokes everything) nothing is left to wait
	// for: records left unfinished then were abandoned with the run.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-rt.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	for _, pt := range pts {
		// On ctx's end the position stays at the first record still
		// running: the next owner handles it again (at-least-once).
		_ = pt.WaitSettled(wctx)
	}
	rt.releaseState(ctx, parts, true)
}

// Lost stops the records of the partitions that have not started and
// drops their state unsaved.
func (rt *runtime) Lost(parts []TopicPartition) {
	rt.revoke(parts)
	rt.releaseState(context.Background(), parts, false)
}

// revoke marks the partitions' trackers revoked.
func (rt *runtime) revoke(parts []TopicPartition) []*checkpoint.PartitionTracker {
	rt.revokes.Add(1)
	rt.revokedInTxn.Store(true)
	pts := make([]*checkpoint.PartitionTracker, 0, len(parts))
	for _, tp := range parts {
		pt := rt.tracker.Partition(tp.Topic, tp.Partition)
		pt.Revoke()
		pts = append(pts, pt)
	}
	return pts
}

// releaseState saves (when save is set) and drops the stateful stages'
// tables of parts. A failed save is not an error of the pipeline: the
// partition is no longer its own; the next owner finds the state as it
// was at the last save, below the commit, and reads from there (Assigned).
func (rt *runtime) releaseState(ctx context.Context, parts []TopicPartition, save bool) {
	if len(rt.stateful) == 0 {
		return
	}
	rt.stateMu.Lock()
	defer rt.stateMu.Unlock()
	set := make(map[partKey]bool, len(parts))
	for _, tp := range parts {
		set[partKey{tp.Topic, tp.Partition}] = true
	}
	rt.lockStates()
	var changes []checkpoint.Change
	var err error
	if save && rt.changelog != nil && !rt.saveFailed.Load() {
		only := func(pk partKey) bool { return set[pk] }
		for i := len(rt.stateful) - 1; i >= 0 && err == nil; i-- { // upstream first
			changes, err = rt.stateful[i].changesLocked(changes, only)
		}
	}
	for pk := range set {
		for _, st := range rt.stateful {
			st.dropPartLocked(pk)
		}
	}
	rt.unlockStates()
	if err == nil && len(changes) > 0 {
		_ = rt.changelog.SaveChanges(context.WithoutCancel(ctx), changes)
	}
}

// lockStates locks every stateful stage, upstream first, as pushes lock
// them; unlockStates undoes it.
func (rt *runtime) lockStates() {
	for i := len(rt.stateful) - 1; i >= 0; i-- {
		rt.stateful[i].lock()
	}
}

func (rt *runtime) unlockStates() {
	for _, st := range rt.stateful {
		st.unlock()
	}
}

// abandonRevoked gives up e's record, unfinished, when its partition was
// revoked, and reports whether it did: a stage then does not start it.
func abandonRevoked(owner acker, offset int64) bool {
	pt, ok := owner.(*checkpoint.PartitionTracker)
	if !ok || !pt.Revoked() {
		return false
	}
	pt.Abandon(offset)
	return true
}

// dropRevoked removes from elems, in place, the records of revoked
// partitions, abandoning them, once any partition was revoked.
func dropRevoked[T any](rt *runtime, elems []Element[T]) []Element[T] {
	if rt.revokes.Load() == 0 {
		return elems
	}
	n := 0
	for i := range elems {
		if abandonRevoked(elems[i].owner, elems[i].Offset) {
			continue
		}
		elems[n] = elems[i]
		n++
	}
	clear(elems[n:])
	return elems[:n]
}
