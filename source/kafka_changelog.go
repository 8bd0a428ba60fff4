package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/log"
)

// This file makes a KafkaSource the checkpoint.ChangelogStore of its
// group: the state of a pipeline's stateful stages lives in Kafka, in
// compacted changelog topics, so that a partition's state follows the
// partition to whichever member of the group owns it. ChangelogTopic
// says how the topics are named and made, SaveChanges how they are
// written, RestoreChanges how they are read, KafkaStateDir what the local
// snapshot cache keeps and when (its file format is in
// kafka_changelog_cache.go).

// DefaultChangelogFetchBytes is how many bytes of a changelog partition
// one fetch of a restore asks for: 16 MiB (Kafka's fetch.max.bytes
// default is 50 MiB, max.partition.fetch.bytes 1 MiB).
const DefaultChangelogFetchBytes = 16 << 20

// changelogTopicSuffix ends every changelog topic's name, as in Kafka
// Streams.
const changelogTopicSuffix = "-changelog"

// generationHeader is the record header carrying the writer's group
// generation.
const generationHeader = "strom.generation"

// The interfaces a KafkaSource implements as a changelog store.
var _ checkpoint.ChangelogStore = (*KafkaSource)(nil)

// KafkaStateDir keeps a local snapshot cache of the changelogs in the
// folder dir, created when missing, so that a restore reads from Kafka
// only the changelog records written since the cache's snapshot. The
// default, "", keeps no cache: every restore reads the whole changelog
// partition. Sources of different groups may share a folder; two sources
// of one group, in one process or in several, must not.
//
// # What it keeps, and when
//
// One file per (stage, source topic, partition) restored here, at
// DIR/GROUP-STAGE-changelog/TOPIC-PARTITION.cache: a snapshot of the
// state (each live key's last value), then batches of changes, and the
// changelog offset the whole reflects. A restore hands fn the file's
// changes and reads from Kafka only the records from that offset on,
// appending them to the file as it goes. While the partition stays with
// this member every SaveChanges appends its acknowledged changes to the
// file, not fsynced: a crash may cut them, which the checksums detect,
// and the next restore reads that much more of the changelog. Once the
// batches outgrow the snapshot by 1 MiB a background compaction rewrites
// the file as one snapshot (a temporary file, fsynced, renamed over it,
// the folder fsynced; saves wait only while it copies the batches
// appended meanwhile): the file stays below twice the state plus 1 MiB,
// and a rewrite, whose cost grows with the state, comes after as many
// bytes of changes as the state holds. Appending at every save, rather
// than writing a snapshot every N seconds or at Close, keeps a save's
// cost in proportion to the keys it changed and leaves a member killed
// at any moment a cache at most one checkpoint behind. Close fsyncs the
// files and stops a compaction still running (the file stays as it was).
//
// Measured (BenchmarkChangelogRestore, in-process kfake, 2 cores, 2026-12):
// restoring 1,000,000 keys of 16 B keys and values (37 MiB of changes)
// took 0.27-0.35 s from Kafka alone, 0.05 s from an up-to-date cache,
// 0.03-0.05 s from the cache and a tail of 10,000 keys, and 0.31 s into
// an empty folder (reading Kafka and writing the file). The goal
// is 1 s + 0.3 s per GiB.
//
// Batches are appended only while the partition stays under the
// assignment the restore ran for (for a source not in its group: while it
// has none): the file's offset says that every record of the source topic
// below it is in the file, which holds only while no other member writes
// them.
//
// # When a file is ignored
//
// The changelog is the truth; the cache only saves reading it. A file is
// ignored, and the restore reads the whole changelog as without one, when
// it is damaged before its snapshot ends (a frame fails its CRC32C), when
// it belongs to another incarnation of the changelog topic (its topic ID,
// from the metadata, differs: the topic was deleted and created again),
// when its offset is beyond the changelog's end or below its start (a
// broker without topic IDs, a truncated log), and when it was last
// brought up to date (its modification time) longer ago than the
// changelog's delete.retention.ms, [DefaultDeleteRetention] unless the
// topic says otherwise: compaction may since have removed a tombstone
// written after the file's offset, and the file would keep a deleted key
// alive. Damage after the snapshot
// costs only the batches from the first damaged frame on. The restore
// then rewrites the file. [KafkaSource.ChangelogStats] counts the files
// ignored and the cache's write errors, which never fail a restore or a
// save. [Kafka] returns an error wrapping syscall.ENOTDIR when dir exists
// and is not a directory.
func KafkaStateDir(dir string) KafkaOption {
	return func(c *kafkaConfig) { c.stateDir = dir }
}

// ChangelogError is the error of [KafkaSource.SaveChanges] and
// [KafkaSource.RestoreChanges] for a changelog that could not be named,
// created, written or read. It names the group, the stage, the changelog
// topic and partition and wraps the cause.
type ChangelogError struct {
	Group     string // the consumer group
	Stage     string // the stateful stage
	Changelog string // the changelog topic; "" when its name is not legal
	Partition int32  // the changelog partition (the source partition); AllPartitions for the whole topic
	Err       error  // the cause
}

// Error returns "source: kafka group G stage S changelog C partition P:
// cause", without "partition P" for [AllPartitions].
func (e *ChangelogError) Error() string {
	where := fmt.Sprintf("source: kafka group %s stage %s", e.Group, e.Stage)
	if e.Changelog != "" {
		where += " changelog " + e.Changelog
	}
	if e.Partition != AllPartitions {
		where += " partition " + strconv.Itoa(int(e.Partition))
	}
	return where + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ChangelogError) Unwrap() error { return e.Err }

