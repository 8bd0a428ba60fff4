// Package kafkatest starts an in-process Kafka cluster for tests: franz-go's
// kfake, which speaks the real Kafka wire protocol on local ports, so a
// pipeline ending in sink.Kafka (or any franz-go, Sarama or librdkafka
// client) is tested without an outside service.
//
// A unit test of a pipeline that ends in a Kafka sink:
//
//	func TestAlertsReachKafka(t *testing.T) {
//		kc := kafkatest.NewCluster(t, kafkatest.Topics("alerts"))
//		out, err := sink.Kafka(kc.Brokers(), "alerts")
//		require.NoError(t, err)
//		defer out.Close()
//		recs := []log.Record{{Key: []byte("host-1"), Value: []byte("disk full")}}
//		err = stream.From(streamtest.Slice(recs)).To(out).Run(context.Background())
//		require.NoError(t, err)
//		got := kc.Records(t, "alerts")
//		require.Len(t, got, 1)
//		assert.Equal(t, "disk full", string(got[0].Value))
//	}
//
// The cluster is gone when the test ends (t.Cleanup). [Start] and
// [Cluster.Close] are the same without a testing.TB, for examples and
// TestMain. [Cluster.Kfake] gives the kfake cluster for fault injection
// (ControlKey answers a request of your choosing, for example a produce,
// with an error).
//
// Topics are not created on first use: a test names them with [Topics] or
// creates them with [Cluster.CreateTopic], as against a Kafka whose
// auto.create.topics.enable is off.
//
// [Cluster.Records] reads what any reader sees, up to the high
// watermarks; [Cluster.Committed] (and [ReadCommitted]) what a reader of
// committed records only sees (read_committed), up to the last stable
// offsets: the output of an exactly-once pipeline is counted with it. A
// topic that a transactional producer wrote ends in control records that
// no consumer is handed, so only Committed reads it to its end.
package kafkatest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Option configures a cluster; pass options to [NewCluster] or [Start].
type Option func(*config)

type config struct {
	brokers    int
	partitions int
	topics     []string
	kfake      []kfake.Opt
}

func defaultConfig() config { return config{brokers: 1, partitions: 1} }

// Brokers sets the number of brokers; the default is 1.
func Brokers(n int) Option { return func(c *config) { c.brokers = n } }

// Partitions sets the partition count of the topics [Topics] names; the
// default is 1.
func Partitions(n int) Option { return func(c *config) { c.partitions = n } }

// Topics names topics that exist when the cluster starts, each with the
// [Partitions] count.
func Topics(names ...string) Option {
	return func(c *config) { c.topics = append(c.topics, names...) }
}

// KfakeOpts passes options to kfake.NewCluster, after those the other
// options make (kfake.Ports to listen on fixed ports, for example).
func KfakeOpts(opts ...kfake.Opt) Option {
	return func(c *config) { c.kfake = append(c.kfake, opts...) }
}

// Cluster is a running in-process Kafka cluster.
type Cluster struct {
	fake *kfake.Cluster
}

// Start starts a cluster; Close stops it. In tests, [NewCluster] does both.
func Start(opts ...Option) (*Cluster, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	kopts := []kfake.Opt{kfake.NumBrokers(cfg.brokers)}
	if len(cfg.topics) > 0 {
		kopts = append(kopts, kfake.SeedTopics(int32(cfg.partitions), cfg.topics...))
	}
	fake, err := kfake.NewCluster(append(kopts, cfg.kfake...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: starting kfake: %w", err)
	}
	return &Cluster{fake: fake}, nil
}

// NewCluster starts a cluster for t and stops it when t ends. It fails t if
// the cluster cannot start.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Close stops the cluster; clients still connected see their connections
// closed.
func (c *Cluster) Close() { c.fake.Close() }

// Kfake returns the kfake cluster, for fault injection (Control,
// ControlKey) and administration (MoveTopicPartition, AddNode, ...).
func (c *Cluster) Kfake() *kfake.Cluster { return c.fake }

// Brokers returns the brokers' addresses, host:port, for kgo.SeedBrokers or
// sink.Kafka.
func (c *Cluster) Brokers() []string { return c.fake.ListenAddrs() }

// Client returns a franz-go client of the cluster with opts after
// kgo.SeedBrokers, closed when t ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic with the given partition count; it fails t
// if that fails (for example when the topic exists).
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	if err := c.Create(context.Background(), name, partitions); err != nil {
		t.Fatal(err)
	}
}

// Create creates a topic with the given partition count.
func (c *Cluster) Create(ctx context.Context, name string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("kafkatest: creating topic %s: %w", name, err)
	}
	return nil
}

// Records returns every record the topic holds now, ordered by partition,
// then offset; it fails t if the topic cannot be read within 30 s.
func (c *Cluster) Records(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := c.ReadAll(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadAll returns every record the topic holds now (up to each partition's
// high watermark when ReadAll starts), ordered by partition, then offset.
func (c *Cluster) ReadAll(ctx context.Context, topic string) ([]*kgo.Record, error) {
	return ReadTopic(ctx, c.Brokers(), topic)
}

// ReadTopic is [Cluster.ReadAll] against any cluster: every record topic
// holds now on brokers, ordered by partition, then offset.
func ReadTopic(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafkatest: listing end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}        // partition -> high watermark
	starts := map[int32]kgo.Offset{} // every partition from its start
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			want[o.Partition] = o.Offset
			starts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil, fmt.Errorf("kafkatest: topic %s not found", topic)
	}
	remaining := 0
	for _, end := range want {
		if end > 0 {
			remaining++
		}
	}
	var recs []*kgo.Record
	if remaining > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		next := map[int32]int64{}
		for remaining > 0 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("kafkatest: reading %s, at %v of the high watermarks %v: %w (a topic written in transactions ends in commit markers, which a consumer never returns: read it with Committed)",
					topic, next, want, err)
			}
			for _, fe := range fs.Errors() {
				return nil, fmt.Errorf("kafkatest: reading %s partition %d: %w", fe.Topic, fe.Partition, fe.Err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset >= want[r.Partition] {
					return // appended since ReadAll started
				}
				recs = append(recs, r)
				next[r.Partition] = r.Offset + 1
				if next[r.Partition] == want[r.Partition] {
					remaining--
				}
			})
		}
	}
	slices.SortStableFunc(recs, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return recs, nil
}
