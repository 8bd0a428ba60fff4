package sink_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// ExampleLog appends keyed records; each key lands in the partition Kafka's
// partitioner picks for it.
func ExampleLog() {
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
	t, err := lg.CreateTopic("orders", 3)
	if err != nil {
		panic(err)
	}

	recs := []log.Record{
		{Key: []byte("alice"), Value: []byte("book")},
		{Key: []byte("carol"), Value: []byte("lamp")},
		{Key: []byte("dave"), Value: []byte("desk")},
		{Key: []byte("alice"), Value: []byte("pen")},
	}
	if err := sink.Log(t, sink.Synced()).Write(context.Background(), recs); err != nil {
		panic(err)
	}
	for id := range int32(3) {
		p, err := t.Partition(id)
		if err != nil {
			panic(err)
		}
		got, err := p.Read(0, 1<<20)
		if err != nil {
			panic(err)
		}
		for _, r := range got {
			fmt.Printf("partition %d offset %d: %s %s\n", r.Partition, r.Offset, r.Key, r.Value)
		}
	}
	// Output:
	// partition 0 offset 0: alice book
	// partition 0 offset 1: alice pen
	// partition 1 offset 0: dave desk
	// partition 2 offset 0: carol lamp
}

// ExampleLines writes one line per value.
func ExampleLines() {
	var b strings.Builder
	if err := sink.Lines(&b).Write(context.Background(), []string{"first", "second"}); err != nil {
		panic(err)
	}
	fmt.Print(b.String())
	// Output:
	// first
	// second
}

// ExampleFunc turns a function of a batch into a sink.
func ExampleFunc() {
	total := 0
	s := sink.Func(func(_ context.Context, batch []int) error {
		for _, v := range batch {
			total += v
		}
		return nil
	})
	if err := s.Write(context.Background(), []int{1, 2, 3}); err != nil {
		panic(err)
	}
	fmt.Println(total)
	// Output: 6
}

// ExampleDeadLetter sends the records a stage cannot parse to a dead-letter
// topic, with the original value and headers naming what failed, and goes on
// with the rest.
func ExampleDeadLetter() {
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
	in, err := lg.CreateTopic("numbers", 1)
	if err != nil {
		panic(err)
	}
	dlq, err := lg.CreateTopic("numbers.dlq", 1)
	if err != nil {
		panic(err)
	}
	p, _ := in.Partition(0)
	for _, v := range []string{"1", "two", "3"} {
		if _, err := p.Append(context.Background(), log.Record{Value: []byte(v)}); err != nil {
			panic(err)
		}
	}

	parse := func(_ context.Context, r log.Record) (int, error) { return strconv.Atoi(string(r.Value)) }
	s := stream.MapTo(stream.From(source.Partition(lg, "numbers", 0, source.Earliest, source.Replay())),
		parse, stream.Name("parse"), stream.DeadLetter(sink.DeadLetter(dlq)))
	sum := 0
	s = s.To(sink.Func(func(_ context.Context, vs []int) error {
		for _, v := range vs {
			sum += v
		}
		return nil
	}))
	if err := s.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("sum:", sum)

	q, _ := dlq.Partition(0)
	dead, err := q.Read(0, 1<<20)
	if err != nil {
		panic(err)
	}
	for _, r := range dead {
		fmt.Printf("dead letter: %s\n", r.Value)
		for _, h := range r.Headers {
			fmt.Printf("  %s: %s\n", h.Key, h.Value)
		}
	}
	// Output:
	// sum: 4
	// dead letter: two
	//   strom.error: strconv.Atoi: parsing "two": invalid syntax
	//   strom.stage: parse
	//   strom.topic: numbers
	//   strom.partition: 0
	//   strom.offset: 1
	//   strom.attempt: 1
}