// KafkaChangelogStats counts what a [KafkaSource] did as a changelog store.
type KafkaChangelogStats struct {
	SavedChanges     int64 // changes Kafka acknowledged
	SavedBytes       int64 // bytes of the keys (source-topic prefix included) and values of those changes
	SavedBatchBytes  int64 // bytes of the record batches written to Kafka, after compression, without batch headers
	Restores         int64 // RestoreChanges calls that returned nil
	RestoredRecords  int64 // changelog records restores read from Kafka (those of other source topics sharing the partition included)
	CachedEntries    int64 // entries restores read from local snapshot caches instead (superseded ones included)
	CacheIgnored     int64 // cache files ignored: damaged, of another topic incarnation, beyond the changelog's end
	CacheCompactions int64 // cache files rewritten as one snapshot, in the background, once their appended batches outgrew the snapshot
	CacheErrors      int64 // failures to write a cache file (the restore or save itself succeeded; the file is then not used until the next restore)
}

// kafkaChangelog is what a KafkaSource keeps as a changelog store. The
// zero value is ready to use.
type kafkaChangelog struct {
	mu     sync.Mutex                        // guards what follows
	cl     *kgo.Client                       // produces, fetches and administers changelogs; nil until needed and after Close
	known  map[string]changelogTopicInfo     // changelog topics found or created by SaveChanges
	caches map[changelogPart]*changelogCache // cache files open for appending

	bgCtx    context.Context    // cancelled by Close; nil until the first client and after Close
	bgCancel context.CancelFunc // cancels bgCtx
	bg       sync.WaitGroup     // background compactions, which Close waits for

	saved, savedBytes, batchBytes, restores, restored, cached, ignored, compactions, cacheErrors atomic.Int64
}

// changelogPart names one stage's state of one source partition.
type changelogPart struct {
	stage, topic string
	partition    int32
}

// changelogTopicInfo is what the metadata says of a changelog topic.
type changelogTopicInfo struct {
	id         [16]byte
	partitions int32
	leaders    []int32 // by partition
}

// ChangelogStats returns the source's changelog counters since it was
// built.
func (s *KafkaSource) ChangelogStats() KafkaChangelogStats {
	c := &s.changelog
	return KafkaChangelogStats{
		SavedChanges:     c.saved.Load(),
		SavedBytes:       c.savedBytes.Load(),
		SavedBatchBytes:  c.batchBytes.Load(),
		Restores:         c.restores.Load(),
		RestoredRecords:  c.restored.Load(),
		CachedEntries:    c.cached.Load(),
		CacheIgnored:     c.ignored.Load(),
		CacheCompactions: c.compactions.Load(),
		CacheErrors:      c.cacheErrors.Load(),
	}
}

// changelogCompactionLag is the min.compaction.lag.ms of the changelog
// topics SaveChanges creates: a change stays in the log whole for an hour
// after a later change of its key, so that a restore that finds the changes
// of a save cut short by a crash (after the partition's last marks) can
// undo them to what they replaced (stream's partition state).
const changelogCompactionLag = time.Hour

// ChangelogTopic returns the name of stage's changelog topic,
// "GROUP-STAGE-changelog", as Kafka Streams names a store's. It returns a
// [*ChangelogError] wrapping [checkpoint.ErrInvalidChange] when stage
// breaks the rule of state names, and one wrapping [log.ErrInvalidTopic]
// naming the group and the stage when the name is not a legal topic name
// (the group has characters a topic may not, or the name is longer than
// 249 bytes).
//
// # Changelog topics
//
// Each stateful stage has one changelog topic. SaveChanges creates it
// when it is missing, with cleanup.policy=compact, min.compaction.lag.ms of
// an hour (changelogCompactionLag), the broker's default
// replication factor, and as many partitions as the largest partition
// count among the source's topics; it adds partitions when a change names
// a partition beyond them (a source topic grew). The change of source
// partition P goes to changelog partition P, so a partition's state is
// one changelog partition's records. Source topics share their stage's
// changelog: a record's key is the source topic, length-prefixed (its
// length as a uvarint, then the name), followed by the change's key; its
// value is the change's value, or null for a deleted key (a tombstone,
// which compaction removes in time). An existing topic's configuration is
// not checked: one whose cleanup.policy is delete loses the changes its
// retention drops, and with them state; give an existing changelog
// cleanup.policy=compact. An existing topic with fewer partitions than a
// change needs is given more.
func (s *KafkaSource) ChangelogTopic(stage string) (string, error) {
	if err := topicname.Validate(stage); err != nil {
		return "", &ChangelogError{Group: s.group, Stage: stage, Partition: AllPartitions,
			Err: fmt.Errorf("%w: stage name %w", checkpoint.ErrInvalidChange, err)}
	}
	name := s.group + "-" + stage + changelogTopicSuffix
	if err := log.ValidateTopicName(name); err != nil {
		return "", &ChangelogError{Group: s.group, Stage: stage, Partition: AllPartitions,
			Err: fmt.Errorf("the changelog topic of group %q and stage %q: %w", s.group, stage, err)}
	}
	return name, nil
}

// validateChangeTarget checks a change's, or a restore's, source topic and
// partition.
func validateChangeTarget(stage, topic string, partition int32) error {
	if err := topicname.Validate(topic); err != nil {
		return fmt.Errorf("%w: stage %q: topic %w", checkpoint.ErrInvalidChange, stage, err)
	}
	if partition < 0 {
		return fmt.Errorf("%w: stage %q: partition %d of topic %q is negative", checkpoint.ErrInvalidChange, stage, partition, topic)
	}
	return nil
}

