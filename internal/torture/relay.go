package torture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/internal/kafkaread"
)

// ScenarioRelay relays the log topic to Kafka and back: examples/relay
// --direction log-to-kafka reads every partition of the topic from its
// checkpoint.FileStore and produces each record (acks=all, idempotent) to
// the topic RelayTopic of an in-process Kafka (franz-go's kfake) that the
// supervisor runs, and examples/relay --direction kafka-to-log appends
// RelayTopic to the log topic BackTopic; the two relays, not consumers,
// are the children killed beside the publisher. A record counts as
// handled once Kafka holds it, read back by the supervisor by the relay's
// headers (source partition and offset); a Kafka record counts as relayed
// back once BackTopic holds it.
const ScenarioRelay = "relay"

// ScenarioRelayExactlyOnce is ScenarioRelay's log-to-kafka relay with
// --exactly-once (issue 19): its records and its log positions go into
// Kafka transactions together (sink.KafkaTransactionalID
// RelayTransactionalID, the positions in its topic
// sink.KafkaPositionsTopic(RelayTransactionalID)). The publisher and the
// relay are killed (there is no relay back). The supervisor reads
// RelayTopic as a read_committed reader does, and samples the committed
// positions the same way; each record of the log must be in RelayTopic
// exactly once, in the log's order per source partition.
const ScenarioRelayExactlyOnce = "relay-eos"

// RelayTransactionalID is the transactional id of ScenarioRelayExactlyOnce's
// relay.
const RelayTransactionalID = "torture-relay"

// RelayTopic is the Kafka topic the relay scenario produces to, with
// Partitions partitions.
const RelayTopic = "torture-out"

// The headers examples/relay puts on every record it writes.
const (
	relayHeaderPartition = "strom.relay.partition"
	relayHeaderOffset    = "strom.relay.offset"
)

// relayDir is the relay's folder: state/ is its checkpoint.FileStore.
func relayDir(dir string) string { return filepath.Join(dir, "relay") }

// kafkaReader reads RelayTopic back from the start, for the supervisor:
// what Kafka acknowledged to the relay, by source partition; with
// committed, what a read_committed reader sees (ScenarioRelayExactlyOnce).
type kafkaReader struct {
	cl        *kgo.Client
	adm       *kadm.Client
	committed bool            // read committed records only, with fetch requests (internal/kafkaread)
	read      map[int32]int64 // next Kafka offset to read, by Kafka partition
	pending   [Partitions][]entry
	ids       [Partitions][]string // every record's id, by Kafka partition and offset
	foreign   int                  // records without the relay's headers, or of no source partition

	// With committed: the last source offset read per Kafka partition and
	// source partition, and the records that came after a later one.
	lastSource map[[2]int32]int64
	disordered []string
}

func newKafkaReader(brokers []string, committed bool) (*kafkaReader, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if !committed {
		parts := make(map[int32]kgo.Offset, Partitions)
		for p := range int32(Partitions) {
			parts[p] = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{RelayTopic: parts}),
			kgo.FetchMaxWait(50*time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("torture: Kafka client: %w", err)
	}
	return &kafkaReader{cl: cl, adm: kadm.NewClient(cl), committed: committed, read: make(map[int32]int64),
		lastSource: make(map[[2]int32]int64)}, nil
}

func (r *kafkaReader) close() { r.cl.Close() }

// sync reads RelayTopic up to its end offsets as of the call, so every
// record Kafka acknowledged before it is in pending.
func (r *kafkaReader) sync() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.committed {
		return r.syncCommitted(ctx)
	}
	ends, err := r.adm.ListEndOffsets(ctx, RelayTopic)
	if err != nil {
		return fmt.Errorf("torture: list the end offsets of %s: %w", RelayTopic, err)
	}
	behind := func() bool {
		for _, lo := range ends[RelayTopic] {
			if lo.Err == nil && r.read[lo.Partition] < lo.Offset {
				return true
			}
		}
		return false
	}
	for behind() {
		fs := r.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("torture: read %s back: %w", RelayTopic, err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("torture: read %s partition %d back: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			r.read[rec.Partition] = rec.Offset + 1
			r.take(rec)
		})
	}
	return nil
}

