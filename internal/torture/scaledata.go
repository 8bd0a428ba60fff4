package torture

// Scenario scale's input: synthetic keyed records with event times out of
// order within a bound, generated from the seed, and the window counts an
// uninterrupted run must give, computed in plain Go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The event-time shape of scenario scale's input.
const (
	// scaleBase is the event time of record 0 before its disorder:
	// 2026-01-01T00:00:00Z, in Unix milliseconds, on a minute.
	scaleBase = int64(1_767_225_600_000)
	// scaleWindow is the tumbling window's size.
	scaleWindow = time.Minute
	// scaleWindows is about how many windows the records span: the step
	// between records' event times is scaleWindows*scaleWindow/Records
	// (10 ms for 120,000 records), so every key has records in every
	// window (6 each with 1,000 keys).
	scaleWindows = 20
	// scaleDisorder bounds how far a record's event time is behind its
	// position: Timestamp = base + i*step - rand(0..scaleDisorder).
	scaleDisorder = 2 * time.Second
	// scaleOutOfOrderness is the window's OutOfOrderness: above
	// scaleDisorder, so in a partition read in order no record is late.
	scaleOutOfOrderness = 5 * time.Second
	// scaleSentinelAfter is how far past the last record's event time
	// each partition's sentinel is: far enough that the sentinels'
	// watermark closes every window of the records.
	scaleSentinelAfter = time.Hour
)

// scaleRecord is one generated input record and where Kafka put it.
type scaleRecord struct {
	key       string
	ts        int64 // event time, Unix milliseconds
	partition int32 // set when produced; -1 before
	offset    int64 // set when produced; -1 before
}

// windowKey names one result of the window: the key's window starting at
// start (Unix milliseconds).
type windowKey struct {
	start int64
	key   string
}

// scaleData is a run's generated input.
type scaleData struct {
	recs     []scaleRecord
	step     int64 // milliseconds between records' event times, before disorder
	sentinel int64 // the sentinels' event time
}

// genScaleData generates n records over keys keys ("k0000", ...) from seed:
// record i has a key drawn uniformly and the event time base + i*step -
// rand(0..scaleDisorder). The same seed gives the same records.
func genScaleData(seed uint64, n, keys int) *scaleData {
	rng := rand.New(rand.NewPCG(seed, 0x7363616c65)) // "scale"
	step := max(int64(scaleWindows)*scaleWindow.Milliseconds()/int64(n), 1)
	d := &scaleData{recs: make([]scaleRecord, n), step: step}
	for i := range d.recs {
		d.recs[i] = scaleRecord{
			key:       fmt.Sprintf("k%04d", rng.IntN(keys)),
			ts:        scaleBase + int64(i)*step - rng.Int64N(scaleDisorder.Milliseconds()+1),
			partition: -1,
			offset:    -1,
		}
	}
	d.sentinel = scaleBase + int64(n)*step + scaleSentinelAfter.Milliseconds()
	return d
}

// expected returns every (window, key) of the records and its count: what
// a one-process run that sees every record on time emits, each once.
// Computed here from the records, not through strom.
func (d *scaleData) expected() map[windowKey]int64 {
	w := scaleWindow.Milliseconds()
	m := make(map[windowKey]int64)
	for _, r := range d.recs {
		m[windowKey{start: r.ts - r.ts%w, key: r.key}]++
	}
	return m
}

// sentinelKey is the key of partition p's sentinel. Results of the
// sentinels' windows (which only a later watermark would close) are not
// expected and are counted apart.
func sentinelKey(p int32) string { return fmt.Sprintf("sentinel-%02d", p) }

// producer writes scenario scale's input (and scenario eos's) to Kafka.
type scaleProducer struct {
	topic  string
	keyed  *kgo.Client // kgo's default partitioner: a key's records stay in one partition
	manual *kgo.Client // the sentinels, one to each partition
	ends   map[int32]int64
}

// newScaleProducer returns a producer of topic.
func newScaleProducer(brokers []string, topic string) (*scaleProducer, error) {
	keyed, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return nil, fmt.Errorf("torture: scale: producer: %w", err)
	}
	manual, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		keyed.Close()
		return nil, fmt.Errorf("torture: scale: producer: %w", err)
	}
	return &scaleProducer{topic: topic, keyed: keyed, manual: manual, ends: make(map[int32]int64)}, nil
}

func (p *scaleProducer) close() {
	p.keyed.Close()
	p.manual.Close()
}

// produce writes recs (records from to to of d) in order and records the
// partition and offset Kafka gave each. The idempotent producer keeps
// them in order within a partition, so a partition's event times are
// never more than scaleDisorder behind its newest.
func (p *scaleProducer) produce(ctx context.Context, d *scaleData, from, to int) error {
	krs := make([]*kgo.Record, 0, to-from)
	index := make(map[*kgo.Record]int, to-from) // ProduceSync's results come in no particular order
	for i := from; i < to; i++ {
		r := d.recs[i]
		kr := &kgo.Record{Key: []byte(r.key), Value: fmt.Appendf(nil, "%d", i), Timestamp: time.UnixMilli(r.ts)}
		krs = append(krs, kr)
		index[kr] = i
	}
	res := p.keyed.ProduceSync(ctx, krs...)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("torture: produce records %d to %d to %s: %w", from, to, p.topic, err)
	}
	for _, pr := range res {
		i, ok := index[pr.Record]
		if !ok {
			return fmt.Errorf("torture: produce records %d to %d to %s: a result for a record not produced", from, to, p.topic)
		}
		d.recs[i].partition, d.recs[i].offset = pr.Record.Partition, pr.Record.Offset
		p.ends[pr.Record.Partition] = max(p.ends[pr.Record.Partition], pr.Record.Offset+1)
	}
	return nil
}

// produceSentinels writes one record per partition with event time
// d.sentinel, after every other record, so that every partition's
// watermark passes the end of every window of the records.
func (p *scaleProducer) produceSentinels(ctx context.Context, d *scaleData, partitions int) error {
	krs := make([]*kgo.Record, 0, partitions)
	for part := range int32(partitions) {
		krs = append(krs, &kgo.Record{Key: []byte(sentinelKey(part)), Value: []byte("sentinel"), Partition: part, Timestamp: time.UnixMilli(d.sentinel)})
	}
	res := p.manual.ProduceSync(ctx, krs...)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("torture: produce the sentinels to %s: %w", p.topic, err)
	}
	for _, pr := range res {
		p.ends[pr.Record.Partition] = max(p.ends[pr.Record.Partition], pr.Record.Offset+1)
	}
	return nil
}