// changelogClient returns the client of the changelogs, creating it: the
// source's brokers and KafkaClientOpts, then what the changelogs need.
func (s *KafkaSource) changelogClient() (*kgo.Client, error) {
	c := &s.changelog
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil {
		return c.cl, nil
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.brokers...),
		// A save waits for its acknowledgements: lingering only delays it.
		kgo.ProducerLinger(0),
		// The first record to a topic just created waits for the client's
		// next metadata refresh, at most once per MetadataMinAge since the
		// last: with the default 5 s, a stage's first save took 5.05 s on
		// kfake; with 250 ms, 0.26 s.
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	opts = append(opts, s.cfg.clientOpts...)
	opts = append(opts,
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // change of source partition P -> changelog partition P
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Without idempotence (DisableIdempotentWrite among the client
		// options) one request in flight per broker keeps a partition's
		// records in order; with it, this has no effect.
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.WithHooks(changelogHooks{c}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, s.kafkaErr(err)
	}
	c.cl = cl
	if c.bgCtx == nil {
		c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	}
	return cl, nil
}

// changelogHooks counts the bytes written to changelog topics.
type changelogHooks struct{ c *kafkaChangelog }

func (h changelogHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.c.batchBytes.Add(int64(m.CompressedBytes))
}

// closeChangelog closes the changelog client and the cache files (fsynced
// first, so that a clean stop keeps the batches appended to them). Close
// calls it after leaving the group, whose revocations may still save.
func (s *KafkaSource) closeChangelog() {
	c := &s.changelog
	c.mu.Lock()
	cl, caches, cancel := c.cl, c.caches, c.bgCancel
	c.cl, c.caches, c.known, c.bgCtx, c.bgCancel = nil, nil, nil, nil, nil
	c.mu.Unlock()
	if cancel != nil {
		cancel() // a compaction gives up, leaving its file as it was
	}
	c.bg.Wait()
	for _, cc := range caches {
		cc.close(true)
	}
	if cl != nil {
		cl.Close()
	}
}

// SaveChanges writes changes to their stages' changelog topics
// (checkpoint.ChangelogStore) and returns once Kafka acknowledged every
// one, creating the topics when missing (see [KafkaSource.ChangelogTopic]).
// It produces with a client of its own, made at the first save or restore
// from the source's brokers and [KafkaClientOpts] and closed by Close:
// idempotent, acks from all in-sync replicas, changes of one partition
// written in order. With [KafkaStateDir] it also appends the changes to
// the cache files of the partitions restored here.
//
// Each record carries a header "strom.generation", the member's group
// generation in decimal, when the source is in its group. The header
// fences nothing by itself: Kafka stores whatever a member expelled from
// the group (a zombie) still writes, and a restore applies it after the
// new owner's changes. It is there for a later fencing: a transaction per
// generation, or a restore that drops records of an older generation
// found after a newer one.
//
// A change of a partition of one of the source's own topics that this
// member does not own now (while it is in its group) is dropped, counted in
// [KafkaStats].DroppedSaves: a member that knows the partition was taken
// (revoked, or lost when its session expired) never writes its state again;
// the new owner's is the one saved. A member that does not know yet is
// fenced only by a transaction (exactly-once, a later step).
//
// It returns an error wrapping [checkpoint.ErrInvalidChange] for a change
// with an invalid stage name, topic or partition or a nil key, writing
// none of them then; a [*ChangelogError] naming the stage, the changelog
// topic and partition for a topic that could not be named, created or
// written (the caller must then assume any prefix of the changes may be
// saved); ctx.Err() when ctx ends first. A save may take as long as ctx
// allows; making a topic waits at most [KafkaTimeout].
func (s *KafkaSource) SaveChanges(ctx context.Context, changes []checkpoint.Change) error {
	changes = s.ownChanges(changes)
	if len(changes) == 0 {
		return nil
	}
	names := make(map[string]string)   // stage -> changelog topic
	need := make(map[string]int32)     // changelog topic -> partitions needed
	stageOf := make(map[string]string) // changelog topic -> stage, for errors
	keyBytes := 0
	for i := range changes {
		c := &changes[i]
		if err := validateChangeTarget(c.Stage, c.Topic, c.Partition); err != nil {
			return err
		}
		if c.Key == nil {
			return fmt.Errorf("%w: stage %q, %s/%d: nil key", checkpoint.ErrInvalidChange, c.Stage, c.Topic, c.Partition)
		}
		name, ok := names[c.Stage]
		if !ok {
			var err error
			if name, err = s.ChangelogTopic(c.Stage); err != nil {
				return err
			}
			names[c.Stage], stageOf[name] = name, c.Stage
		}
		need[name] = max(need[name], c.Partition+1)
		keyBytes += binary.MaxVarintLen64 + len(c.Topic) + len(c.Key)
	}
	cl, err := s.changelogClient()
	if err != nil {
		return err
	}
	for name, n := range need {
		if _, err := s.ensureChangelog(ctx, cl, stageOf[name], name, n); err != nil {
			return err
		}
	}
	// Under exactly-once the changes go into the open transaction, with
	// the transactional client.
	pcl := cl
	s.mu.Lock()
	t := s.txn
	if t != nil && s.cl != nil {
		pcl = s.cl
	}
	s.mu.Unlock()
	if t != nil {
		for name, n := range need {
			if t.known[name] >= n {
				continue
			}
			tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
			err := waitProducerSees(tctx, pcl, name, n)
			cancel()
			if err != nil {
				return &ChangelogError{Group: s.group, Stage: stageOf[name], Changelog: name, Partition: AllPartitions, Err: err}
			}
			t.known[name] = n
		}
	}

	var headers []kgo.RecordHeader
	if gen, ok := s.generation(); ok {
		headers = []kgo.RecordHeader{{Key: generationHeader, Value: strconv.AppendInt(nil, int64(gen), 10)}}
	}
	recs := make([]kgo.Record, len(changes))
	ptrs := make([]*kgo.Record, len(changes))
	arena := make([]byte, 0, keyBytes) // every record's key, in one allocation
	var bytes int64
	for i := range changes {
		c := &changes[i]
		start := len(arena)
		arena = binary.AppendUvarint(arena, uint64(len(c.Topic)))
		arena = append(arena, c.Topic...)
		arena = append(arena, c.Key...)
		key := arena[start:len(arena):len(arena)]
		recs[i] = kgo.Record{Topic: names[c.Stage], Partition: c.Partition, Key: key, Value: c.Value, Headers: headers}
		ptrs[i] = &recs[i]
		bytes += int64(len(key) + len(c.Value))
	}
	results := pcl.ProduceSync(ctx, ptrs...)
	var (
		first  error
		failed = make(map[changelogPart]bool)
		reset  bool // a changelog topic was deleted
	)
	for i, r := range results {
		if r.Err == nil {
			continue
		}
		c := &changes[i]
		failed[changelogPart{c.Stage, c.Topic, c.Partition}] = true
		if errors.Is(r.Err, kerr.UnknownTopicOrPartition) || errors.Is(r.Err, kerr.UnknownTopicID) {
			reset = true
		}
		if first == nil {
			if ctx.Err() != nil && errors.Is(r.Err, ctx.Err()) {
				first = ctx.Err()
			} else {
				first = &ChangelogError{Group: s.group, Stage: c.Stage, Changelog: r.Record.Topic, Partition: r.Record.Partition,
					Err: fmt.Errorf("kafka produce: %w", r.Err)}
			}
		}
	}
	if first == nil {
		s.changelog.saved.Add(int64(len(changes)))
		s.changelog.savedBytes.Add(bytes)
	}
	if t != nil {
		// A cache holds committed changes only: these join it when
		// their transaction commits (EndTransaction).
		if first == nil {
			t.saved = append(t.saved, txnSave{changes: slices.Clone(changes), recs: recs})
		}
		return first
	}
	s.appendToCaches(changes, recs, failed)
	if reset {
		s.resetChangelogClient(cl)
	}
	return first
}

// resetChangelogClient closes cl, the changelog client, and forgets the
// topics SaveChanges made, so that the next save makes them again with a
// new client. A save found a changelog topic deleted: the client would
// otherwise go on producing to the topic's old ID (UNKNOWN_TOPIC_ID), as
// kgo v1.22.3 did on kfake for as long as the test waited (60 s), even
// with ForceMetadataRefresh. A restore using cl meanwhile fails.
func (s *KafkaSource) resetChangelogClient(cl *kgo.Client) {
	c := &s.changelog
	c.mu.Lock()
	if c.cl == cl {
		c.cl, c.known = nil, nil
	}
	c.mu.Unlock()
	cl.Close()
}

// generation returns the group generation of the source's member, when it
// is in its group.
func (s *KafkaSource) generation() (int32, bool) {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl == nil {
		return 0, false
	}
	if _, gen := cl.GroupMetadata(); gen >= 0 {
		return gen, true
	}
	return 0, false
}

// assignment returns the source's current assignment of topic-partition
// (nil when it is not assigned), which identifies one assignment: a
// partition revoked and assigned again has a new one.
func (s *KafkaSource) assignment(topic string, partition int32) *kafkaPart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assigned[topicPartition{topic, partition}]
}

// ensureChangelog returns what the metadata says of the changelog topic
// name, creating it when missing and adding partitions when it has fewer
// than need, within the timeout.
func (s *KafkaSource) ensureChangelog(ctx context.Context, cl *kgo.Client, stage, name string, need int32) (changelogTopicInfo, error) {
	c := &s.changelog
	c.mu.Lock()
	info, ok := c.known[name]
	c.mu.Unlock()
	if ok && info.partitions >= need {
		return info, nil
	}
	fail := func(err error) (changelogTopicInfo, error) {
		if ctx.Err() != nil {
			return changelogTopicInfo{}, ctx.Err()
		}
		return changelogTopicInfo{}, &ChangelogError{Group: s.group, Stage: stage, Changelog: name, Partition: AllPartitions, Err: err}
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	for {
		info, found, err := lookupChangelog(tctx, adm, name)
		switch {
		case err != nil:
			return fail(err)
		case found && info.partitions >= need:
			if err := waitProducerSees(tctx, cl, name, need); err != nil {
				return fail(err)
			}
			c.mu.Lock()
			if c.known == nil {
				c.known = make(map[string]changelogTopicInfo)
			}
			c.known[name] = info
			c.mu.Unlock()
			return info, nil
		case found:
			// A source topic grew: the changelog grows with it. Another
			// member may have grown it first (INVALID_PARTITIONS).
			want := max(need, s.sourcePartitions(tctx, adm))
			resp, err := adm.UpdatePartitions(tctx, int(want), name)
			if err == nil {
				err = resp[name].Err
			}
			if err != nil && !errors.Is(err, kerr.InvalidPartitions) {
				return fail(fmt.Errorf("adding partitions (from %d to %d): %w", info.partitions, want, err))
			}
		default:
			parts := max(need, s.sourcePartitions(tctx, adm))
			compact, lag := "compact", strconv.FormatInt(changelogCompactionLag.Milliseconds(), 10)
			resp, err := adm.CreateTopics(tctx, parts, -1, map[string]*string{"cleanup.policy": &compact, "min.compaction.lag.ms": &lag}, name)
			if err == nil {
				err = resp[name].Err
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return fail(fmt.Errorf("creating the topic (%d partitions, cleanup.policy=compact): %w", parts, err))
			}
		}
		// The metadata may lag the creation: look again shortly.
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-tctx.Done():
			t.Stop()
			return fail(fmt.Errorf("the topic did not show %d partitions within %v: %w", need, s.cfg.timeout, tctx.Err()))
		case <-t.C:
		}
	}
}

// waitProducerSees waits until cl's own metadata, the one it produces
// with, has partition need-1 of the topic name: a client that produced to
// the topic before partitions were added (by this member or another)
// fails a record for a partition it does not know yet. A topic cl has not
// loaded is loaded with all its partitions when first produced to.
func waitProducerSees(ctx context.Context, cl *kgo.Client, name string, need int32) error {
	for {
		if leader, _, _ := cl.PartitionLeader(name, need-1); leader >= 0 {
			return nil
		}
		if leader, _, _ := cl.PartitionLeader(name, 0); leader < 0 {
			return nil // not loaded
		}
		cl.ForceMetadataRefresh()
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("the producer's metadata did not show partition %d: %w", need-1, ctx.Err())
		case <-t.C:
		}
	}
}

