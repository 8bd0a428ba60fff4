package source_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// restored is what a restore handed fn, applied as a stateful stage
// applies it: a nil value deletes the key.
type restored struct {
	state map[string]string
	calls int
}

// restore runs RestoreChanges into a fresh map.
func restore(t *testing.T, src *source.KafkaSource, stage, topic string, partition int32) restored {
	t.Helper()
	r := restored{state: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, src.RestoreChanges(ctx, stage, topic, partition, func(key, value []byte) error {
		r.calls++
		if value == nil {
			delete(r.state, string(key))
		} else {
			r.state[string(key)] = string(value)
		}
		return nil
	}))
	return r
}

func saveChanges(t *testing.T, src *source.KafkaSource, changes ...checkpoint.Change) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, src.SaveChanges(ctx, changes))
}

// keyChanges returns changes of keys k<from>..k<to-1> of stage's state of
// topic-partition to values tag-<i>.
func keyChanges(stage, topic string, partition int32, from, to int, tag string) []checkpoint.Change {
	var out []checkpoint.Change
	for i := from; i < to; i++ {
		out = append(out, checkpoint.Change{Stage: stage, Topic: topic, Partition: partition,
			Key: fmt.Appendf(nil, "k%06d", i), Value: fmt.Appendf(nil, "%s-%d", tag, i)})
	}
	return out
}

// withAndWithoutCache runs test with a source that keeps no cache and with
// one that keeps it in a fresh folder.
func withAndWithoutCache(t *testing.T, test func(t *testing.T, opts ...source.KafkaOption)) {
	t.Run("nocache", func(t *testing.T) { test(t) })
	t.Run("cache", func(t *testing.T) { test(t, source.KafkaStateDir(t.TempDir())) })
}

// TestChangelogRestoreGivesEachKeysLastValue ensures a restore leaves each
// key at its last saved value, deleted keys gone and empty values kept
// apart from deletions, whether changes came in one save or several.
func TestChangelogRestoreGivesEachKeysLastValue(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, opts ...source.KafkaOption) {
		brokers := startKafka(t, 3, "orders")
		src := newKafkaSource(t, brokers, "g", []string{"orders"}, opts...)
		saveChanges(t, src,
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("a"), Value: []byte("1")},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("b"), Value: []byte("1")},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("a"), Value: []byte("2")}, // same call
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte(""), Value: []byte("empty key")},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 2, Key: []byte("a"), Value: []byte("other partition")},
		)
		saveChanges(t, src,
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("b"), Value: nil}, // deleted
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("c"), Value: []byte{}},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("d"), Value: []byte("x")},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("d"), Value: nil},
			checkpoint.Change{Stage: "count", Topic: "orders", Partition: 1, Key: []byte("e"), Value: nil}, // never set
		)
		want := map[string]string{"a": "2", "": "empty key", "c": ""}
		got := restore(t, src, "count", "orders", 1)
		assert.Equal(t, want, got.state)

		// A fresh source (another process) restores the same from Kafka.
		other := newKafkaSource(t, brokers, "g", []string{"orders"}, opts...)
		assert.Equal(t, want, restore(t, other, "count", "orders", 1).state)
		assert.Equal(t, map[string]string{"a": "other partition"}, restore(t, other, "count", "orders", 2).state)
		assert.Zero(t, restore(t, other, "count", "orders", 0).calls, "partition 0 has nothing saved")
		assert.Zero(t, restore(t, other, "sum", "orders", 1).calls, "another stage has nothing saved")
	})
}

