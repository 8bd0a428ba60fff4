package stream

import (
	"context"
	"fmt"
	"reflect"

	"github.com/strom-dev/strom/checkpoint"
)

// ThroughRecord is a record [Repartition] writes to a [Through] and reads
// back: the new key and the value, encoded, and the element's event time.
type ThroughRecord struct {
	Key       []byte // the new key's encoding: the topic's partitioner places the record by it
	Value     []byte // the value's encoding
	Timestamp int64  // ms: the element's Timestamp, carried over to the element read back
}

// Through is a topic partitioned by key that a pipeline writes records to
// and reads them back from, in the same Run: what [Repartition] sends a
// stream through, as Kafka Streams sends it through a repartition topic.
// Its Sink must place a record by its Key (every record of a key in one
// partition: Kafka's default partitioner does); its Source reads the
// topic back as a member of a consumer group ([Assignable]), so that each
// partition's state follows it between processes. source.KafkaSource's
// Through method returns one over Kafka.
type Through interface {
	// Sink returns the sink that writes the records.
	Sink() Sink[ThroughRecord]
	// Source returns the source that reads them back.
	Source() Source[ThroughRecord]
}

// StageRepartition is the name of Repartition's stage that writes to the
// Through, in [StageStats].
const StageRepartition = "repartition"

// Repartition sends the values of s through via, keyed by key(value), and
// returns them, read back, grouped by that key for a stateful operator
// ([Aggregate], [Reduce], [Window]): every record of a key then arrives
// through one partition of via, and so one process of a consumer group,
// whichever partition of the source it came from. It is what a stateful
// stage keyed by anything other than what partitions the source needs on
// N processes (see [ErrKeyNotPartitioned]); on one process it costs a
// round trip through the topic and changes nothing else.
//
// Values and keys are encoded as a stateful stage's keys are (strings,
// byte slices, integers, floats and bools in a fixed binary form, other
// types with encoding/gob, which must be able to encode them whole: Run
// returns [ErrUnsavableState] for a type with an unexported field, a func
// or a chan), and
// each element's Timestamp is carried over, so event-time windows after it
// see the times they would have seen before it.
//
// A partition of via interleaves the records of every source partition
// (and, on N processes, of every process) as they arrive: the event times
// of a partition are as far out of order as the writers are apart, and a
// Window after Repartition needs an [OutOfOrderness] that covers it (a
// batch of the source, at least, and, while the upstream group
// rebalances, as much as a new owner lags behind the others), as Kafka
// Streams' windows after a repartition need a grace period. To close the
// last windows at the end of an input, records far ahead in event time
// must reach every partition of via (one per key that hashes to each),
// once every record before them was read upstream.
//
// Delivery is at-least-once on both sides: a record is finished upstream
// once via's sink has it (positions of the source are saved past it only
// then), and the records read back are tracked, checkpointed and handed
// over like any source's, to via's source among the pipeline's stores
// (Repartition adds it when it is a checkpoint.Store). A crash between the
// two may write a record twice to via: the stateful stage after it counts
// it twice. It panics if key or via is nil.
func Repartition[T any, K comparable](s *Stream[T], key func(T) K, via Through) *Keyed[K, T] {
	mustFunc("Repartition", key == nil)
	if via == nil {
		panic("stream: Repartition called with a nil Through")
	}
	kc, vc := newCodec[K](), newCodec[T]()
	for _, t := range []reflect.Type{reflect.TypeFor[K](), reflect.TypeFor[T]()} {
		if err := checkSavable(t, map[reflect.Type]bool{}); err != nil && s.p.buildErr == nil {
			s.p.buildErr = fmt.Errorf("stream: Repartition cannot encode %s, which it writes to its topic: it %w (encoding/gob would drop it); export the fields, or give the type GobEncode and GobDecode (%w)",
				t, err, ErrUnsavableState)
		}
	}
	s.p.noteEffect("Repartition", "the records written to its topic and read back are not in the source's transaction")
	enc := chain(s, func(rt *runtime, down outlet[ThroughRecord]) outlet[T] {
		return &throughEncoder[T, K]{key: key, kc: kc, vc: vc, down: down}
	})
	up := enc.To(via.Sink(), Name(StageRepartition))
	src := via.Source()
	if src == nil {
		panic("stream: Repartition's Through returned a nil Source")
	}
	p := s.p
	p.sources = append(p.sources, src)
	if st, ok := src.(checkpoint.Store); ok {
		p.stores = append(p.stores, st)
	}
	out := &Stream[T]{p: p, connect: func(rt *runtime, down outlet[T]) {
		up.connect(rt, &terminal[ThroughRecord]{rt: rt})
		rt.spawn(func() error { return runSource(rt, src, outlet[ThroughRecord](&throughDecoder[T]{vc: vc, down: down})) })
	}}
	return &Keyed[K, T]{s: out, key: key, follows: true}
}

// throughEncoder encodes a stream's elements as ThroughRecords, keeping
// their lineage.
type throughEncoder[T any, K comparable] struct {
	key  func(T) K
	kc   codec[K]
	vc   codec[T]
	down outlet[ThroughRecord]
	out  []Element[ThroughRecord]
}

func (e *throughEncoder[T, K]) push(ctx context.Context, elems []Element[T]) error {
	out := e.out[:0]
	for i := range elems {
		el := &elems[i]
		k, err := e.kc.append(nil, e.key(el.Value))
		if err != nil {
			return recordError(StageRepartition, el, fmt.Errorf("encode the key: %w", err))
		}
		v, err := e.vc.append(nil, el.Value)
		if err != nil {
			return recordError(StageRepartition, el, fmt.Errorf("encode the value: %w", err))
		}
		out = append(out, Element[ThroughRecord]{Value: ThroughRecord{Key: k, Value: v, Timestamp: el.Timestamp},
			Topic: el.Topic, Partition: el.Partition, Offset: el.Offset, Epoch: el.Epoch, Timestamp: el.Timestamp, owner: el.owner})
	}
	err := e.down.push(ctx, out)
	clear(out)
	e.out = out[:0]
	return err
}

func (e *throughEncoder[T, K]) close(ctx context.Context) error { return e.down.close(ctx) }

// throughDecoder decodes the ThroughRecords read back, keeping their
// lineage (the Through's topic, partition and offset).
type throughDecoder[T any] struct {
	vc   codec[T]
	down outlet[T]
	out  []Element[T]
}

func (d *throughDecoder[T]) push(ctx context.Context, elems []Element[ThroughRecord]) error {
	out := d.out[:0]
	for i := range elems {
		el := &elems[i]
		v, err := d.vc.decode(el.Value.Value)
		if err != nil {
			return recordError(StageRepartition, el, fmt.Errorf("decode a value read back: %w", err))
		}
		ts := el.Value.Timestamp
		if ts == 0 {
			ts = el.Timestamp
		}
		out = append(out, Element[T]{Value: v, Topic: el.Topic, Partition: el.Partition, Offset: el.Offset, Epoch: el.Epoch, Timestamp: ts, owner: el.owner})
	}
	err := d.down.push(ctx, out)
	clear(out)
	d.out = out[:0]
	return err
}

func (d *throughDecoder[T]) close(ctx context.Context) error { return d.down.close(ctx) }