// sourcePartitions returns the largest partition count among the source's
// topics, 1 when the metadata cannot say.
func (s *KafkaSource) sourcePartitions(ctx context.Context, adm *kadm.Client) int32 {
	n := int32(1)
	details, err := adm.ListTopics(ctx, s.topics...)
	if err != nil {
		return n
	}
	for _, d := range details {
		n = max(n, int32(len(d.Partitions)))
	}
	return n
}

// lookupChangelog returns what the metadata says of the topic name; found
// is false when it does not exist.
func lookupChangelog(ctx context.Context, adm *kadm.Client, name string) (changelogTopicInfo, bool, error) {
	details, err := adm.ListTopics(ctx, name)
	if err != nil {
		return changelogTopicInfo{}, false, fmt.Errorf("metadata: %w", err)
	}
	d, ok := details[name]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return changelogTopicInfo{}, false, nil
	case d.Err != nil:
		return changelogTopicInfo{}, false, fmt.Errorf("metadata: %w", d.Err)
	}
	info := changelogTopicInfo{id: d.ID, partitions: int32(len(d.Partitions)), leaders: make([]int32, len(d.Partitions))}
	for _, p := range d.Partitions {
		if p.Partition >= 0 && int(p.Partition) < len(info.leaders) {
			info.leaders[p.Partition] = p.Leader
		}
	}
	return info, true, nil
}