// TestChangelogRestoreWithoutCacheGivesEveryChangeInOrder ensures a
// restore without a cache hands fn the changes as saved, a deleted key's
// with a nil value (the contract allows either; this pins what it does).
func TestChangelogRestoreWithoutCacheGivesEveryChangeInOrder(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	src := newKafkaSource(t, brokers, "g", []string{"orders"})
	saveChanges(t, src,
		checkpoint.Change{Stage: "s", Topic: "orders", Key: []byte("a"), Value: []byte("1")},
		checkpoint.Change{Stage: "s", Topic: "orders", Key: []byte("a"), Value: nil},
		checkpoint.Change{Stage: "s", Topic: "orders", Key: []byte("b"), Value: []byte{}},
	)
	type kv struct {
		key     string
		value   []byte
		deleted bool
	}
	var got []kv
	require.NoError(t, src.RestoreChanges(context.Background(), "s", "orders", 0, func(key, value []byte) error {
		got = append(got, kv{string(key), bytes.Clone(value), value == nil})
		return nil
	}))
	assert.Equal(t, []kv{{"a", []byte("1"), false}, {"a", nil, true}, {"b", []byte{}, false}}, got)
}

// TestChangelogTopicsSharingAChangelogStayApart ensures two source topics
// whose partition 0 shares the stage's changelog partition restore only
// their own keys, also when the keys are the same.
func TestChangelogTopicsSharingAChangelogStayApart(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, opts ...source.KafkaOption) {
		brokers := startKafka(t, 2, "a", "ab")
		src := newKafkaSource(t, brokers, "g", []string{"a", "ab"}, opts...)
		saveChanges(t, src,
			checkpoint.Change{Stage: "s", Topic: "a", Key: []byte("k"), Value: []byte("from a")},
			checkpoint.Change{Stage: "s", Topic: "ab", Key: []byte("k"), Value: []byte("from ab")},
			// "a" + key "bk" must not read as "ab" + key "k".
			checkpoint.Change{Stage: "s", Topic: "a", Key: []byte("bk"), Value: []byte("from a, bk")},
		)
		saveChanges(t, src, checkpoint.Change{Stage: "s", Topic: "ab", Key: []byte("k"), Value: nil})
		assert.Equal(t, map[string]string{"k": "from a", "bk": "from a, bk"}, restore(t, src, "s", "a", 0).state)
		assert.Empty(t, restore(t, src, "s", "ab", 0).state)
	})
}

// TestChangelogTopicIsCompactedWithThePartitionsOfTheLargestSourceTopic
// ensures SaveChanges creates the changelog topic named after the group
// and the stage, compacted, with as many partitions as the largest source
// topic, and a change of source partition P lands in its partition P.
func TestChangelogTopicIsCompactedWithThePartitionsOfTheLargestSourceTopic(t *testing.T) {
	brokers := startKafka(t, 2, "small")
	adm := kadmClient(t, brokers)
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 5, -1, nil, "large")
	require.NoError(t, err)
	src := newKafkaSource(t, brokers, "billing", []string{"small", "large"})
	name, err := src.ChangelogTopic("per-user")
	require.NoError(t, err)
	assert.Equal(t, "billing-per-user-changelog", name)

	saveChanges(t, src, checkpoint.Change{Stage: "per-user", Topic: "large", Partition: 3, Key: []byte("k"), Value: []byte("v")})
	details, err := adm.ListTopics(ctx, name)
	require.NoError(t, err)
	require.NoError(t, details[name].Err)
	assert.Len(t, details[name].Partitions, 5)
	configs, err := adm.DescribeTopicConfigs(ctx, name)
	require.NoError(t, err)
	cfg, err := configs.On(name, nil)
	require.NoError(t, err)
	policy := ""
	for _, c := range cfg.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	assert.Equal(t, "compact", policy)
	ends, err := adm.ListEndOffsets(ctx, name)
	require.NoError(t, err)
	for p := int32(0); p < 5; p++ {
		o, _ := ends.Lookup(name, p)
		assert.Equal(t, map[bool]int64{true: 1, false: 0}[p == 3], o.Offset, "changelog partition %d", p)
	}
}

