package torture

import (
	"fmt"
	"strings"
	"time"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
)

// Summary is what a run did and found.
type Summary struct {
	Scenario string        // ScenarioPlain, ScenarioPipeline, ScenarioRelay, ScenarioRelayExactlyOnce, ScenarioSlow, ScenarioScale, ScenarioEOSLog, ScenarioEOSKafkaLog or ScenarioEOSKafka
	Mode     log.Mode      // the log's write path
	Seed     uint64        // the seed of the run's random choices
	Dir      string        // the run folder
	Took     time.Duration // the whole run, checks included
	started  time.Time

	PublisherKills          int // SIGKILLs of the publisher
	PublisherKillsMidAppend int // of which with an append begun and not acked
	ConsumerKills           int // SIGKILLs of a consumer
	KillsMidSave            int // of which with a Save begun and not returned
	KillsMidBatch           int // of which right after finishing a record (mid-batch or waiting)
	KillsOther              int // of which after a Save returned, or before its journal had anything
	RelayKills              int // SIGKILLs of the relay (ScenarioRelay, ScenarioRelayExactlyOnce)
	BackKills               int // SIGKILLs of the relay back, kafka-to-log (ScenarioRelay)
	Restarts                int // children started again after a kill

	Appends int64 // appends begun (the publisher's journal)
	Acked   int64 // appends acked with AckSynced
	InLog   int64 // records in the log at the end, every frame verified

	HandledLines  int64 // finishes in the consumers' journals, replays included
	FilteredLines int64 // of which drops by the filter (ScenarioPipeline)
	Distinct      int64 // records of the log finished at least once
	Replays       int64 // finishes beyond each record's first

	Samples      int // position-file reads that found a position
	SavesChecked int // saves the consumers began, each checked against their journal
	Saves        int // saves that returned nil
	Unreadable   int // position-file reads that failed (must be 0)

	LostAcked     int // acked records missing from the log (must be 0)
	LostUnhandled int // records in the log never handled (must be 0)
	Phantoms      int // records handled that the log does not hold (must be 0)
	Skips         int // positions past an unfinished record (must be 0)

	BackRecords   int64 // ScenarioRelay: records in BackTopic, copies included
	BackReplays   int64 // ScenarioRelay: copies in BackTopic beyond each Kafka record's first
	BackLost      int   // ScenarioRelay: Kafka records never appended to BackTopic (must be 0)
	BackSkips     int   // ScenarioRelay: commits past a record not appended (must be 0)
	CommitSamples int   // ScenarioRelay: the group's commits read and checked

	// ScenarioSlow (issue 17): the partition, whether the killed consumer
	// reached its end, and the probe's first checkpoint.
	Records         int64         // records written to the partition before the consumer started
	RecordBytes     int           // each record's value size
	Work, ProbeWork time.Duration // the consumer's and the probe's handler time per record
	KillBudget      int           // the most kills before the consumer must have reached the end
	MinInterval     time.Duration // the shortest wait before a kill
	MaxInterval     time.Duration // the longest
	Reached         bool          // the consumer saved position Records within the kill budget
	ReachedAfter    time.Duration // from its first start to the sample that saw position Records
	StuckAt         int64         // when !Reached: the position when the kill budget was spent
	StuckAfter      time.Duration // when !Reached: from the first start to then
	CaughtUpAfter   time.Duration // when !Reached: from then to position Records, not killed
	FirstCheckpoint time.Duration // the probe: from its first handler call to its first Save of a position above 0 (0: none)
	FirstPosition   int64         // the position of that Save
	Duplicated      int64         // records finished more than once (their extra finishes are Replays); ScenarioRelayExactlyOnce: records in Kafka more than once (must be 0)
	OutOfOrder      int           // ScenarioRelayExactlyOnce: records in Kafka after a later one of their source partition (must be 0)

	TornLines int // journal lines torn by a kill (ignored: their write never returned)
	Foreign   int // ScenarioRelay: Kafka records without the relay's headers (must be 0)
	TornTails int // partitions whose last segment ends in a torn tail at the end

	Scale    *ScaleReport    // ScenarioScale's run and checks; nil for the others
	EOSKafka *EOSKafkaReport // ScenarioEOSKafka's run and checks; nil for the others

	EOSLog *EOSLogReport // ScenarioEOSLog's run and checks; nil for the others

	Violations []string // every violation, in the order found
}

