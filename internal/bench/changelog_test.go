package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/source"
)

// Issue 18's changelog benchmarks, on an in-process kfake cluster (no
// network, no replication: what they measure is strom's side and kfake's
// speed, a floor for a real cluster's restore).
//
//   - BenchmarkChangelogRestore/{nocache,cache,cache+tail,cache-cold}: one
//     op is one RestoreChanges of a partition holding changelogKeys keys
//     (16 B keys and values), fn counting the changes: from the changelog
//     alone; from an up-to-date cache (compacted into one snapshot); from
//     the cache plus a tail of changelogTail keys saved by another member
//     since; and with a cache folder that is empty (the restore reads
//     Kafka and writes the cache file as it goes; its compaction runs
//     after the op, in the background). restore-s is the op in seconds, goal-x the op over the
//     issue's goal (1 s + 0.3 s per GiB of state: below 1 meets it).
//   - BenchmarkChangelogSave/{nocache,cache}: one op is one SaveChanges of
//     changelogSaveKeys changed keys (16 B keys and values, acks=all,
//     idempotent), without and with a cache file to append to. ns/key is
//     the op per changed key; batch-B/key the record-batch bytes written
//     to Kafka per key (after compression, without batch headers);
//     payload-B/key the key (with its source-topic prefix) and value.

// changelogKeys is the state of the restore benchmarks: the issue's
// 1,000,000 keys.
const changelogKeys = 1_000_000

// changelogTail is how many keys another member changed since the
// snapshot, in BenchmarkChangelogRestore/cache+tail: 1% of the state.
const changelogTail = 10_000

// changelogSaveKeys is how many keys one op of BenchmarkChangelogSave
// changes: a checkpoint of a busy stage.
const changelogSaveKeys = 10_000

const (
	changelogTopic = "orders"
	changelogStage = "count"
)

// changelogChanges returns the changes of keys from..to-1 of the
// benchmark's state, each value tagged with round.
func changelogChanges(from, to, round int) []checkpoint.Change {
	cs := make([]checkpoint.Change, 0, to-from)
	for i := from; i < to; i++ {
		cs = append(cs, checkpoint.Change{Stage: changelogStage, Topic: changelogTopic,
			Key: fmt.Appendf(nil, "key-%012d", i), Value: fmt.Appendf(nil, "v%03d-%011d", round%1000, i)})
	}
	return cs
}