// TestChangelogGrowsWithASourceTopic ensures a change of a partition the
// changelog does not have yet (the source topic grew) adds partitions
// instead of failing.
func TestChangelogGrowsWithASourceTopic(t *testing.T) {
	brokers := startKafka(t, 2, "orders")
	src := newKafkaSource(t, brokers, "g", []string{"orders"})
	saveChanges(t, src, checkpoint.Change{Stage: "s", Topic: "orders", Partition: 1, Key: []byte("k"), Value: []byte("v1")})
	_, err := kadmClient(t, brokers).UpdatePartitions(context.Background(), 4, "orders")
	require.NoError(t, err)
	saveChanges(t, src, checkpoint.Change{Stage: "s", Topic: "orders", Partition: 3, Key: []byte("k"), Value: []byte("v3")})
	assert.Equal(t, map[string]string{"k": "v3"}, restore(t, src, "s", "orders", 3).state)
	assert.Equal(t, map[string]string{"k": "v1"}, restore(t, src, "s", "orders", 1).state)
}

// TestChangelogRestoreOfAMissingTopicCallsNothing ensures a stage that never
// saved (no changelog topic) restores nothing and creates no topic.
func TestChangelogRestoreOfAMissingTopicCallsNothing(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, opts ...source.KafkaOption) {
		brokers := startKafka(t, 1, "orders")
		src := newKafkaSource(t, brokers, "g", []string{"orders"}, opts...)
		assert.Zero(t, restore(t, src, "never", "orders", 0).calls)
		details, err := kadmClient(t, brokers).ListTopics(context.Background(), "g-never-changelog")
		require.NoError(t, err)
		assert.Error(t, details["g-never-changelog"].Err, "a restore must not create the topic")
	})
}

// TestChangelogSaveRefusesAnInvalidChangeAndSavesNoneOfTheCall ensures an
// invalid change fails the whole call with ErrInvalidChange before any is
// written.
func TestChangelogSaveRefusesAnInvalidChangeAndSavesNoneOfTheCall(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	src := newKafkaSource(t, brokers, "g", []string{"orders"})
	good := checkpoint.Change{Stage: "s", Topic: "orders", Key: []byte("k"), Value: []byte("v")}
	for name, bad := range map[string]checkpoint.Change{
		"nil key":            {Stage: "s", Topic: "orders", Key: nil, Value: []byte("v")},
		"empty stage":        {Stage: "", Topic: "orders", Key: []byte("k")},
		"stage with a slash": {Stage: "a/b", Topic: "orders", Key: []byte("k")},
		"empty topic":        {Stage: "s", Topic: "", Key: []byte("k")},
		"negative partition": {Stage: "s", Topic: "orders", Partition: -1, Key: []byte("k")},
	} {
		t.Run(name, func(t *testing.T) {
			err := src.SaveChanges(context.Background(), []checkpoint.Change{good, bad})
			require.ErrorIs(t, err, checkpoint.ErrInvalidChange)
		})
	}
	assert.Zero(t, src.ChangelogStats().SavedChanges)
	assert.Zero(t, restore(t, src, "s", "orders", 0).calls, "the valid change before the invalid one was saved")
	err := src.RestoreChanges(context.Background(), "a/b", "orders", 0, func(_, _ []byte) error { return nil })
	require.ErrorIs(t, err, checkpoint.ErrInvalidChange)
	err = src.RestoreChanges(context.Background(), "s", "orders", -1, func(_, _ []byte) error { return nil })
	require.ErrorIs(t, err, checkpoint.ErrInvalidChange)
}

// TestChangelogTopicNameTooLongIsAnErrorNamingGroupAndStage ensures a
// group and stage whose changelog name Kafka would refuse fail with an
// error that says which.
func TestChangelogTopicNameTooLongIsAnErrorNamingGroupAndStage(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	group := strings.Repeat("g", 200)
	stage := strings.Repeat("s", 45)
	src := newKafkaSource(t, brokers, group, []string{"orders"})
	err := src.SaveChanges(context.Background(), []checkpoint.Change{{Stage: stage, Topic: "orders", Key: []byte("k")}})
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	var ce *source.ChangelogError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, group, ce.Group)
	assert.Equal(t, stage, ce.Stage)
	assert.Contains(t, err.Error(), "is 256 bytes long")

	bad := newKafkaSource(t, brokers, "team a", []string{"orders"}) // a space: a legal group, not a legal topic
	_, err = bad.ChangelogTopic("s")
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	assert.Contains(t, err.Error(), `group "team a"`)
}

