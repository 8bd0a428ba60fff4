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
// what Kafka acknowledged to the relay, by source partition.
type kafkaReader struct {
	cl      *kgo.Client
	adm     *kadm.Client
	read    map[int32]int64 // next Kafka offset to read, by Kafka partition
	pending [Partitions][]entry
	ids     [Partitions][]string // every record's id, by Kafka partition and offset
	foreign int                  // records without the relay's headers, or of no source partition
}

func newKafkaReader(brokers []string) (*kafkaReader, error) {
	parts := make(map[int32]kgo.Offset, Partitions)
	for p := range int32(Partitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{RelayTopic: parts}),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("torture: Kafka client: %w", err)
	}
	return &kafkaReader{cl: cl, adm: kadm.NewClient(cl), read: make(map[int32]int64)}, nil
}

func (r *kafkaReader) close() { r.cl.Close() }

// sync reads RelayTopic up to its end offsets as of the call, so every
// record Kafka acknowledged before it is in pending.
func (r *kafkaReader) sync() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
			r.pending[p] = append(r.pending[p], entry{kind: kindHandled, partition: p, offset: off, id: id})
		})
	}
	return nil
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