// Kills is the number of SIGKILLs sent.
func (s *Summary) Kills() int { return s.PublisherKills + s.ConsumerKills + s.RelayKills + s.BackKills }

// Loss is the number of records lost: acked and missing, or never handled.
func (s *Summary) Loss() int { return s.LostAcked + s.LostUnhandled + s.BackLost }

// String is the summary as printed: one fact a line.
func (s *Summary) String() string {
	var b strings.Builder
	verdict := "PASS"
	if len(s.Violations) > 0 {
		verdict = fmt.Sprintf("FAIL (%d violations)", len(s.Violations))
	}
	if s.Scale != nil {
		fmt.Fprintf(&b, "torture: scenario %s, seed %d: %s in %v\n", s.Scenario, s.Seed, verdict, s.Took.Round(100*time.Millisecond))
		s.Scale.lines(&b, s)
		s.violationLines(&b)
		return b.String()
	}
	if s.EOSKafka != nil {
		fmt.Fprintf(&b, "torture: scenario %s, seed %d: %s in %v\n", s.Scenario, s.Seed, verdict, s.Took.Round(10*time.Millisecond))
		s.EOSKafka.lines(&b, s)
		s.violationLines(&b)
		return b.String()
	}
	fmt.Fprintf(&b, "torture: scenario %s, mode %s, seed %d: %s in %v\n", s.Scenario, s.Mode, s.Seed, verdict, s.Took.Round(100*time.Millisecond))
	if s.EOSLog != nil {
		s.EOSLog.lines(&b, s)
		s.violationLines(&b)
		return b.String()
	}
	if s.Scenario == ScenarioSlow {
		s.slowLines(&b)
		s.violationLines(&b)
		return b.String()
	}
	switch s.Scenario {
	case ScenarioRelay:
		fmt.Fprintf(&b, "  kills       %d: publisher %d (%d with appends in flight), relay log-to-kafka %d, relay kafka-to-log %d\n",
			s.Kills(), s.PublisherKills, s.PublisherKillsMidAppend, s.RelayKills, s.BackKills)
	case ScenarioRelayExactlyOnce:
		fmt.Fprintf(&b, "  kills       %d: publisher %d (%d with appends in flight), relay log-to-kafka --exactly-once %d\n",
			s.Kills(), s.PublisherKills, s.PublisherKillsMidAppend, s.RelayKills)
	default:
		fmt.Fprintf(&b, "  kills       %d: publisher %d (%d with appends in flight), consumers %d (%d mid-save, %d right after a record, %d after a save or at startup)\n",
			s.Kills(), s.PublisherKills, s.PublisherKillsMidAppend, s.ConsumerKills, s.KillsMidSave, s.KillsMidBatch, s.KillsOther)
	}
	fmt.Fprintf(&b, "  restarts    %d\n", s.Restarts)
	fmt.Fprintf(&b, "  published   %d appends begun, %d acked (AckSynced), %d records in the log (every frame verified)\n", s.Appends, s.Acked, s.InLog)
	switch s.Scenario {
	case ScenarioRelay:
		fmt.Fprintf(&b, "  handled     %d records relayed to Kafka (%d without the relay's headers), %d distinct records, %d replays\n", s.HandledLines, s.Foreign, s.Distinct, s.Replays)
		fmt.Fprintf(&b, "  back        %d records relayed back to the log (%s), %d replays\n", s.BackRecords, BackTopic, s.BackReplays)
		fmt.Fprintf(&b, "  positions   %d samples, %d unreadable; %d commits of the group %s checked\n", s.Samples, s.Unreadable, s.CommitSamples, BackGroup)
	case ScenarioRelayExactlyOnce:
		fmt.Fprintf(&b, "  handled     %d records in Kafka for a read_committed reader (%d without the relay's headers), %d distinct records, %d duplicates, %d out of order\n",
			s.HandledLines, s.Foreign, s.Distinct, s.Replays, s.OutOfOrder)
		fmt.Fprintf(&b, "  positions   %d samples of the committed positions (%s), %d unreadable\n", s.Samples, sink.KafkaPositionsTopic(RelayTransactionalID), s.Unreadable)
	default:
		fmt.Fprintf(&b, "  handled     %d finishes (%d by the filter), %d distinct records, %d replays\n", s.HandledLines, s.FilteredLines, s.Distinct, s.Replays)
		fmt.Fprintf(&b, "  positions   %d samples, %d saves checked against the journal (%d returned), %d unreadable\n", s.Samples, s.SavesChecked, s.Saves, s.Unreadable)
	}
	fmt.Fprintf(&b, "  loss        %d (acked but missing %d, never handled %d, never relayed back %d), phantoms %d\n", s.Loss(), s.LostAcked, s.LostUnhandled, s.BackLost, s.Phantoms)
	fmt.Fprintf(&b, "  skips       %d (positions %d, commits %d)\n", s.Skips+s.BackSkips, s.Skips, s.BackSkips)
	fmt.Fprintf(&b, "  torn        %d journal lines, %d log tails\n", s.TornLines, s.TornTails)
	s.violationLines(&b)
	return b.String()
}