// TestChangelogRestoreReturnsTheFirstErrorOfFn ensures fn's error stops
// the restore and comes back wrapped, naming the stage and partition.
func TestChangelogRestoreReturnsTheFirstErrorOfFn(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, opts ...source.KafkaOption) {
		brokers := startKafka(t, 1, "orders")
		src := newKafkaSource(t, brokers, "g", []string{"orders"}, opts...)
		saveChanges(t, src, keyChanges("s", "orders", 0, 0, 10, "v")...)
		boom := errors.New("boom")
		calls := 0
		err := src.RestoreChanges(context.Background(), "s", "orders", 0, func(_, _ []byte) error {
			calls++
			if calls == 3 {
				return boom
			}
			return nil
		})
		require.ErrorIs(t, err, boom)
		assert.Equal(t, 3, calls)
		assert.Contains(t, err.Error(), "stage s changelog g-s-changelog partition 0")
	})
}

// TestChangelogRestoreHonoursTheContext ensures a restore with a context
// already done returns the context's error and calls nothing.
func TestChangelogRestoreHonoursTheContext(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	src := newKafkaSource(t, brokers, "g", []string{"orders"})
	saveChanges(t, src, keyChanges("s", "orders", 0, 0, 10, "v")...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := src.RestoreChanges(ctx, "s", "orders", 0, func(_, _ []byte) error { t.Error("fn called"); return nil })
	require.ErrorIs(t, err, context.Canceled)
}

// TestChangelogCacheMakesARestoreReadOnlyTheTail ensures that with a state
// folder a second restore loads the snapshot and reads from Kafka only
// the records saved since, by another process, and that changes this
// process saved after its restore are in its cache already.
func TestChangelogCacheMakesARestoreReadOnlyTheTail(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	dir := t.TempDir()
	a := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	saveChanges(t, a, keyChanges("s", "orders", 0, 0, 1000, "v1")...)
	got := restore(t, a, "s", "orders", 0)
	require.Len(t, got.state, 1000)
	st := a.ChangelogStats()
	assert.EqualValues(t, 1000, st.RestoredRecords, "the first restore reads the whole changelog")

	// Saved after the restore, by the process that restored: appended to
	// its cache, so a restart reads nothing from Kafka.
	saveChanges(t, a, keyChanges("s", "orders", 0, 900, 1100, "v2")...)
	require.NoError(t, a.Close())
	b := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	got = restore(t, b, "s", "orders", 0)
	want := map[string]string{}
	for i := range 1100 {
		want[fmt.Sprintf("k%06d", i)] = fmt.Sprintf("v%d-%d", map[bool]int{true: 2, false: 1}[i >= 900], i)
	}
	assert.Equal(t, want, got.state)
	assert.Zero(t, b.ChangelogStats().RestoredRecords, "the cache was up to date")
	assert.EqualValues(t, 1200, b.ChangelogStats().CachedEntries, "the restore's 1,000 and the save's 200")

	// Saved by another process without the cache (the partition moved
	// away and back): b reads only those 50 records.
	other := newKafkaSource(t, brokers, "g", []string{"orders"})
	saveChanges(t, other, keyChanges("s", "orders", 0, 1050, 1100, "v3")...)
	got = restore(t, b, "s", "orders", 0)
	for i := 1050; i < 1100; i++ {
		want[fmt.Sprintf("k%06d", i)] = fmt.Sprintf("v3-%d", i)
	}
	assert.Equal(t, want, got.state)
	assert.EqualValues(t, 50, b.ChangelogStats().RestoredRecords, "only the tail is read from Kafka")
	assert.Zero(t, b.ChangelogStats().CacheIgnored)
}

// cacheFile returns the one cache file under dir.
func cacheFile(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.cache"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	return files[0]
}

// paddedChanges is keyChanges with 32-byte values, so that 40,000 of them
// outgrow the cache's 1 MiB slack and the cache is compacted.
func paddedChanges(from, to int, tag string) []checkpoint.Change {
	cs := keyChanges("s", "orders", 0, from, to, tag)
	for i := range cs {
		cs[i].Value = fmt.Appendf(cs[i].Value, "-%0*d", 31-len(cs[i].Value), 0)
	}
	return cs
}

// waitCompactions waits until src's cache has been compacted n times.
func waitCompactions(t *testing.T, src *source.KafkaSource, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d cache compactions", n), func() bool { return src.ChangelogStats().CacheCompactions >= n })
	require.Zero(t, src.ChangelogStats().CacheErrors)
}

// TestChangelogCacheDamageIsIgnoredAndTheRestoreStaysCorrect ensures a
// damaged cache file costs only a longer restore, never a wrong state: a
// byte flipped in the snapshot makes the file ignored whole; a byte
// flipped in the last batch, or the last batch cut short (a crash while
// appending), drops only that batch; a file that is not a cache, or
// empty, is ignored. The restore then leaves a whole file again.
func TestChangelogCacheDamageIsIgnoredAndTheRestoreStaysCorrect(t *testing.T) {
	const keys, batch = 40_000, 100 // the snapshot: 40,000 keys; the last batch: 100 changes
	flip := func(at func(size int) int) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[at(len(b))] ^= 0x40
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}
	}
	for _, tc := range []struct {
		name      string
		damage    func(t *testing.T, path string)
		ignored   int64 // cache files ignored
		fromKafka int64 // records the restore reads from Kafka
	}{
		{"flipped byte in the snapshot", flip(func(n int) int { return n / 3 }), 1, keys + batch},
		{"flipped byte in the last batch", flip(func(n int) int { return n - 20 }), 0, batch},
		{"last batch cut short", func(t *testing.T, path string) {
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, info.Size()-7))
		}, 0, batch},
		{"not a cache file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte("not a cache file at all"), 0o644))
		}, 1, keys + batch},
		{"empty file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o644))
		}, 1, keys + batch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := startKafka(t, 1, "orders")
			dir := t.TempDir()
			a := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
			saveChanges(t, a, paddedChanges(0, keys, "v1")...)
			restore(t, a, "s", "orders", 0) // 1.3 MiB of batches: compacted into a snapshot
			waitCompactions(t, a, 1)
			saveChanges(t, a, paddedChanges(keys-50, keys+50, "v2")...) // appended as one batch
			require.NoError(t, a.Close())
			tc.damage(t, cacheFile(t, dir))

			b := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
			got := restore(t, b, "s", "orders", 0)
			want := map[string]string{}
			for _, c := range append(paddedChanges(0, keys, "v1"), paddedChanges(keys-50, keys+50, "v2")...) {
				want[string(c.Key)] = string(c.Value)
			}
			assert.Equal(t, want, got.state)
			st := b.ChangelogStats()
			assert.Equal(t, tc.ignored, st.CacheIgnored)
			assert.Equal(t, tc.fromKafka, st.RestoredRecords)
			require.NoError(t, b.Close())

			// The file is whole again: the next restore reads nothing.
			c := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
			assert.Equal(t, want, restore(t, c, "s", "orders", 0).state)
			assert.Zero(t, c.ChangelogStats().RestoredRecords)
			assert.Zero(t, c.ChangelogStats().CacheIgnored)
		})
	}
}