// changelogFixture starts a cluster and saves changelogKeys keys to the
// stage's changelog through a source of group g, 100,000 per save.
func changelogFixture(b *testing.B) (*kafkatest.Cluster, int64) {
	b.Helper()
	kc, err := kafkatest.Start(kafkatest.Topics(changelogTopic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	src := changelogSource(b, kc, "")
	ctx := context.Background()
	for from := 0; from < changelogKeys; from += 100_000 {
		if err := src.SaveChanges(ctx, changelogChanges(from, min(from+100_000, changelogKeys), 0)); err != nil {
			b.Fatal(err)
		}
	}
	return kc, src.ChangelogStats().SavedBytes
}

func changelogSource(b *testing.B, kc *kafkatest.Cluster, dir string) *source.KafkaSource {
	b.Helper()
	var opts []source.KafkaOption
	if dir != "" {
		opts = append(opts, source.KafkaStateDir(dir))
	}
	src, err := source.Kafka(kc.Brokers(), "g", []string{changelogTopic}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = src.Close() })
	return src
}

// restoreCount restores the benchmark's state and returns how many keys fn
// saw.
func restoreCount(b *testing.B, src *source.KafkaSource) int {
	n := 0
	err := src.RestoreChanges(context.Background(), changelogStage, changelogTopic, 0, func(_, _ []byte) error {
		n++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// waitCompacted waits until the background compaction of src's cache that
// the first restore started has ended, so that it does not run beside the
// restores timed.
func waitCompacted(b *testing.B, src *source.KafkaSource) {
	for src.ChangelogStats().CacheCompactions == 0 {
		if src.ChangelogStats().CacheErrors > 0 {
			b.Fatal("the cache could not be compacted")
		}
		time.Sleep(10 * time.Millisecond) // a benchmark's setup: no condition to wait on
	}
}

func BenchmarkChangelogRestore(b *testing.B) {
	kc, stateBytes := changelogFixture(b)
	gib := float64(stateBytes) / (1 << 30)
	goal := time.Second + time.Duration(0.3*gib*float64(time.Second))
	report := func(b *testing.B, elapsed time.Duration) {
		per := elapsed / time.Duration(b.N)
		b.ReportMetric(per.Seconds(), "restore-s")
		b.ReportMetric(per.Seconds()/goal.Seconds(), "goal-x")
		b.ReportMetric(float64(stateBytes)/(1<<20), "state-MiB")
	}
	// timed runs op b.N times, timing only op, and reports it.
	timed := func(b *testing.B, prepare func(), op func() int) {
		var elapsed time.Duration
		for range b.N {
			if prepare != nil {
				prepare()
			}
			start := time.Now()
			if n := op(); n < changelogKeys {
				b.Fatalf("restored %d changes, want at least the %d keys", n, changelogKeys)
			}
			elapsed += time.Since(start)
		}
		report(b, elapsed)
	}

	b.Run("nocache", func(b *testing.B) {
		src := changelogSource(b, kc, "")
		timed(b, nil, func() int { return restoreCount(b, src) })
	})
	b.Run("cache", func(b *testing.B) {
		src := changelogSource(b, kc, b.TempDir())
		restoreCount(b, src) // writes the snapshot
		timed(b, nil, func() int { return restoreCount(b, src) })
		if st := src.ChangelogStats(); st.RestoredRecords != changelogKeys {
			b.Fatalf("read %d records from Kafka, want %d (the first restore's only)", st.RestoredRecords, changelogKeys)
		}
	})
	b.Run("cache+tail", func(b *testing.B) {
		src := changelogSource(b, kc, b.TempDir())
		other := changelogSource(b, kc, "")
		restoreCount(b, src)
		waitCompacted(b, src)
		warm := src.ChangelogStats().RestoredRecords
		round := 0
		timed(b, func() {
			round++
			if err := other.SaveChanges(context.Background(), changelogChanges(0, changelogTail, round)); err != nil {
				b.Fatal(err)
			}
		}, func() int { return restoreCount(b, src) })
		if read := src.ChangelogStats().RestoredRecords - warm; read != int64(b.N*changelogTail) {
			b.Fatalf("the restores timed read %d records from Kafka, want %d (the tails)", read, b.N*changelogTail)
		}
	})
	b.Run("cache-cold", func(b *testing.B) {
		var src *source.KafkaSource
		timed(b, func() {
			if src != nil {
				_ = src.Close() // stops the compaction the last restore started
			}
			dir, err := os.MkdirTemp(b.TempDir(), "cold")
			if err != nil {
				b.Fatal(err)
			}
			src = changelogSource(b, kc, dir)
		}, func() int { return restoreCount(b, src) })
	})
}

func BenchmarkChangelogSave(b *testing.B) {
	kc, err := kafkatest.Start(kafkatest.Topics(changelogTopic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	for _, mode := range []string{"nocache", "cache"} {
		b.Run(mode, func(b *testing.B) {
			dir := ""
			if mode == "cache" {
				dir = b.TempDir()
			}
			src := changelogSource(b, kc, dir)
			ctx := context.Background()
			// The changelog exists and, with a cache, its file is open.
			if err := src.SaveChanges(ctx, changelogChanges(0, changelogSaveKeys, 0)); err != nil {
				b.Fatal(err)
			}
			restoreCount(b, src)
			before := src.ChangelogStats()
			var elapsed time.Duration
			for i := range b.N {
				cs := changelogChanges(0, changelogSaveKeys, i+1)
				start := time.Now()
				if err := src.SaveChanges(ctx, cs); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
			}
			after := src.ChangelogStats()
			keys := float64(b.N * changelogSaveKeys)
			b.ReportMetric(float64(elapsed.Nanoseconds())/keys, "ns/key")
			b.ReportMetric(float64(after.SavedBatchBytes-before.SavedBatchBytes)/keys, "batch-B/key")
			b.ReportMetric(float64(after.SavedBytes-before.SavedBytes)/keys, "payload-B/key")
			if mode == "cache" && after.CacheErrors > 0 {
				b.Fatalf("%d cache errors", after.CacheErrors)
			}
		})
	}
}
