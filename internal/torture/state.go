package torture

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/checkpoint"
)

// recKey names one record: its offset and the id the publisher gave it, so
// that an offset that held two records (reused after a recovery) is two keys.
type recKey struct {
	offset int64
	id     string
}

// partitionState is what the supervisor knows of one consumer: its journal
// as read so far and its position file.
type partitionState struct {
	p     int32
	who   string           // "consumer-P", or "the relay"
	src   entrySource      // the consumer's journal, or Kafka's copy (ScenarioRelay)
	store checkpoint.Store // the position file (checkpoint.FileStore), or the relay's committed positions (ScenarioRelayExactlyOnce)

	handled []bool         // by offset: the journal holds a finish (kindHandled or kindFiltered) of it
	first   int64          // the lowest offset not finished: a position may be at most this
	counts  map[recKey]int // finishes per record, for replays and the final check
	last    byte           // kind of the last entry read

	pos   int64 // the position at the last sample that found one
	found bool

	reported map[int64]bool // positions already reported as skips
}

// advance reads the journal's new entries: finishes mark records handled,
// and each save the consumer began (kindSave) is checked against the
// records finished before it in the journal.
func (s *supervisor) advance(st *partitionState) error {
	entries, err := st.src.next()
	if err != nil {
		return err
	}
	if st.counts == nil {
		st.counts = make(map[recKey]int)
		st.reported = make(map[int64]bool)
	}
	for _, e := range entries {
		if e.partition != st.p {
			s.violate("%s's journal holds an entry of partition %d: %q", st.who, e.partition, e.appendLine(nil))
			continue
		}
		st.last = e.kind
		switch e.kind {
		case kindHandled, kindFiltered:
			s.sum.HandledLines++
			if e.kind == kindFiltered {
				s.sum.FilteredLines++
			}
			st.counts[recKey{e.offset, e.id}]++
			for int64(len(st.handled)) <= e.offset {
				st.handled = append(st.handled, false)
			}
			st.handled[e.offset] = true
			for st.first < int64(len(st.handled)) && st.handled[st.first] {
				st.first++
			}
		case kindSave:
			s.sum.SavesChecked++
			if e.offset > st.first {
				s.skip(st, e.offset, "skip: partition %d: %s began saving position %d while offset %d was not finished (its journal, in order)", st.p, st.who, e.offset, st.first)
			}
		case kindSaved:
			s.sum.Saves++
		}
	}
	return nil
}

// samplePosition reads st's position file, then the journal, and checks the
// position passes no record the journal does not show finished. The
// journal is read after the position, so every record finished before the
// position was saved is in what it read. A position file that does not
// parse is a violation.
func (s *supervisor) samplePosition(st *partitionState, when string) error {
	pos, found, err := st.store.Load(context.Background(), Topic, st.p)
	if err != nil {
		s.sum.Unreadable++
		s.violate("unreadable: partition %d: position file (%s): %v", st.p, when, err)
		found = false
	}
	if err := s.advance(st); err != nil {
		return err
	}
	if !found {
		return nil
	}
	s.sum.Samples++
	st.pos, st.found = pos.Offset, true
	if pos.Offset > st.first {
		s.skip(st, pos.Offset, "skip: partition %d: saved position %d passes offset %d, which %s had not finished (sampled %s)", st.p, pos.Offset, st.first, st.who, when)
	}
	return nil
}

// skip records a position past an unfinished record, once per position.
func (s *supervisor) skip(st *partitionState, pos int64, format string, args ...any) {
	if st.reported[pos] {
		return
	}
	st.reported[pos] = true
	s.sum.Skips++
	s.violate(format, args...)
}

// publisherState is the publisher's journal as read so far.
type publisherState struct {
	t        tailer
	inFlight map[string]bool // ids written (kindWrite) and not acked by this incarnation
	acks     []entry
}

// advance reads the publisher journal's new entries.
func (s *supervisor) advancePublisher() error {
	entries, err := s.pub.t.next()
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch e.kind {
		case kindWrite:
			s.sum.Appends++
			s.pub.inFlight[e.id] = true
		case kindAck:
			delete(s.pub.inFlight, e.id)
			s.pub.acks = append(s.pub.acks, e)
		default:
			s.violate("the publisher's journal holds an entry of kind %q: %q", e.kind, e.appendLine(nil))
		}
	}
	s.sum.Acked = int64(len(s.pub.acks))
	return nil
}

// publisherKilled reads the journal of the publisher just killed and
// returns how many appends it had in flight (begun, not acked); they are
// forgotten, since no incarnation will ack them.
func (s *supervisor) publisherKilled() (int, error) {
	if err := s.advancePublisher(); err != nil {
		return 0, err
	}
	n := len(s.pub.inFlight)
	clear(s.pub.inFlight)
	return n, nil
}

// String is for messages.
func (k recKey) String() string { return fmt.Sprintf("offset %d (record %s)", k.offset, k.id) }