// TestChangelogCacheOfARecreatedTopicIsIgnored ensures a source whose
// changelog topic was deleted makes it again at its next save, and that a
// cache file written for the old topic (whose offsets start over and may
// even pass the cache's) is not applied.
func TestChangelogCacheOfARecreatedTopicIsIgnored(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	dir := t.TempDir()
	a := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	saveChanges(t, a, keyChanges("s", "orders", 0, 0, 20, "old")...)
	restore(t, a, "s", "orders", 0) // the cache reflects offset 20

	adm := kadmClient(t, brokers)
	_, err := adm.DeleteTopic(context.Background(), "g-s-changelog")
	require.NoError(t, err)
	// The source that made the topic finds it gone and makes it again;
	// 30 new records put the new topic's end (30) past the cache's
	// offset, so only the topic ID tells the incarnations apart.
	eventually(t, "the changelog is recreated", func() bool {
		return a.SaveChanges(context.Background(), keyChanges("s", "orders", 0, 100, 130, "new")) == nil
	})
	require.NoError(t, a.Close())
	b := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	got := restore(t, b, "s", "orders", 0)
	want := map[string]string{}
	for i := 100; i < 130; i++ {
		want[fmt.Sprintf("k%06d", i)] = fmt.Sprintf("new-%d", i)
	}
	assert.Equal(t, want, got.state)
	assert.EqualValues(t, 1, b.ChangelogStats().CacheIgnored)
}