// RestoreChanges calls fn with the changes of stage's state of
// topic-partition saved in its changelog (checkpoint.ChangelogStore),
// oldest first, a deleted key's with a nil value, and returns fn's first
// error, wrapped in a [*ChangelogError]. fn may see a key more than once
// (a compacted topic drops a key's older changes only in time): the last
// call for a key is its value. A stage whose changelog topic does not
// exist, or has no partition partition, has nothing saved: fn is never
// called and it returns nil.
//
// It reads the changelog partition from its start (or, with
// [KafkaStateDir], from the offset the cache file reflects, after handing
// fn the file's changes) up to its end as listed when the restore starts:
// the last stable offset, reading committed records only, so that
// transactional writes later need no change here. Changes saved meanwhile
// are not restored. It reads with plain fetch requests to the partition's
// leader, not a consumer, and so knows exactly where the partition ends
// even when compaction removed its last records.
//
// Restores of different partitions or stages may run at once, and beside
// SaveChanges; a restore of one stage's partition must not run beside
// another of the same, or beside a save of its changes (a pipeline
// restores a partition before any of its records reach the stage).
//
// It returns an error wrapping [checkpoint.ErrInvalidChange] for an
// invalid stage, topic or partition; a [*ChangelogError] when the
// changelog cannot be read (the metadata within [KafkaTimeout]; a fetch
// that makes no progress for as long) or holds a record strom did not
// write; and ctx.Err() when ctx ends first.
func (s *KafkaSource) RestoreChanges(ctx context.Context, stage, topic string, partition int32, fn func(key, value []byte) error) error {
	if err := validateChangeTarget(stage, topic, partition); err != nil {
		return err
	}
	name, err := s.ChangelogTopic(stage)
	if err != nil {
		return err
	}
	cl, err := s.changelogClient()
	if err != nil {
		return err
	}
	owner := s.assignment(topic, partition) // the assignment the state is restored for
	part := changelogPart{stage, topic, partition}
	s.dropCache(part)
	fail := func(p int32, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ChangelogError{Group: s.group, Stage: stage, Changelog: name, Partition: p, Err: err}
	}
	adm := kadm.NewClient(cl)
	tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	info, found, err := lookupChangelog(tctx, adm, name)
	var start, end int64
	if err == nil && found && partition < info.partitions {
		start, end, err = changelogBounds(tctx, adm, name, partition)
	}
	cancel()
	if err == nil && found && partition < info.partitions {
		end, err = s.waitStable(ctx, adm, name, partition, end)
	}
	if err != nil {
		return fail(partition, err)
	}
	if !found || partition >= info.partitions {
		s.changelog.restores.Add(1)
		return nil
	}
	r := changelogReader{s: s, cl: cl, adm: adm, name: name, info: info, partition: partition}
	if s.cfg.stateDir == "" {
		err = r.read(ctx, start, end, func(rec *kgo.Record) error {
			src, key, err := splitChangelogKey(rec.Key)
			if err != nil {
				return fmt.Errorf("record at offset %d: %w", rec.Offset, err)
			}
			if string(src) != topic {
				return nil
			}
			if err := fn(key, rec.Value); err != nil {
				return &restoreFnError{err}
			}
			return nil
		})
	} else {
		err = s.restoreCached(ctx, &r, part, owner, start, end, fn)
	}
	if err != nil {
		var fe *restoreFnError
		if errors.As(err, &fe) {
			return &ChangelogError{Group: s.group, Stage: stage, Changelog: name, Partition: partition,
				Err: fmt.Errorf("restoring the state of %s/%d: %w", topic, partition, fe.err)}
		}
		return fail(partition, err)
	}
	s.changelog.restores.Add(1)
	return nil
}

