package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/strom-dev/strom/log"
)

// maxListed bounds the violations a summary lists one by one; the counts
// hold them all.
const maxListed = 40

// check runs the final checks, with every child stopped:
//
//	(a) every record the publisher was acked (AckSynced) is in the log, at
//	    the partition and offset it was told, and reads back intact
//	    (log.Verify checks every frame's CRC);
//	(b) every record in the log was finished by its partition's consumer
//	    (journal), and every record a consumer finished is in the log;
//	    every position is the high watermark;
//	(e) in ScenarioRelayExactlyOnce, every record of the log is in
//	    RelayTopic once for a read_committed reader (no duplicate), in
//	    the log's order per source partition.
func (s *supervisor) check() error {
	if err := s.advancePublisher(); err != nil {
		return err
	}
	for _, st := range s.parts {
		if err := s.samplePosition(st, "after the consumers stopped"); err != nil {
			return err
		}
		s.sum.TornLines += st.src.tornLines()
	}
	s.sum.TornLines += s.pub.t.torn
	if s.kafka != nil {
		s.sum.Foreign = s.kafka.foreign
		if s.sum.Foreign > 0 {
			s.violate("relay: %d records of %s lack the relay's source headers", s.sum.Foreign, RelayTopic)
		}
		s.sum.OutOfOrder = len(s.kafka.disordered)
		for _, v := range s.kafka.disordered {
			s.violate("%s", v)
		}
	}

	if s.back != nil {
		if err := s.sampleCommits("after the relays stopped"); err != nil {
			return err
		}
		if err := s.checkBack(); err != nil {
			return err
		}
	}

	if err := s.verifyLog(); err != nil {
		return err
	}

	ids, err := readLog(s.cfg.Dir)
	if err != nil {
		return err
	}
	for p := range ids {
		s.sum.InLog += int64(len(ids[p]))
	}

	// (a) acked records.
	for _, a := range s.pub.acks {
		got := "nothing"
		if a.partition < 0 || a.partition >= Partitions {
			s.sum.LostAcked++
			s.violate("loss: the publisher was acked record %s at partition %d offset %d: no such partition", a.id, a.partition, a.offset)
			continue
		}
		if part := ids[a.partition]; a.offset < int64(len(part)) {
			if part[a.offset] == a.id {
				continue
			}
			got = "record " + part[a.offset]
		}
		s.sum.LostAcked++
		s.violate("loss: partition %d offset %d: the publisher was acked record %s (AckSynced), the log holds %s there", a.partition, a.offset, a.id, got)
	}

	// (b) every record finished, nothing finished that the log lacks, and
	// every position at the high watermark.
	for p, st := range s.parts {
		for off, id := range ids[p] {
			n := st.counts[recKey{int64(off), id}]
			if n == 0 {
				s.sum.LostUnhandled++
				s.violate("loss: partition %d offset %d (record %s) is in the log and was never handled by %s", p, off, id, st.who)
				continue
			}
			s.sum.Distinct++
			s.sum.Replays += int64(n - 1)
			if n > 1 && s.cfg.Scenario == ScenarioRelayExactlyOnce {
				s.sum.Duplicated++
				s.violate("duplicate: partition %d offset %d (record %s) is in %s %d times for a read_committed reader", p, off, id, RelayTopic, n)
			}
		}
		keys := make([]recKey, 0)
		for k := range st.counts {
			if k.offset >= int64(len(ids[p])) || ids[p][k.offset] != k.id {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b recKey) int { return int(a.offset - b.offset) })
		for _, k := range keys {
			s.sum.Phantoms++
			s.violate("phantom: partition %d: %s handled %v, which the log does not hold at that offset", p, st.who, k)
		}
		if hw := int64(len(ids[p])); hw > 0 && (!st.found || st.pos != hw) {
			s.violate("partition %d: final position %d (found %v), high watermark %d", p, st.pos, st.found, hw)
		}
	}
	return nil
}

// readLog reads every record of every partition, opening the log read-only,
// and returns each record's id by partition and offset.
func readLog(dir string) ([Partitions][]string, error) {
	var ids [Partitions][]string
	lg, err := log.Open(logDir(dir), log.ReadOnly())
	if err != nil {
		return ids, fmt.Errorf("torture: open the log read-only: %w", err)
	}
	defer lg.Close()
	t, err := lg.Topic(Topic)
	if err != nil {
		return ids, fmt.Errorf("torture: %w", err)
	}
	for p := range int32(Partitions) {
		part, err := t.Partition(p)
		if err != nil {
			return ids, fmt.Errorf("torture: %w", err)
		}
		if ids[p], err = readIDs(part); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// readIDs reads every record of part and returns each record's id by
// offset.
func readIDs(part *log.Partition) ([]string, error) {
	p := part.ID()
	if start := part.StartOffset(); start != 0 {
		return nil, fmt.Errorf("torture: partition %d starts at offset %d, not 0 (nothing deletes here)", p, start)
	}
	var ids []string
	r := part.Replay(0)
	for {
		recs, err := r.Next(context.Background(), 1<<20)
		for _, rec := range recs {
			if rec.Offset != int64(len(ids)) {
				return ids, fmt.Errorf("torture: partition %d: read offset %d where %d was next", p, rec.Offset, len(ids))
			}
			ids = append(ids, recordID(rec))
		}
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return ids, fmt.Errorf("torture: read partition %d at offset %d: %w", p, len(ids), err)
		}
	}
}

// ViolationError is Run's error when a run broke a rule: the seed that
// reproduces its choices and every violation, each naming partition and
// offset.
type ViolationError struct {
	Seed       uint64
	Violations []string
}

// Error lists the violations, the first maxListed of them one per line.
func (e *ViolationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "torture: %d violations (seed %d):", len(e.Violations), e.Seed)
	for i, v := range e.Violations {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Violations)-maxListed)
			break
		}
		b.WriteString("\n  " + v)
	}
	return b.String()
}

// verifyLog checks every frame of the log (log.Verify): each problem is a
// violation, and the torn tails it found are counted.
func (s *supervisor) verifyLog() error {
	rep, err := log.Verify(logDir(s.cfg.Dir))
	if err != nil {
		return fmt.Errorf("torture: verify the log: %w", err)
	}
	for _, p := range rep.Problems {
		s.violate("log: %v", p)
	}
	s.sum.TornTails = len(rep.TornTails)
	return nil
}