// TestChangelogCacheOlderThanTheTombstoneRetentionIsIgnored ensures a cache
// file last brought up to date longer ago than the changelog keeps
// tombstones (delete.retention.ms, 24 h by default) is ignored: Kafka may
// have compacted away a deletion saved after it, which reading only the
// tail would miss.
func TestChangelogCacheOlderThanTheTombstoneRetentionIsIgnored(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	dir := t.TempDir()
	a := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	saveChanges(t, a, keyChanges("s", "orders", 0, 0, 10, "v")...)
	restore(t, a, "s", "orders", 0)
	require.NoError(t, a.Close())

	// A day and a minute old: ignored.
	old := time.Now().Add(-24*time.Hour - time.Minute)
	require.NoError(t, os.Chtimes(cacheFile(t, dir), old, old))
	b := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	assert.Len(t, restore(t, b, "s", "orders", 0).state, 10)
	assert.EqualValues(t, 1, b.ChangelogStats().CacheIgnored)
	assert.EqualValues(t, 10, b.ChangelogStats().RestoredRecords)
	require.NoError(t, b.Close())

	// A restore that found nothing new still marks the file as up to
	// date now.
	require.NoError(t, os.Chtimes(cacheFile(t, dir), time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
	c := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	restore(t, c, "s", "orders", 0)
	info, err := os.Stat(cacheFile(t, dir))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), info.ModTime(), time.Minute)
	assert.Zero(t, c.ChangelogStats().CacheIgnored)
}

// TestChangelogCacheIsCompactedOnceTheBatchesOutgrowTheSnapshot ensures
// the batches appended after a snapshot do not grow the file without
// bound: once they outgrow the snapshot by 1 MiB the file is rewritten as
// one snapshot, in the background, and still restores the state.
func TestChangelogCacheIsCompactedOnceTheBatchesOutgrowTheSnapshot(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	dir := t.TempDir()
	a := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	saveChanges(t, a, keyChanges("s", "orders", 0, 0, 100, "v0")...)
	restore(t, a, "s", "orders", 0)
	// 100 keys changed over and over: about 40 KiB per save, 1.6 MiB in
	// all, for a state of 4 KiB.
	for round := 1; round <= 40; round++ {
		var cs []checkpoint.Change
		for i := range 1000 {
			cs = append(cs, checkpoint.Change{Stage: "s", Topic: "orders", Key: fmt.Appendf(nil, "k%06d", i%100),
				Value: fmt.Appendf(nil, "round-%d-%d-%s", round, i, strings.Repeat("x", 20))})
		}
		saveChanges(t, a, cs...)
	}
	waitCompactions(t, a, 1)
	require.NoError(t, a.Close()) // waits for a compaction still running
	info, err := os.Stat(cacheFile(t, dir))
	require.NoError(t, err)
	assert.Less(t, info.Size(), int64(1<<20+100<<10), "the file stays below the snapshot plus 1 MiB of batches")

	b := newKafkaSource(t, brokers, "g", []string{"orders"}, source.KafkaStateDir(dir))
	got := restore(t, b, "s", "orders", 0)
	require.Len(t, got.state, 100)
	assert.Equal(t, "round-40-999-"+strings.Repeat("x", 20), got.state["k000099"])
	assert.Zero(t, b.ChangelogStats().RestoredRecords)
}