// restoreFnError marks an error of a restore's fn, to tell it from a
// failure to read.
type restoreFnError struct{ err error }

func (e *restoreFnError) Error() string { return e.err.Error() }

// waitStable waits until no transaction is open below the changelog
// partition's high watermark of now, and returns the last stable offset
// then (lso, the end found, when none is). A restore reads committed
// changes only, up to the last stable offset; a transaction left open by
// another producer (a member expelled with one open, until its transaction
// timeout aborts it) holds that offset below the changes committed after
// it, by this member before a rewind or by the partition's owner since:
// the state restored would be older than the offsets committed with it,
// and the records between counted, and their results written, twice
// (torture scenario eos-kafka, seed 6055). It waits at most the source's
// transaction timeout plus [KafkaTimeout].
func (s *KafkaSource) waitStable(ctx context.Context, adm *kadm.Client, name string, partition int32, lso int64) (int64, error) {
	bound := s.cfg.txnTimeout
	if bound <= 0 {
		bound = DefaultKafkaTransactionTimeout
	}
	bound += s.cfg.timeout
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	ends, err := adm.ListEndOffsets(wctx, name)
	if err != nil {
		return 0, fmt.Errorf("listing the high watermark: %w", err)
	}
	hwm, ok := ends.Lookup(name, partition)
	switch {
	case !ok:
		return 0, errors.New("listing the high watermark: the partition is missing from the answer")
	case hwm.Err != nil:
		return 0, fmt.Errorf("listing the high watermark: %w", hwm.Err)
	}
	for lso < hwm.Offset {
		t := time.NewTimer(50 * time.Millisecond) // the broker's state: no event to wait on
		select {
		case <-wctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("a transaction open at offset %d holds the last stable offset below the high watermark %d for more than %v (another producer writing the changelog?)",
				lso, hwm.Offset, bound)
		case <-t.C:
		}
		lsos, err := adm.ListCommittedOffsets(wctx, name)
		if err != nil {
			continue // retried until the bound
		}
		if o, ok := lsos.Lookup(name, partition); ok && o.Err == nil {
			lso = o.Offset
		}
	}
	return lso, nil
}

