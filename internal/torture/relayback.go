package torture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strom-dev/strom/log"
)

// BackTopic is the log topic the relay scenario's second relay, examples/relay
// --direction kafka-to-log, appends RelayTopic to (creating it with
// Partitions partitions); BackGroup is its consumer group, whose committed
// offsets are its positions.
const (
	BackTopic = "torture-back"
	BackGroup = "torture-back"
)

// backSession is the kafka-to-log relay's group session timeout: a relay
// killed with SIGKILL holds its partitions until it expires, so the next
// incarnation waits about that long before it reads again. At 300ms
// (heartbeats every 100ms) a loaded 2-core machine made live members miss
// their sessions. A member killed while its JoinGroup or SyncGroup was in
// flight stays in kfake's group for good, Stable, holding partitions no
// one reads (kfake arms a member's session timer only once its answer is
// delivered, and the connection is gone; 3 of 14 runs under load, the
// group described in the failure showed them): the relay back is
// therefore a static member (--instance-id), whose next incarnation takes
// the old one's place, as a restarted pod with a static id does in Kafka.
const backSession = time.Second

// backRebalance is its rebalance timeout. The kfake this project tests
// with (v0.0.0-20260918054303) lets a rebalance that follows a kill -9 wait
// the whole rebalance timeout for the dead member (its session expiring
// does not end the join, as it does in Kafka), so with kgo's default of
// 60s two such rebalances in a row ran a 20-kill torture past its 2
// minutes; with 2s a relay scenario of 20 kills takes 3s, as it did with
// the older kfake (seed 17786375015115310458: 62.9s with 60s, 2.8s with 2s).
const backRebalance = 2 * time.Second

// backState is what the supervisor knows of the kafka-to-log relay: what
// BackTopic holds (read-only, as far as read so far) and the group's
// commits as last sampled, per Kafka partition of RelayTopic.
type backState struct {
	lg     *log.Log
	topic  *log.Topic // nil until the relay created BackTopic
	next   [Partitions]int64
	counts [Partitions]map[recKey]int // appended copies per Kafka record (offset, id)

	handled [Partitions][]bool // by Kafka offset: appended to BackTopic
	first   [Partitions]int64  // the lowest Kafka offset not appended

	committed [Partitions]int64 // -1 until the group committed
	reported  map[[2]int64]bool // skips already reported, by partition and commit
}

func newBackState(dir string) (*backState, error) {
	lg, err := log.Open(logDir(dir), log.ReadOnly())
	if err != nil {
		return nil, fmt.Errorf("torture: open the log read-only: %w", err)
	}
	b := &backState{lg: lg, reported: make(map[[2]int64]bool)}
	for p := range b.counts {
		b.counts[p] = make(map[recKey]int)
		b.committed[p] = -1
	}
	return b, nil
}

func (b *backState) close() { b.lg.Close() }

// read reads what BackTopic gained since the last call.
func (s *supervisor) readBack() error {
	b := s.back
	if b.topic == nil {
		t, err := b.lg.Topic(BackTopic)
		if errors.Is(err, log.ErrUnknownTopic) {
			return nil // the relay has not created it yet
		}
		if err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		b.topic = t
	}
	for p := range int32(Partitions) {
		part, err := b.topic.Partition(p)
		if err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		for b.next[p] < part.HighWatermark() {
			recs, err := part.Read(b.next[p], 1<<20)
			if err != nil {
				return fmt.Errorf("torture: read %s partition %d at offset %d: %w", BackTopic, p, b.next[p], err)
			}
			if len(recs) == 0 {
				break
			}
			for _, r := range recs {
				b.next[p] = r.Offset + 1
				s.sum.BackRecords++
				kp, koff, ok := logRelayHeaders(r)
				if !ok || kp < 0 || kp >= Partitions {
					s.violate("relay back: %s partition %d offset %d lacks the relay's source headers", BackTopic, p, r.Offset)
					continue
				}
				b.counts[kp][recKey{koff, recordID(r)}]++
				for int64(len(b.handled[kp])) <= koff {
					b.handled[kp] = append(b.handled[kp], false)
				}
				b.handled[kp][koff] = true
				for b.first[kp] < int64(len(b.handled[kp])) && b.handled[kp][b.first[kp]] {
					b.first[kp]++
				}
			}
		}
	}
	return nil
}

