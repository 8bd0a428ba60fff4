package log

import "sync/atomic"

// Partitioner picks the partition of a record by its key on the writing
// side.
type Partitioner interface {
	// Partition returns the partition of a record with key among n
	// partitions, advancing any internal state (a round-robin counter).
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
// The zero value is ready to use and safe for concurrent use.
type KafkaPartitioner struct {
	next atomic.Uint64
}

// Partition implements Partitioner.
func (p *KafkaPartitioner) Partition(key []byte, n int) int32 {
	if key == nil {
		return int32((p.next.Add(1) - 1) % uint64(n))
	}
	return KafkaPartition(key, n)
}

// PartitionFor implements Partitioner; it never advances the round-robin
// counter.
func (p *KafkaPartitioner) PartitionFor(key []byte, n int) int32 {
	if key == nil {
		return int32(p.next.Load() % uint64(n))
	}
	return KafkaPartition(key, n)
}

// KafkaPartition returns murmur2(key) & 0x7fffffff modulo n: the partition
// Kafka's Java client (Utils.toPositive(Utils.murmur2(key)) % n) picks for a
// keyed record. n must be positive. The modulo is taken in 64 bits: a
// count that does not fit 32 bits (1<<32 truncated to 0 divided by zero)
// still gives a partition below n, the one franz-go's KafkaHasher gives.
func KafkaPartition(key []byte, n int) int32 {
	return int32(uint64(murmur2(key)&0x7fffffff) % uint64(n))
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
