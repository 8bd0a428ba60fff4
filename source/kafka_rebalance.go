package source

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/stream"
)

// defaultRebalanceTimeout is kgo's default [kgo.RebalanceTimeout], 60 s:
// the Revoked hook's bound when the client cannot tell its own.
const defaultRebalanceTimeout = 60 * time.Second

// SetRebalanceHooks is called by Run (stream.Assignable) with its hooks
// before its first Read, and with nil after its last; nil clears them. See
// the type's doc, "Rebalances", for when the source calls each hook. It is
// safe to call from any goroutine.
func (s *KafkaSource) SetRebalanceHooks(h stream.RebalanceHooks) {
	s.mu.Lock()
	s.hooks = h
	s.mu.Unlock()
}

// callAssigned calls the Assigned hook, when one is set, for the assigned
// partitions among offsets (kgo's starts of a new assignment, from
// AdjustFetchOffsetsFn), outside s.mu. It returns the starts with the
// group's commits as their Offsets (-1 for none), sorted, and for each
// the offset the hook moved it to (-1: not moved).
//
// When Assigned fails it returns the error for kgo, which ends the group
// session on it: the partitions are lost, not fetched, and assigned again
// when the client rejoins (see the type's doc). Unless ctx ended (the
// session began revoking, which is no failure of the pipeline), the next
// Read returns it too.
func (s *KafkaSource) callAssigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (starts []stream.PartitionStart, moved []int64, err error) {
	s.mu.Lock()
	hooks := s.hooks
	for t, ps := range offsets {
		for p, o := range ps {
			st := s.assigned[topicPartition{t, p}]
			if st == nil {
				continue
			}
			// Without a commit kgo gives the start policy's offset
			// (AtStart is -2, AtEnd -1): no commit, -1.
			at := max(o.EpochOffset().Offset, -1)
			starts = append(starts, stream.PartitionStart{TopicPartition: stream.TopicPartition{Topic: t, Partition: p}, Offset: at})
			st.announced, st.failed = hooks != nil, false
		}
	}
	s.mu.Unlock()
	slices.SortFunc(starts, func(a, b stream.PartitionStart) int { return compareParts(a.TopicPartition, b.TopicPartition) })
	moved = make([]int64, len(starts))
	for i := range moved {
		moved[i] = -1
	}
	if hooks == nil || len(starts) == 0 {
		return starts, moved, nil
	}
	asked := slices.Clone(starts)
	if herr := hooks.Assigned(ctx, asked); herr != nil {
		return nil, nil, s.assignFailed(ctx, starts, herr)
	}
	for i := range asked {
		if o := asked[i].Offset; o >= 0 && o != starts[i].Offset {
			moved[i] = o
		}
	}
	return starts, moved, nil
}

// assignFailed marks the partitions of a failed Assigned and returns its
// error, naming the group and the partitions, after making it pending
// unless ctx ended.
func (s *KafkaSource) assignFailed(ctx context.Context, starts []stream.PartitionStart, herr error) error {
	names := make([]string, len(starts))
	for i, ps := range starts {
		names[i] = fmt.Sprintf("%s/%d", ps.Topic, ps.Partition)
	}
	err := s.kafkaErr(fmt.Errorf("rebalance: preparing the assigned partitions %s: %w", strings.Join(names, ", "), herr))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ps := range starts {
		if st := s.assigned[topicPartition{ps.Topic, ps.Partition}]; st != nil {
			st.failed = true
		}
	}
	if ctx.Err() == nil {
		if s.pending == nil {
			s.pending = err
		} else {
			s.pending = errors.Join(s.pending, err)
		}
		s.assignErr = err
	}
	return err
}

// callRevoked calls, outside s.mu, the Lost hook for the partitions of
// revoked whose Assigned failed, and the Revoked hook for the others it
// was called for, within the group's rebalance timeout.
func (s *KafkaSource) callRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.mu.Lock()
	hooks := s.hooks
	whole, failed := s.announcedLocked(revoked)
	s.mu.Unlock()
	if hooks == nil {
		return
	}
	if len(failed) > 0 {
		hooks.Lost(failed)
	}
	if len(whole) > 0 {
		ctx, cancel := context.WithTimeout(ctx, rebalanceTimeout(cl))
		defer cancel()
		hooks.Revoked(ctx, whole)
	}
}

// announcedLocked returns the partitions of which that are assigned and
// that Assigned was called for, sorted: whole where it succeeded, failed
// where it failed.
func (s *KafkaSource) announcedLocked(which map[string][]int32) (whole, failed []stream.TopicPartition) {
	for t, ps := range which {
		for _, p := range ps {
			st := s.assigned[topicPartition{t, p}]
			switch {
			case st == nil || !st.announced:
			case st.failed:
				failed = append(failed, stream.TopicPartition{Topic: t, Partition: p})
			default:
				whole = append(whole, stream.TopicPartition{Topic: t, Partition: p})
			}
		}
	}
	sortParts(whole)
	sortParts(failed)
	return whole, failed
}

// rebalanceTimeout returns cl's rebalance timeout ([kgo.RebalanceTimeout]),
// or kgo's default when cl is nil or does not say.
func rebalanceTimeout(cl *kgo.Client) time.Duration {
	if cl != nil {
		if d, ok := cl.OptValue(kgo.RebalanceTimeout).(time.Duration); ok && d > 0 {
			return d
		}
	}
	return defaultRebalanceTimeout
}

func compareParts(a, b stream.TopicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func sortParts(ps []stream.TopicPartition) { slices.SortFunc(ps, compareParts) }