// A whole-topic pipeline, as the README shows it: every partition of
// "orders", a parse stage that sends what it cannot parse to a dead-letter
// topic, a key-ordered stage on 4 goroutines, a log sink, and a FileStore
// keeping one position per partition.
func Example_wholeTopicPipeline() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	lg, err := log.Open(dir+"/log", log.CreateIfMissing())
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	orders, err := lg.CreateTopic("orders", 3)
	if err != nil {
		panic(err)
	}
	for i, line := range []string{"alice 3", "bob 5", "alice 4", "garbage", "carol 1", "bob 2"} {
		if _, _, err := orders.Append(context.Background(), log.Record{Key: []byte(strconv.Itoa(i % 3)), Value: []byte(line)}); err != nil {
			panic(err)
		}
	}
	totals, err := lg.CreateTopic("totals", 3)
	if err != nil {
		panic(err)
	}
	dlq, err := lg.CreateTopic("orders.dlq", 1)
	if err != nil {
		panic(err)
	}
	store, err := checkpoint.NewFileStore(dir + "/state")
	if err != nil {
		panic(err)
	}

	type order struct {
		customer string
		amount   int
	}
	parsed := stream.MapTo(
		stream.From(source.Topic(lg, "orders", source.FromStore(store), source.Replay())),
		func(_ context.Context, r log.Record) (order, error) {
			name, amount, ok := strings.Cut(string(r.Value), " ")
			n, err := strconv.Atoi(amount)
			if !ok || err != nil {
				return order{}, fmt.Errorf("not an order: %q", r.Value)
			}
			return order{name, n}, nil
		}, stream.DeadLetter(sink.DeadLetter(dlq)), stream.Name("parse"))
	priced := stream.MapTo(parsed, func(_ context.Context, o order) (log.Record, error) {
		return log.Record{Key: []byte(o.customer), Value: []byte(strconv.Itoa(o.amount * 100))}, nil
	}, stream.KeyOrdered(8, func(o order) string { return o.customer }),
		stream.Retry(3, 100*time.Millisecond, time.Second))
	err = priced.To(sink.Log(totals)).Checkpointing(store).Run(context.Background())
	fmt.Println("run:", err)

	for _, name := range []string{"totals", "orders.dlq"} {
		t, _ := lg.Topic(name)
		n := int64(0)
		for p := range int32(t.Partitions()) {
			part, _ := t.Partition(p)
			n += part.HighWatermark()
		}
		fmt.Println(name, "records:", n)
	}
	for p := range int32(3) {
		pos, _, _ := store.Load(context.Background(), "orders", p)
		part, _ := orders.Partition(p)
		fmt.Printf("orders/%d position %d of %d\n", p, pos.Offset, part.HighWatermark())
	}
	// Output:
	// run: <nil>
	// totals records: 5
	// orders.dlq records: 1
	// orders/0 position 2 of 2
	// orders/1 position 0 of 0
	// orders/2 position 4 of 4
}

// The relay: one Log per process reads topic "raw" and writes topic
// "clean". Reading a topic never takes its writer lock (another process may
// be writing "raw"); the first write to "clean" takes that topic's lock.
// Positions in "raw" are saved only after the records are in "clean".
func Example_relay() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// Another process would write "raw"; here a second Log plays that role.
	writer, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	raw, err := writer.CreateTopic("raw", 1)
	if err != nil {
		panic(err)
	}
	for _, v := range []string{" a ", "b  ", "  c"} {
		if _, _, err := raw.Append(context.Background(), log.Record{Value: []byte(v)}); err != nil {
			panic(err)
		}
	}

	lg, err := log.Open(dir) // the relay's one Log: reads "raw", writes "clean"
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	clean, err := lg.CreateTopic("clean", 1)
	if err != nil {
		panic(err)
	}
	store := checkpoint.NewMemoryStore()
	err = stream.From(source.Partition(lg, "raw", 0, source.FromStore(store), source.Replay())).
		Map(func(_ context.Context, r log.Record) (log.Record, error) {
			return log.Record{Key: r.Key, Value: bytes.TrimSpace(r.Value)}, nil
		}).
		To(sink.Log(clean, sink.Synced())).
		Checkpointing(store).
		Run(context.Background())
	fmt.Println("relay:", err)
	writer.Close()

	p, _ := clean.Partition(0)
	recs, _ := p.Read(0, 0)
	for _, r := range recs {
		fmt.Printf("%q\n", r.Value)
	}
	pos, _, _ := store.Load(context.Background(), "raw", 0)
	fmt.Println("raw position:", pos.Offset)
	// Output:
	// relay: <nil>
	// "a"
	// "b"
	// "c"
	// raw position: 3
}

// ExampleKafka relays a log topic to Kafka (here an in-process one from
// kafkatest): each record's position is saved only once Kafka acknowledged
// it, and each key lands in the partition Kafka's partitioner picks.
func ExampleKafka() {
	kc, err := kafkatest.Start(kafkatest.Topics("orders"), kafkatest.Partitions(3))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
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
	in, err := lg.CreateTopic("orders", 1)
	if err != nil {
		panic(err)
	}
	err = in.AppendBatch(context.Background(), []log.Record{
		{Key: []byte("alice"), Value: []byte("book")},
		{Key: []byte("carol"), Value: []byte("lamp")},
		{Key: []byte("alice"), Value: []byte("pen")},
	})
	if err != nil {
		panic(err)
	}

	out, err := sink.Kafka(kc.Brokers(), "orders")
	if err != nil {
		panic(err)
	}
	defer out.Close()
	store := checkpoint.NewMemoryStore()
	src := source.Partition(lg, "orders", 0, source.FromStore(store), source.Replay())
	if err := stream.From(src).To(out).Checkpointing(store).Run(context.Background()); err != nil {
		panic(err)
	}

	got, err := kc.ReadAll(context.Background(), "orders")
	if err != nil {
		panic(err)
	}
	for _, r := range got {
		fmt.Printf("partition %d offset %d: %s %s\n", r.Partition, r.Offset, r.Key, r.Value)
	}
	pos, _, _ := store.Load(context.Background(), "orders", 0)
	fmt.Println("position saved:", pos.Offset)
	// Output:
	// partition 0 offset 0: alice book
	// partition 0 offset 1: alice pen
	// partition 2 offset 0: carol lamp
	// position saved: 3
}

