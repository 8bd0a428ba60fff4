package log

import (
	"fmt"
	"sync/atomic"
)

// Partitioner picks the partition of a record by its key on the writing
// side. A Topic calls it with its partition count, 1 to [MaxPartitions].
type Partitioner interface {
	// Partition returns the partition of a record with key among n
	// partitions (n > 0), advancing any internal state (a round-robin
	// counter).
	Partition(key []byte, n int) int32
	// PartitionFor returns what Partition would return now, without
	// advancing anything: asking never changes where the next record goes.
	PartitionFor(key []byte, n int) int32
}

// KafkaPartitioner is the default Partitioner. Keyed records go where
// Kafka's default partitioner (and franz-go's StickyKeyPartitioner with the
// Kafka hasher) would put them: murmur2 of the key, made positive by masking
// the sign bit, modulo the partition count. So a key lands in the same
// partition number here and in a Kafka topic of the same partition count.
// Records with a nil key go round-robin: 0, 1, 2, 0, ...
//
// Its methods panic, as [KafkaPartition] does, when n <= 0. The zero value
// is ready to use and safe for concurrent use.
type KafkaPartitioner struct {
	next atomic.Uint64
}

// Partition implements Partitioner.
func (p *KafkaPartitioner) Partition(key []byte, n int) int32 {
	mustHavePartitions(n)
	if key == nil {
		return int32((p.next.Add(1) - 1) % uint64(n))
	}
	return kafkaPartition(key, uint64(n))
}

// PartitionFor implements Partitioner; it never advances the round-robin
// counter.
func (p *KafkaPartitioner) PartitionFor(key []byte, n int) int32 {
	mustHavePartitions(n)
	if key == nil {
		return int32(p.next.Load() % uint64(n))
	}
	return kafkaPartition(key, uint64(n))
}

// KafkaPartition returns the partition, in [0, n), that Kafka's Java client
// (Utils.toPositive(Utils.murmur2(key)) % n) and franz-go's default
// partitioner pick for a record with key among n partitions: murmur2(key)
// with the sign bit masked, modulo n. A nil key hashes as an empty one (a
// Topic sends nil keys round-robin instead, see [KafkaPartitioner]).
//
// n is a partition count, int32 as partition numbers are. KafkaPartition
// panics when n <= 0, as a modulo by zero would and as [math/rand.Intn]
// does: a topic has at least one partition, so a count below one is a
// programming error, not a condition to handle.
func KafkaPartition(key []byte, n int32) int32 {
	mustHavePartitions(n)
	return kafkaPartition(key, uint64(n))
}

// kafkaPartition is KafkaPartition for a positive count of any size. The
// modulo is taken in 64 bits: a count above 32 bits (1<<32 truncated to 0
// divided by zero) still gives a partition below n, the one franz-go's
// KafkaHasher gives.
func kafkaPartition(key []byte, n uint64) int32 {
	return int32(uint64(murmur2(key)&0x7fffffff) % n)
}

// mustHavePartitions panics with a message naming n when n <= 0.
func mustHavePartitions[N int | int32](n N) {
	if n <= 0 {
		panic(fmt.Sprintf("log: partition of a key among %d partitions: the count must be positive", n))
	}
}

// murmur2 is Kafka's variant of MurmurHash2 (seed 0x9747b28c), the one in
// org.apache.kafka.common.utils.Utils.murmur2.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[length&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
