// Package kafkaread reads what a Kafka topic holds for a reader that reads
// only committed records (Kafka's read_committed), up to its partitions'
// last stable offsets: the positions topic of sink.Kafka's transactions,
// and the checks of the tests and demos that count what a transactional
// producer made visible.
//
// It reads with plain fetch requests to each partition's leader, not a
// consumer, because a consumer does not say how far it read: the records
// of an aborted transaction and the transactions' control records are
// dropped before they reach the caller, so a partition whose last records
// before the last stable offset are such would never be seen to end. A
// fetch answer says where the next fetch starts (kgo.ProcessFetchPartition),
// aborted records, control records and compacted gaps included.
// (source.Kafka's changelog restore reads the same way.)
package kafkaread

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchBytes is the most bytes one fetch request asks for: 1 MiB.
const FetchBytes = 1 << 20

// NoProgressTimeout is how long Read keeps sending a fetch that fails with
// an error Kafka marks retriable (a leader moved) or that gets no answer,
// before it gives up: 30 s, the sink's delivery timeout.
const NoProgressTimeout = 30 * time.Second

// Partition is one partition of a [Topic]: where its records start and
// end for a read_committed reader, and its leader.
type Partition struct {
	ID     int32
	Leader int32 // the broker that leads it, as the metadata said
	Start  int64 // the log start offset
	End    int64 // the last stable offset: every record below it is committed or aborted
}

// Topic is what [List] found of a topic: its ID and its partitions, in
// partition order.
type Topic struct {
	Name       string
	ID         kadm.TopicID
	Partitions []Partition
}

// List returns the topic's partitions with their log start and last
// stable offsets as they are now; found is false when the topic does not
// exist.
func List(ctx context.Context, cl *kgo.Client, topic string) (t Topic, found bool, err error) {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return Topic{}, false, fmt.Errorf("kafkaread: metadata of %s: %w", topic, err)
	}
	d, ok := details[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return Topic{}, false, nil
	case d.Err != nil:
		return Topic{}, false, fmt.Errorf("kafkaread: metadata of %s: %w", topic, d.Err)
	}
	t = Topic{Name: topic, ID: d.ID, Partitions: make([]Partition, len(d.Partitions))}
	for i := range t.Partitions {
		t.Partitions[i] = Partition{ID: int32(i), Leader: -1}
	}
	for _, p := range d.Partitions {
		if p.Partition >= 0 && int(p.Partition) < len(t.Partitions) {
			t.Partitions[p.Partition].Leader = p.Leader
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return Topic{}, false, fmt.Errorf("kafkaread: log start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Topic{}, false, fmt.Errorf("kafkaread: last stable offsets of %s: %w", topic, err)
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		s, ok1 := starts.Lookup(topic, p.ID)
		e, ok2 := ends.Lookup(topic, p.ID)
		if !ok1 || !ok2 {
			return Topic{}, false, fmt.Errorf("kafkaread: %s partition %d: no offsets listed", topic, p.ID)
		}
		p.Start, p.End = s.Offset, e.Offset
	}
	return t, true, nil
}

// Committed calls fn with every committed record of topic, partition by
// partition, each in offset order, from its log start offset up to its last
// stable offset as listed when Committed starts (records committed
// meanwhile are not read), and returns fn's first error. A topic that does
// not exist gives found false and no call.
func Committed(ctx context.Context, cl *kgo.Client, topic string, fn func(*kgo.Record) error) (found bool, err error) {
	t, found, err := List(ctx, cl, topic)
	if err != nil || !found {
		return found, err
	}
	for _, p := range t.Partitions {
		if err := Read(ctx, cl, t, p.ID, p.Start, p.End, fn); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Read calls fn with every committed record of partition of t from offset
// from up to (not including) end, in order, and returns fn's first error.
// A fetch that fails with an error Kafka marks retriable, or that gets no
// answer, is sent again (to the leader the metadata names then) until
// [NoProgressTimeout] passes without progress.
func Read(ctx context.Context, cl *kgo.Client, t Topic, partition int32, from, end int64, fn func(*kgo.Record) error) error {
	if int(partition) >= len(t.Partitions) || partition < 0 {
		return fmt.Errorf("kafkaread: %s has no partition %d", t.Name, partition)
	}
	decompressor := kgo.DefaultDecompressor()
	leader := t.Partitions[partition].Leader
	progressed := time.Now()
	var lastErr error
	for off := from; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if lastErr != nil {
			if time.Since(progressed) > NoProgressTimeout {
				return fmt.Errorf("kafkaread: %s partition %d: fetching at offset %d (the end is %d): no progress for %v: %w",
					t.Name, partition, off, end, NoProgressTimeout, lastErr)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
			if nt, found, err := List(ctx, cl, t.Name); err == nil && found && int(partition) < len(nt.Partitions) {
				if nt.ID != t.ID {
					return fmt.Errorf("kafkaread: %s was recreated during the read (topic ID %x, now %x)", t.Name, t.ID, nt.ID)
				}
				leader = nt.Partitions[partition].Leader
			}
		}
		fp, next, err := fetch(ctx, cl, t, partition, leader, off, decompressor)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !retriable(err) {
				return fmt.Errorf("kafkaread: %s partition %d: fetching at offset %d: %w", t.Name, partition, off, err)
			}
			lastErr = err
			continue
		}
		for _, rec := range fp.Records {
			if rec.Offset >= end {
				return nil
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		if next > off {
			off, progressed, lastErr = next, time.Now(), nil
		} else if lastErr == nil {
			lastErr = errors.New("a fetch returned nothing")
		}
	}
	return nil
}

// fetch sends one read_committed fetch request for the partition at offset
// off to leader and returns the committed records it got and the offset to
// fetch next.
func fetch(ctx context.Context, cl *kgo.Client, t Topic, partition, leader int32, off int64, decompressor kgo.Decompressor) (kgo.FetchPartition, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500 // the records below the end exist: only an empty answer waits
	req.MinBytes = 1
	req.MaxBytes = FetchBytes
	req.IsolationLevel = 1 // read committed
	req.SessionEpoch = -1  // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = t.Name, t.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = off
	rp.PartitionMaxBytes = FetchBytes
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	rctx, cancel := context.WithTimeout(ctx, NoProgressTimeout)
	defer cancel()
	resp, err := cl.Broker(int(leader)).Request(rctx, req)
	if err != nil {
		return kgo.FetchPartition{}, off, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return kgo.FetchPartition{}, off, err
	}
	for i := range fr.Topics {
		rtp := &fr.Topics[i]
		if rtp.Topic != t.Name && rtp.TopicID != t.ID {
			continue
		}
		for j := range rtp.Partitions {
			p := &rtp.Partitions[j]
			if p.Partition != partition {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: off, Topic: t.Name, Partition: partition, IsolationLevel: kgo.ReadCommitted(),
			}, p, decompressor, nil)
			if fp.Err != nil {
				return kgo.FetchPartition{}, off, fp.Err
			}
			return fp, next, nil
		}
	}
	return kgo.FetchPartition{}, off, errors.New("the fetch answer holds no data for the partition")
}

// retriable reports whether a failed fetch may succeed when sent again:
// Kafka says so (a leader moved, a broker is loading), or the request got
// no answer (a connection failed or timed out).
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
