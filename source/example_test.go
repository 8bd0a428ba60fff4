package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// ExamplePartition replays a partition from its start to the high watermark.
func ExamplePartition() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	lg, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	t, err := lg.CreateTopic("events", 1)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, v := range []string{"created", "paid", "shipped"} {
		if _, _, err := t.Append(ctx, log.Record{Key: []byte("order-1"), Value: []byte(v)}); err != nil {
			panic(err)
		}
	}

	src := source.Partition(lg, "events", 0, source.Earliest, source.Replay())
	defer src.Close()
	for {
		batch, err := src.Read(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		for _, e := range batch {
			fmt.Printf("%s/%d@%d %s\n", e.Topic, e.Partition, e.Offset, e.Value.Value)
		}
	}
	// Output:
	// events/0@0 created
	// events/0@1 paid
	// events/0@2 shipped
}

// ExampleFromStore starts where a checkpoint store says the consumer stopped.
func ExampleFromStore() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	lg, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	t, err := lg.CreateTopic("events", 1)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := t.Append(ctx, log.Record{Value: fmt.Appendf(nil, "e%d", i)}); err != nil {
			panic(err)
		}
	}
	store := checkpoint.NewMemoryStore()
	if err := store.Save(ctx, "events", 0, checkpoint.At(3)); err != nil { // offsets 0-2 were handled
		panic(err)
	}

	src := source.Partition(lg, "events", 0, source.FromStore(store), source.Replay())
	batch, err := src.Read(ctx)
	if err != nil {
		panic(err)
	}
	for _, e := range batch {
		fmt.Println(e.Offset, string(e.Value.Value))
	}
	// Output:
	// 3 e3
	// 4 e4
}

// ExampleLines reads a CRLF file line by line; the line index is the offset.
func ExampleLines() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "auth.log")
	if err := os.WriteFile(path, []byte("login alice\r\nlogin bob \r\nlogout alice"), 0o600); err != nil {
		panic(err)
	}

	src := source.Lines(path)
	defer src.Close()
	batch, err := src.Read(context.Background())
	if err != nil {
		panic(err)
	}
	for _, e := range batch {
		fmt.Printf("%s %d %q\n", e.Topic, e.Offset, e.Value)
	}
	_, err = src.Read(context.Background())
	fmt.Println(err)
	// Output:
	// auth.log 0 "login alice"
	// auth.log 1 "login bob "
	// auth.log 2 "logout alice"
	// EOF
}

// ExampleTopic replays every partition of a topic as one source and counts
// the records of each partition.
func ExampleTopic() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	lg, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	t, err := lg.CreateTopic("events", 3)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for p, n := range []int{4, 2, 7} {
		part, err := t.Partition(int32(p))
		if err != nil {
			panic(err)
		}
		for i := range n {
			if _, err := part.Append(ctx, log.Record{Value: fmt.Appendf(nil, "e%d", i)}); err != nil {
				panic(err)
			}
		}
	}

	src := source.Topic(lg, "events", source.Earliest, source.Replay())
	defer src.Close()
	counts := map[int32]int{}
	for {
		batch, err := src.Read(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		for _, e := range batch {
			counts[e.Partition]++
		}
	}
	for _, p := range src.Partitions() { // ascending ids
		fmt.Printf("partition %d: %d records, position %d\n", p, counts[p], src.Position(p))
	}
	// Output:
	// partition 0: 4 records, position 4
	// partition 1: 2 records, position 2
	// partition 2: 7 records, position 7
}

// ExampleKafka consumes a topic of an in-process Kafka cluster (kfake) as
// a consumer group, and commits through the pipeline's checkpoints: the
// source is also the group's checkpoint store.
func ExampleKafka() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		panic(err)
	}
	for _, v := range []string{"apple", "pear", "plum"} {
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}
	producer.Close()

	src, err := source.Kafka(brokers, "billing", []string{"orders"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	err = stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
		fmt.Printf("%d: %s\n", r.Offset, r.Value)
		if seen++; seen == 3 {
			cancel() // stop: Run commits what finished, then closes the source
		}
		return nil
	}).Checkpointing(src).Run(ctx)
	if err != nil {
		panic(err)
	}
	pos, _, err := src.Load(context.Background(), "orders", 0)
	if err != nil {
		panic(err)
	}
	fmt.Println("committed:", pos.Offset)
	_ = src.Close() // Load opened a client: close it
	// Output:
	// 0: apple
	// 1: pear
	// 2: plum
	// committed: 3
}