// ExampleLogSink_exactlyOnce counts orders per customer from one topic
// into another under stream.ExactlyOnce: the LogSink is the pipeline's
// checkpoint store and transactor, so the counts, the positions and the
// Aggregate's state are committed together. A second run over the same
// input finds everything committed and writes nothing again.
func ExampleLogSink_exactlyOnce() {
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
	in, err := lg.CreateTopic("orders", 1)
	if err != nil {
		panic(err)
	}
	outTopic, err := lg.CreateTopic("order-counts", 1)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, c := range []string{"alice", "bob", "alice"} {
		if _, _, err := in.Append(ctx, log.Record{Key: []byte(c), Value: []byte("an order")}); err != nil {
			panic(err)
		}
	}
	out := sink.Log(outTopic, sink.Synced())
	run := func() error {
		src := source.Topic(lg, "orders", source.FromStore(out), source.Replay())
		counts := stream.Aggregate(stream.KeyBy(stream.From(src, stream.ExactlyOnce()),
			func(r log.Record) string { return string(r.Key) }), stream.Count[log.Record]())
		return stream.MapTo(counts, func(_ context.Context, kv stream.KV[string, int64]) (log.Record, error) {
			return log.Record{Key: []byte(kv.Key), Value: strconv.AppendInt(nil, kv.Value, 10)}, nil
		}).To(out).Checkpointing(out).Run(ctx)
	}
	for range 2 {
		if err := run(); err != nil {
			panic(err)
		}
	}
	p, err := outTopic.Partition(0)
	if err != nil {
		panic(err)
	}
	got, err := p.Read(0, 1<<20)
	if err != nil {
		panic(err)
	}
	for _, r := range got {
		fmt.Printf("%s: %s\n", r.Key, r.Value)
	}
	ends, _, err := sink.CommittedEnds(outTopic)
	if err != nil {
		panic(err)
	}
	fmt.Println("committed end:", ends[0])
	// Output:
	// alice: 1
	// bob: 1
	// alice: 2
	// committed end: 3
}

// ExampleKafkaSink_CheckSize relays a log topic to Kafka with a producer
// limit of 1 KiB: the record over it is dead-lettered to a log topic, alone,
// by the stage before the sink, and the others reach Kafka; the position
// passes it.
func ExampleKafkaSink_CheckSize() {
	kc, err := kafkatest.Start(kafkatest.Topics("media"))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
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
	in, err := lg.CreateTopic("media", 1)
	if err != nil {
		panic(err)
	}
	dlq, err := lg.CreateTopic("media.too-large", 1)
	if err != nil {
		panic(err)
	}
	err = in.AppendBatch(context.Background(), []log.Record{
		{Value: []byte("small")},
		{Value: bytes.Repeat([]byte("x"), 2000)},
		{Value: []byte("small too")},
	})
	if err != nil {
		panic(err)
	}

	out, err := sink.Kafka(kc.Brokers(), "media", sink.KafkaMaxRecordBytes(1024))
	if err != nil {
		panic(err)
	}
	defer out.Close()
	store := checkpoint.NewMemoryStore()
	src := source.Partition(lg, "media", 0, source.FromStore(store), source.Replay())
	err = stream.From(src).
		Tap(out.CheckSize, stream.Name("too-large"), stream.DeadLetter(sink.DeadLetter(dlq))).
		To(out).
		Checkpointing(store).
		Run(context.Background())
	if err != nil {
		panic(err)
	}

	got, err := kc.ReadAll(context.Background(), "media")
	if err != nil {
		panic(err)
	}
	for _, r := range got {
		fmt.Printf("in Kafka: %s\n", r.Value)
	}
	p, err := dlq.Partition(0)
	if err != nil {
		panic(err)
	}
	dead, err := p.Replay(0).Next(context.Background(), 0)
	if err != nil {
		panic(err)
	}
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == sink.HeaderOffset || h.Key == sink.HeaderError {
				fmt.Printf("dead letter %s: %s\n", h.Key, h.Value)
			}
		}
	}
	pos, _, _ := store.Load(context.Background(), "media", 0)
	fmt.Println("position saved:", pos.Offset)
	// Output:
	// in Kafka: small
	// in Kafka: small too
	// dead letter strom.error: sink: kafka topic media: record from media/0 offset 1: sink: record too large for Kafka: 2074 bytes as a record batch of its own, over the producer's limit of 1024 bytes (raise it with sink.KafkaMaxRecordBytes, up to what the topic's max.message.bytes allows)
	// dead letter strom.offset: 1
	// position saved: 3
}