// syncCommitted reads RelayTopic up to its last stable offsets as of the
// call, as a read_committed reader sees it: every record of a transaction
// committed before the call is in pending, and none of an aborted one.
// (kfake writes every marker of a transaction before it answers another
// request, so the positions committed with the records and sampled before
// the call are not ahead of them.)
func (r *kafkaReader) syncCommitted(ctx context.Context) error {
	t, found, err := kafkaread.List(ctx, r.cl, RelayTopic)
	if err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	if !found {
		return fmt.Errorf("torture: %s does not exist", RelayTopic)
	}
	for _, p := range t.Partitions {
		from := max(r.read[p.ID], p.Start)
		if from >= p.End {
			continue
		}
		if err := kafkaread.Read(ctx, r.cl, t, p.ID, from, p.End, func(rec *kgo.Record) error {
			r.take(rec)
			return nil
		}); err != nil {
			return fmt.Errorf("torture: read %s partition %d back (read_committed): %w", RelayTopic, p.ID, err)
		}
		r.read[p.ID] = p.End
	}
	return nil
}

// take notes a record read from RelayTopic: its id at its Kafka offset,
// and a finish of the source record its headers name.
func (r *kafkaReader) take(rec *kgo.Record) {
	id := string(rec.Value)
	if i := strings.IndexByte(id, ' '); i >= 0 {
		id = id[:i]
	}
	if kp := rec.Partition; kp >= 0 && kp < Partitions {
		for int64(len(r.ids[kp])) < rec.Offset {
			r.ids[kp] = append(r.ids[kp], "") // a gap: no record there
		}
		r.ids[kp] = append(r.ids[kp], id)
	}
	p, off, ok := relayHeaders(rec)
	if !ok || p < 0 || p >= Partitions {
		r.foreign++
		return
	}
	if r.committed {
		k := [2]int32{rec.Partition, p}
		if last, seen := r.lastSource[k]; seen && off < last {
			r.disordered = append(r.disordered, fmt.Sprintf("out of order: %s partition %d offset %d holds source partition %d offset %d (record %s) after its offset %d",
				RelayTopic, rec.Partition, rec.Offset, p, off, id, last))
		}
		r.lastSource[k] = off
	}
	r.pending[p] = append(r.pending[p], entry{kind: kindHandled, partition: p, offset: off, id: id})
}

// relayHeaders returns the source partition and offset a relayed record
// names.
func relayHeaders(rec *kgo.Record) (int32, int64, bool) {
	p, off := int64(-1), int64(-1)
	for _, h := range rec.Headers {
		switch h.Key {
		case relayHeaderPartition:
			p = parseInt(h.Value)
		case relayHeaderOffset:
			off = parseInt(h.Value)
		}
	}
	return int32(p), off, p >= 0 && off >= 0
}

// parseInt parses a decimal header value, -1 when it is not one.
func parseInt(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// kafkaView is one source partition's view of a kafkaReader: an
// entrySource whose entries are the records Kafka holds from that
// partition.
type kafkaView struct {
	r *kafkaReader
	p int32
}

func (v kafkaView) next() ([]entry, error) {
	if err := v.r.sync(); err != nil {
		return nil, err
	}
	out := v.r.pending[v.p]
	v.r.pending[v.p] = nil
	return out, nil
}

func (v kafkaView) tornLines() int { return 0 }

// stderrReady reports whether path, a child's stderr file, shows
// incarnation inc printed a line containing marker.
func stderrReady(path string, inc int, marker string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	head := fmt.Sprintf("--- torture: incarnation %d\n", inc)
	i := strings.LastIndex(string(data), head)
	return i >= 0 && strings.Contains(string(data[i+len(head):]), marker)
}