// violationLines writes a VIOLATION line for each violation, the first
// maxListed of them.
func (s *Summary) violationLines(b *strings.Builder) {
	for i, v := range s.Violations {
		if i == maxListed {
			fmt.Fprintf(b, "  ... and %d more violations\n", len(s.Violations)-maxListed)
			break
		}
		fmt.Fprintf(b, "  VIOLATION   %s\n", v)
	}
}

// slowLines writes ScenarioSlow's facts: whether and when the killed
// consumer reached the end, the probe's first checkpoint, then the checks.
func (s *Summary) slowLines(b *strings.Builder) {
	fmt.Fprintf(b, "  setup       %d records of %d B in one partition, written first; stream.ConsumeForever, default options, a %v handler; SIGKILL every %v to %v, at most %d times\n",
		s.Records, s.RecordBytes, s.Work, s.MinInterval, s.MaxInterval, s.KillBudget)
	if s.Reached {
		fmt.Fprintf(b, "  slow: reached position %d after %d kills (%.1f s)\n", s.Records, s.ConsumerKills, s.ReachedAfter.Seconds())
	} else {
		fmt.Fprintf(b, "  slow: did NOT reach position %d within %d kills: position %d after %d kills (%.1f s)",
			s.Records, s.KillBudget, s.StuckAt, s.ConsumerKills, s.StuckAfter.Seconds())
		if s.CaughtUpAfter > 0 {
			fmt.Fprintf(b, "; not killed, it then got there in %.1f s", s.CaughtUpAfter.Seconds())
		}
		b.WriteString("\n")
	}
	if s.FirstCheckpoint > 0 {
		verdict := "met"
		if s.FirstCheckpoint >= probeTarget {
			verdict = "MISSED"
		}
		fmt.Fprintf(b, "  slow: first checkpoint %.0f ms after the first record (probe: %v handler, default options; position %d; target < %v: %s)\n",
			float64(s.FirstCheckpoint)/float64(time.Millisecond), s.ProbeWork, s.FirstPosition, probeTarget, verdict)
	} else {
		b.WriteString("  slow: first checkpoint: none (the probe saved no position above 0)\n")
	}
	fmt.Fprintf(b, "  kills       %d (%d mid-save, %d right after a record, %d after a save or at startup)\n",
		s.ConsumerKills, s.KillsMidSave, s.KillsMidBatch, s.KillsOther)
	fmt.Fprintf(b, "  restarts    %d\n", s.Restarts)
	fmt.Fprintf(b, "  partition   %d records written before the consumer started, %d in the log (every frame verified)\n", s.Records, s.InLog)
	fmt.Fprintf(b, "  handled     %d finishes, %d distinct records, %d handled more than once (%d replays)\n", s.HandledLines, s.Distinct, s.Duplicated, s.Replays)
	fmt.Fprintf(b, "  positions   %d samples, %d saves checked against the journal (%d returned), %d unreadable\n", s.Samples, s.SavesChecked, s.Saves, s.Unreadable)
	fmt.Fprintf(b, "  loss        %d (never handled), phantoms %d\n", s.LostUnhandled, s.Phantoms)
	fmt.Fprintf(b, "  skips       %d\n", s.Skips)
	fmt.Fprintf(b, "  torn        %d journal lines, %d log tails\n", s.TornLines, s.TornTails)
}
