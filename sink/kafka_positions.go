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
//	value  13 bytes, big-endian: format version (1, one byte), offset (int64), epoch (int32)
//
// The last record of a key that a read_committed reader sees is the
// partition's position (checkpoint.Position: the next offset to read, and
// the log epoch of the last record handled). A record with a nil value (a
// tombstone) removes the position: the partition then starts by its
// source's start rule again.
func KafkaPositionsTopic(transactionalID string) string {
	return transactionalID + KafkaPositionsSuffix
}

// kafkaPositionVersion is the format version of a position record's value
// (its first byte).
const kafkaPositionVersion = 1

// kafkaPositionBytes is the size of a position record's value.
const kafkaPositionBytes = 1 + 8 + 4

// positionKey is the key of the position record of topic-partition.
func positionKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// encodePosition returns the value of a position record.
func encodePosition(p checkpoint.Position) []byte {
	b := make([]byte, 1, kafkaPositionBytes)
	b[0] = kafkaPositionVersion
	b = binary.BigEndian.AppendUint64(b, uint64(p.Offset))
	return binary.BigEndian.AppendUint32(b, uint32(p.Epoch))
}

// decodePosition decodes the value of a position record.
func decodePosition(v []byte) (checkpoint.Position, error) {
	switch {
	case len(v) == 0:
		return checkpoint.Position{}, fmt.Errorf("empty value")
	case v[0] != kafkaPositionVersion:
		return checkpoint.Position{}, fmt.Errorf("format version %d, this strom reads version %d", v[0], kafkaPositionVersion)
	case len(v) != kafkaPositionBytes:
		return checkpoint.Position{}, fmt.Errorf("%d bytes, want %d", len(v), kafkaPositionBytes)
	}
	p := checkpoint.Position{
		Offset: int64(binary.BigEndian.Uint64(v[1:9])),
		Epoch:  int32(binary.BigEndian.Uint32(v[9:13])),
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