// changelogBounds lists the start and the end (the last stable offset) of
// a changelog partition.
func changelogBounds(ctx context.Context, adm *kadm.Client, name string, partition int32) (start, end int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return 0, 0, fmt.Errorf("listing the start offset: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, name)
	if err != nil {
		return 0, 0, fmt.Errorf("listing the end offset: %w", err)
	}
	so, ok1 := starts.Lookup(name, partition)
	eo, ok2 := ends.Lookup(name, partition)
	switch {
	case !ok1 || !ok2:
		return 0, 0, errors.New("listing offsets: the partition is missing from the answer")
	case so.Err != nil:
		return 0, 0, fmt.Errorf("listing the start offset: %w", so.Err)
	case eo.Err != nil:
		return 0, 0, fmt.Errorf("listing the end offset: %w", eo.Err)
	}
	return so.Offset, eo.Offset, nil
}

// splitChangelogKey splits a changelog record's key into the source topic
// and the state key.
func splitChangelogKey(k []byte) (topic, key []byte, err error) {
	topic, key, ok := cutUvarintBytes(k)
	if !ok {
		return nil, nil, errors.New("the key does not start with a length-prefixed source topic (a record strom did not write?)")
	}
	return topic, key, nil
}

// restoreCached is RestoreChanges with a local snapshot cache: call fn
// with the cache's changes, then with the changelog's from the cache's
// offset to end, appending those to the cache file as they come; then
// keep the file open for SaveChanges to append to while owner stays the
// partition's assignment. A cache that cannot be written only makes the
// next restore read more of the changelog: it is counted, not returned.
func (s *KafkaSource) restoreCached(ctx context.Context, r *changelogReader, part changelogPart, owner *kafkaPart, start, end int64, fn func(key, value []byte) error) error {
	c := &s.changelog
	hdr := cacheHeader{topicID: r.info.id, changelog: r.name, topic: part.topic, partition: part.partition}
	path := cachePath(s.cfg.stateDir, &hdr)
	removeCacheTemps(path)
	cc, err := readCache(path, &hdr, -1)
	switch {
	case err == nil && (cc.offset > end || cc.offset < start):
		c.ignored.Add(1)
		cc = nil
	case err == nil && s.cacheOutlivedTombstones(ctx, r.adm, r.name, path):
		c.ignored.Add(1)
		cc = nil
	case err == nil:
		c.cached.Add(cc.entries)
	case !errors.Is(err, fs.ErrNotExist):
		c.ignored.Add(1)
	}
	from := start
	if cc != nil {
		from = cc.offset
		if err := cc.each(func(key, value []byte) error {
			if err := fn(key, value); err != nil {
				return &restoreFnError{err}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	h, err := openCacheForRestore(path, &hdr, cc, start)
	if err != nil {
		c.cacheErrors.Add(1)
	}
	err = r.read(ctx, from, end, func(rec *kgo.Record) error {
		src, key, err := splitChangelogKey(rec.Key)
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", rec.Offset, err)
		}
		if string(src) != part.topic {
			return nil
		}
		if err := fn(key, rec.Value); err != nil {
			return &restoreFnError{err}
		}
		if h != nil {
			h.stream(key, rec.Value)
		}
		return nil
	})
	if h == nil {
		return err
	}
	if err != nil {
		h.close(false)
		return err
	}
	compact, err := h.finish(end)
	if err != nil {
		c.cacheErrors.Add(1)
		h.close(false)
		return nil
	}
	h.owner = owner
	c.mu.Lock()
	if c.bgCtx == nil { // closed meanwhile
		c.mu.Unlock()
		h.close(false)
		return nil
	}
	if c.caches == nil {
		c.caches = make(map[changelogPart]*changelogCache)
	}
	if old := c.caches[part]; old != nil {
		old.close(false)
	}
	c.caches[part] = h
	c.mu.Unlock()
	if compact {
		s.compactInBackground(h)
	}
	return nil
}

// DefaultDeleteRetention is Kafka's default delete.retention.ms, 24 hours:
// how long a compacted topic keeps a tombstone at least. A cache file last
// brought up to date longer ago than the changelog's delete.retention.ms
// (this, when the topic does not say) is ignored.
const DefaultDeleteRetention = 24 * time.Hour

// cacheOutlivedTombstones reports whether the cache file at path was last
// brought up to date (its modification time) at least the changelog's
// delete.retention.ms ago. Compaction may then have removed a tombstone
// written after the file's offset, and the file would keep alive a key
// the changelog deleted. The time is looked up within the timeout; when
// the topic does not say, DefaultDeleteRetention applies.
func (s *KafkaSource) cacheOutlivedTombstones(ctx context.Context, adm *kadm.Client, name, path string) bool {
	info, err := os.Stat(path)
	if err != nil {
		return true
	}
	retention := DefaultDeleteRetention
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if configs, err := adm.DescribeTopicConfigs(ctx, name); err == nil {
		if rc, err := configs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key != "delete.retention.ms" {
					continue
				}
				if ms, err := strconv.ParseInt(c.MaybeValue(), 10, 64); err == nil && ms >= 0 {
					retention = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
	return time.Since(info.ModTime()) >= retention
}

// compactInBackground runs h.compact in a goroutine that Close cancels and
// waits for.
func (s *KafkaSource) compactInBackground(h *changelogCache) {
	c := &s.changelog
	c.mu.Lock()
	ctx := c.bgCtx
	if ctx == nil { // closed
		c.mu.Unlock()
		h.mu.Lock()
		h.compacting = false
		h.mu.Unlock()
		return
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		switch err := h.compact(ctx); {
		case err == nil:
			c.compactions.Add(1)
		case ctx.Err() == nil:
			c.cacheErrors.Add(1)
		}
	}()
}

// dropCache closes and forgets the open cache file of part, if any.
func (s *KafkaSource) dropCache(part changelogPart) {
	c := &s.changelog
	c.mu.Lock()
	h := c.caches[part]
	delete(c.caches, part)
	c.mu.Unlock()
	if h != nil {
		h.close(false)
	}
}

// appendToCaches appends the changes saved (recs, with their offsets) to
// the open cache files of their partitions, in one batch per partition.
// A partition with a failed change, or no longer under the assignment its
// cache was restored for, has its cache closed instead: its file stays
// correct (it reflects the changelog below its offset) and the next
// restore reads the rest from Kafka.
func (s *KafkaSource) appendToCaches(changes []checkpoint.Change, recs []kgo.Record, failed map[changelogPart]bool) {
	c := &s.changelog
	c.mu.Lock()
	if len(c.caches) == 0 {
		c.mu.Unlock()
		return
	}
	batches := make(map[*changelogCache][]int) // indexes of changes
	var order []changelogPart
	for i := range changes {
		ch := &changes[i]
		part := changelogPart{ch.Stage, ch.Topic, ch.Partition}
		h := c.caches[part]
		if h == nil {
			continue
		}
		if _, ok := batches[h]; !ok {
			order = append(order, part)
		}
		batches[h] = append(batches[h], i)
	}
	hs := make([]*changelogCache, len(order))
	for i, part := range order {
		hs[i] = c.caches[part]
	}
	c.mu.Unlock()
	for i, h := range hs {
		part := order[i]
		if failed[part] || s.assignment(part.topic, part.partition) != h.owner {
			s.dropCache(part)
			continue
		}
		idx := batches[h]
		end := int64(-1)
		entries := make([]stateEntry, len(idx))
		for j, k := range idx {
			entries[j] = stateEntry{key: changes[k].Key, value: changes[k].Value}
			end = max(end, recs[k].Offset+1)
		}
		compact, err := h.appendBatch(entries, end)
		if err != nil {
			if !errors.Is(err, errCacheClosed) { // closed meanwhile: a restore of it began
				c.cacheErrors.Add(1)
			}
			s.dropCache(part)
			continue
		}
		if compact {
			s.compactInBackground(h)
		}
	}
}

// changelogReader reads one changelog partition with fetch requests sent
// to its leader.
type changelogReader struct {
	s         *KafkaSource
	cl        *kgo.Client
	adm       *kadm.Client
	name      string
	info      changelogTopicInfo
	partition int32
}

// read calls fn with every committed record of the partition from offset
// from up to (not including) end, in order. A fetch that fails with an
// error Kafka marks retriable, or that fails to reach the broker, is sent
// again (to the leader the metadata names then) until the timeout passes
// without progress.
func (r *changelogReader) read(ctx context.Context, from, end int64, fn func(*kgo.Record) error) error {
	decompressor := kgo.DefaultDecompressor()
	leader := r.info.leaders[r.partition]
	progressed := time.Now()
	var lastErr error
	for off := from; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if lastErr != nil {
			if time.Since(progressed) > r.s.cfg.timeout {
				return fmt.Errorf("fetching at offset %d (the end is %d): no progress for %v: %w", off, end, r.s.cfg.timeout, lastErr)
			}
			if err := r.backoff(ctx); err != nil {
				return err
			}
			mctx, cancel := context.WithTimeout(ctx, r.s.cfg.timeout)
			info, found, err := lookupChangelog(mctx, r.adm, r.name)
			cancel()
			if err == nil && found && r.partition < info.partitions {
				if info.id != r.info.id {
					return fmt.Errorf("the topic was recreated during the restore (topic ID %x, now %x)", r.info.id, info.id)
				}
				leader = info.leaders[r.partition]
			}
		}
		fp, next, err := r.fetch(ctx, leader, off, decompressor)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !retriableFetch(err) {
				return fmt.Errorf("fetching at offset %d: %w", off, err)
			}
			lastErr = err
			continue
		}
		for i, rec := range fp.Records {
			if rec.Offset >= end {
				r.s.changelog.restored.Add(int64(i))
				return nil
			}
			if err := fn(rec); err != nil {
				r.s.changelog.restored.Add(int64(i + 1))
				return err
			}
		}
		r.s.changelog.restored.Add(int64(len(fp.Records)))
		if next > off {
			off, progressed, lastErr = next, time.Now(), nil
		} else if lastErr == nil {
			lastErr = errors.New("a fetch returned nothing")
		}
	}
	return nil
}

// fetch sends one fetch request for the partition at offset off to the
// broker leader and returns the records it got (committed ones only) and
// the offset to fetch next.
func (r *changelogReader) fetch(ctx context.Context, leader int32, off int64, decompressor kgo.Decompressor) (kgo.FetchPartition, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500 // the records below the end exist: only an empty answer waits
	req.MinBytes = 1
	req.MaxBytes = DefaultChangelogFetchBytes
	req.IsolationLevel = 1 // read committed
	req.SessionEpoch = -1  // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.name, r.info.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.partition
	rp.FetchOffset = off
	rp.PartitionMaxBytes = DefaultChangelogFetchBytes
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	rctx, cancel := context.WithTimeout(ctx, r.s.cfg.timeout)
	defer cancel()
	resp, err := r.cl.Broker(int(leader)).Request(rctx, req)
	if err != nil {
		return kgo.FetchPartition{}, off, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return kgo.FetchPartition{}, off, err
	}
	for i := range fr.Topics {
		t := &fr.Topics[i]
		if t.Topic != r.name && t.TopicID != r.info.id {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != r.partition {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: off, Topic: r.name, Partition: r.partition, IsolationLevel: kgo.ReadCommitted(),
			}, p, decompressor, nil)
			if fp.Err != nil {
				return kgo.FetchPartition{}, off, fp.Err
			}
			return fp, next, nil
		}
	}
	return kgo.FetchPartition{}, off, errors.New("the fetch answer holds no data for the partition")
}

// retriableFetch reports whether a failed fetch may succeed when sent
// again: Kafka says so (a leader moved, a broker is loading), or the
// request did not get an answer (a connection failed or timed out).
func retriableFetch(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

// backoff waits 100 ms, or until ctx is done.
func (r *changelogReader) backoff(ctx context.Context) error {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ownChanges returns changes without those of partitions of the source's
// topics that this member does not own now, when it is in its group (see
// SaveChanges). The changes of other topics (a Repartition's topic, whose
// state this source's changelog keeps) pass.
func (s *KafkaSource) ownChanges(changes []checkpoint.Change) []checkpoint.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl == nil {
		return changes
	}
	var kept []checkpoint.Change
	for i := range changes {
		c := &changes[i]
		if slices.Contains(s.topics, c.Topic) && s.assigned[topicPartition{c.Topic, c.Partition}] == nil {
			if kept == nil {
				kept = append(make([]checkpoint.Change, 0, len(changes)), changes[:i]...)
			}
			s.droppedSaves.Add(1)
			continue
		}
		if kept != nil {
			kept = append(kept, *c)
		}
	}
	if kept == nil {
		return changes
	}
	return kept
}
