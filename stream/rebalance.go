package stream

import "context"

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
