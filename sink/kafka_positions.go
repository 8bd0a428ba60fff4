package sink

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/kafkaread"
)

// KafkaPositionsSuffix ends the name of the positions topic of a
// transactional [KafkaSink]: the topic is the transactional id followed by
// it ([KafkaPositionsTopic]).
const KafkaPositionsSuffix = "-positions"

// KafkaPositionsTopic returns the name of the positions topic of a
// [KafkaSink] made with [KafkaTransactionalID](id): id + "-positions", for
// example "orders-relay-positions" for the id "orders-relay". The sink
// creates it, compacted (cleanup.policy=compact) with one partition, when
// it does not exist. Each record of it is the position of one source
// partition, written in the transaction that holds the output of the
// records below that position:
//
//	key    "<source topic>/<source partition>", the partition in decimal: "orders/3"
//	value  13 bytes, big-endian: format version (1, one byte), offset (int64), epoch (int32);
//	       or 29 bytes: format version 2, offset, epoch, topic ID (16 bytes)
//
// The last record of a key that a read_committed reader sees is the
// partition's position (checkpoint.Position: the next offset to read, the
// log epoch of the last record handled, and the ID of the source topic,
// when the source has one: a source topic of the embedded log). A position
// without a topic ID is written as version 1, which versions of strom
// before topic IDs read. A record with a nil value (a
// tombstone) removes the position: the partition then starts by its
// source's start rule again.
func KafkaPositionsTopic(transactionalID string) string {
	return transactionalID + KafkaPositionsSuffix
}

// kafkaPositionVersion is the format version of a position record's value
// (its first byte) without a topic ID, kafkaPositionVersionID with one.
const (
	kafkaPositionVersion   = 1
	kafkaPositionVersionID = 2
)

// kafkaPositionBytes is the size of a position record's value of version
// 1; kafkaPositionIDBytes of version 2, which adds the topic ID.
const (
	kafkaPositionBytes   = 1 + 8 + 4
	kafkaPositionIDBytes = kafkaPositionBytes + 16
)

// positionKey is the key of the position record of topic-partition.
func positionKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// encodePosition returns the value of a position record.
func encodePosition(p checkpoint.Position) []byte {
	b := make([]byte, 1, kafkaPositionIDBytes)
	b[0] = kafkaPositionVersion
	b = binary.BigEndian.AppendUint64(b, uint64(p.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(p.Epoch))
	if !p.TopicID.IsZero() {
		b[0] = kafkaPositionVersionID
		b = append(b, p.TopicID[:]...)
	}
	return b
}

// decodePosition decodes the value of a position record.
func decodePosition(v []byte) (checkpoint.Position, error) {
	switch {
	case len(v) == 0:
		return checkpoint.Position{}, fmt.Errorf("empty value")
	case v[0] != kafkaPositionVersion && v[0] != kafkaPositionVersionID:
		return checkpoint.Position{}, fmt.Errorf("format version %d, this strom reads versions %d and %d", v[0], kafkaPositionVersion, kafkaPositionVersionID)
	case v[0] == kafkaPositionVersion && len(v) != kafkaPositionBytes:
		return checkpoint.Position{}, fmt.Errorf("%d bytes, want %d", len(v), kafkaPositionBytes)
	case v[0] == kafkaPositionVersionID && len(v) != kafkaPositionIDBytes:
		return checkpoint.Position{}, fmt.Errorf("%d bytes, want %d (version %d)", len(v), kafkaPositionIDBytes, kafkaPositionVersionID)
	}
	p := checkpoint.Position{
		Offset: int64(binary.BigEndian.Uint64(v[1:9])),
		Epoch:  int32(binary.BigEndian.Uint32(v[9:13])),
	}
	if v[0] == kafkaPositionVersionID {
		if p.TopicID = checkpoint.TopicID(v[13:]); p.TopicID.IsZero() {
			return checkpoint.Position{}, fmt.Errorf("version %d with a zero topic ID", kafkaPositionVersionID)
		}
	}
	if p.Offset < 0 || p.Epoch < checkpoint.NoEpoch {
		return checkpoint.Position{}, fmt.Errorf("offset %d epoch %d: negative", p.Offset, p.Epoch)
	}
	return p, nil
}

// readPositions reads the positions topic as a read_committed reader sees
// it up to its last stable offset: the last position of each key. A
// positions topic that does not exist holds none.
func (s *KafkaSink) readPositions(ctx context.Context) (map[string]checkpoint.Position, error) {
	name := s.txn.positions
	m := make(map[string]checkpoint.Position)
	_, err := kafkaread.Committed(ctx, s.cl, name, func(r *kgo.Record) error {
		if r.Value == nil {
			delete(m, string(r.Key))
			return nil
		}
		p, err := decodePosition(r.Value)
		if err != nil {
			return fmt.Errorf("%w: sink: Kafka positions topic %s partition %d offset %d (key %q): %v",
				checkpoint.ErrCorrupt, name, r.Partition, r.Offset, r.Key, err)
		}
		m[string(r.Key)] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sink: read the Kafka positions topic %s: %w", name, err)
	}
	return m, nil
}