// TestChangelogRecordsCarryTheGroupGeneration ensures a member in its group
// stamps its changes with its generation, for later fencing.
func TestChangelogRecordsCarryTheGroupGeneration(t *testing.T) {
	brokers := startKafka(t, 1, "orders")
	produce(t, brokers, []*kgo.Record{{Topic: "orders", Value: []byte("x")}})
	src := newKafkaSource(t, brokers, "g", []string{"orders"})
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	elems, err := src.Read(ctx) // joins the group
	require.NoError(t, err)
	require.Len(t, elems, 1)
	saveChanges(t, src, checkpoint.Change{Stage: "s", Topic: "orders", Key: []byte("k"), Value: []byte("v")})

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("g-s-changelog"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	fetches := cl.PollFetches(ctx)
	require.NoError(t, fetches.Err())
	recs := fetches.Records()
	require.Len(t, recs, 1)
	require.Len(t, recs[0].Headers, 1)
	assert.Equal(t, "strom.generation", recs[0].Headers[0].Key)
	assert.Regexp(t, `^[0-9]+$`, string(recs[0].Headers[0].Value))
}

func kadmClient(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestKafkaChangelogDropsChangesOfPartitionsThisMemberDoesNotOwn ensures
// that a member in its group never writes the state of a partition of its
// topics that it does not own (revoked or lost since the changes were
// taken), while the changes of partitions it owns, and of other topics (a
// Repartition's), are saved.
func TestKafkaChangelogDropsChangesOfPartitionsThisMemberDoesNotOwn(t *testing.T) {
	brokers := startKafka(t, 2, "owned")
	produceN(t, brokers, "owned", 4, 0, 1)
	src := newKafkaSource(t, brokers, "g-owned", []string{"owned"})
	rec := &hookRecorder{}
	src.SetRebalanceHooks(rec)
	readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 8 })
	// Both partitions are this member's; pretend partition 1 was taken
	// by losing it the way kgo reports a loss.
	src.LoseForTest("owned", 1)
	err := src.SaveChanges(context.Background(), []checkpoint.Change{
		{Stage: "count", Topic: "owned", Partition: 0, Key: []byte("a"), Value: []byte("1")},
		{Stage: "count", Topic: "owned", Partition: 1, Key: []byte("b"), Value: []byte("2")},
		{Stage: "count", Topic: "other", Partition: 1, Key: []byte("c"), Value: []byte("3")},
	})
	require.NoError(t, err)
	got := func(topic string, p int32) map[string]string {
		m := map[string]string{}
		require.NoError(t, src.RestoreChanges(context.Background(), "count", topic, p, func(k, v []byte) error {
			m[string(k)] = string(v)
			return nil
		}))
		return m
	}
	require.Equal(t, map[string]string{"a": "1"}, got("owned", 0))
	require.Empty(t, got("owned", 1), "partition 1 is not this member's: its state is not written")
	require.Equal(t, map[string]string{"c": "3"}, got("other", 1), "another topic's state passes")
}

// TestRunRefusesAStageWhoseChangelogTopicCannotBeNamedAtOnce ensures a group
// or stage name that makes no legal changelog topic name fails Run at its
// start, naming both, instead of at the first assignment as a source
// failure that stream.Forever would retry forever.
func TestRunRefusesAStageWhoseChangelogTopicCannotBeNamedAtOnce(t *testing.T) {
	brokers := startKafka(t, 1, "named")
	src, err := source.Kafka(brokers, "my group", []string{"named"})
	require.NoError(t, err)
	k := stream.KeyBy(stream.From(src), func(r log.Record) string { return string(r.Key) }).FollowsPartitioning()
	err = stream.Aggregate(k, stream.Count[log.Record](), stream.Name("per-key")).Checkpointing(src).Run(context.Background())
	require.ErrorIs(t, err, log.ErrInvalidTopic)
	require.ErrorContains(t, err, "my group")
	require.ErrorContains(t, err, "per-key")
}

func TestKafkaStateDirThatIsAFileIsRefusedByKafka(t *testing.T) {
	f := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err := source.Kafka([]string{"127.0.0.1:1"}, "g", []string{"t"}, source.KafkaStateDir(f))
	require.ErrorIs(t, err, syscall.ENOTDIR)
	require.ErrorContains(t, err, f)
}