// logRelayHeaders returns the Kafka partition and offset a record the
// kafka-to-log relay appended names.
func logRelayHeaders(r log.Record) (int32, int64, bool) {
	p, off := int64(-1), int64(-1)
	for _, h := range r.Headers {
		switch h.Key {
		case relayHeaderPartition:
			p = parseInt(h.Value)
		case relayHeaderOffset:
			off = parseInt(h.Value)
		}
	}
	return int32(p), off, p >= 0 && off >= 0
}

// sampleCommits fetches the group's committed offsets, then reads what
// BackTopic gained, and checks no commit passes a Kafka record the relay
// had not appended: the relay appends before it commits, so everything
// below a commit fetched first is in what is read after.
func (s *supervisor) sampleCommits(when string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := s.kafka.adm.FetchOffsets(ctx, BackGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // the relay has not joined yet: no commits
	}
	if err != nil && !errors.Is(err, kadm.ErrEmpty) {
		return fmt.Errorf("torture: fetch the commits of group %s: %w", BackGroup, err)
	}
	if err := s.readBack(); err != nil {
		return err
	}
	b := s.back
	for kp := range int32(Partitions) {
		o, ok := offs.Lookup(RelayTopic, kp)
		if !ok || o.Err != nil || o.At < 0 {
			continue
		}
		s.sum.CommitSamples++
		b.committed[kp] = o.At
		if o.At > b.first[kp] && !b.reported[[2]int64{int64(kp), o.At}] {
			b.reported[[2]int64{int64(kp), o.At}] = true
			s.sum.BackSkips++
			s.violate("skip: %s partition %d: group %s committed offset %d, passing offset %d, which the relay had not appended to %s (sampled %s)",
				RelayTopic, kp, BackGroup, o.At, b.first[kp], BackTopic, when)
		}
	}
	return nil
}

// caughtUpBack reports whether the group committed every Kafka record.
func (s *supervisor) caughtUpBack() bool {
	for kp := range Partitions {
		if s.back.committed[kp] < int64(len(s.kafka.ids[kp])) {
			return false
		}
	}
	return true
}

// checkBack checks, at the end, that every record of RelayTopic was
// appended to BackTopic, with its id, and nothing else was.
func (s *supervisor) checkBack() error {
	if err := s.readBack(); err != nil {
		return err
	}
	b := s.back
	for kp := range int32(Partitions) {
		ids := s.kafka.ids[kp]
		for off, id := range ids {
			n := b.counts[kp][recKey{int64(off), id}]
			if n == 0 {
				s.sum.BackLost++
				s.violate("loss: %s partition %d offset %d (record %s) was never appended to %s", RelayTopic, kp, off, id, BackTopic)
				continue
			}
			s.sum.BackReplays += int64(n - 1)
		}
		var phantoms []recKey
		for k := range b.counts[kp] {
			if k.offset >= int64(len(ids)) || ids[k.offset] != k.id {
				phantoms = append(phantoms, k)
			}
		}
		slices.SortFunc(phantoms, func(a, c recKey) int { return int(a.offset - c.offset) })
		for _, k := range phantoms {
			s.sum.Phantoms++
			s.violate("phantom: %s holds a copy of %s partition %d %v, which Kafka does not hold there", BackTopic, RelayTopic, kp, k)
		}
		if b.committed[kp] != int64(len(ids)) {
			s.violate("relay back: %s partition %d: final commit %d, end offset %d", RelayTopic, kp, b.committed[kp], len(ids))
		}
	}
	return nil
}

// describeBackGroup describes BackGroup for a failure's message: its state
// and each member's client and host with the partitions assigned to it.
func (s *supervisor) describeBackGroup() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := s.kafka.adm.DescribeGroups(ctx, BackGroup)
	if err != nil {
		return fmt.Sprintf("not described: %v", err)
	}
	g, ok := groups[BackGroup]
	if !ok || g.Err != nil {
		return fmt.Sprintf("not described: %v", g.Err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", g.State, g.Protocol)
	for _, m := range g.Members {
		fmt.Fprintf(&b, ", member %s@%s", m.MemberID, m.ClientHost)
		if a, isConsumer := m.Assigned.AsConsumer(); isConsumer {
			for _, t := range a.Topics {
				fmt.Fprintf(&b, " %s%v", t.Topic, t.Partitions)
			}
		}
	}
	return b.String()
}
