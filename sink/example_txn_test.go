package sink_test

import (
	"context"
	"fmt"
	"os"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// ExampleKafkaTransactionalID relays a log topic to Kafka exactly once:
// the transactional sink is also the pipeline's checkpoint store, and each
// transaction commits the records with the log positions past them. A
// second Run with the same transactional id (a restart) starts from the
// committed positions and writes nothing twice.
func ExampleKafkaTransactionalID() {
	kc, err := kafkatest.Start(kafkatest.Topics("orders"))
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
	})
	if err != nil {
		panic(err)
	}

	relay := func() {
		out, err := sink.Kafka(kc.Brokers(), "orders", sink.KafkaTransactionalID("orders-relay"))
		if err != nil {
			panic(err)
		}
		defer out.Close()
		src := source.Topic(lg, "orders", source.FromStore(out), source.Replay())
		err = stream.From(src, stream.ExactlyOnce()).To(out).Checkpointing(out).Run(context.Background())
		if err != nil {
			panic(err)
		}
	}
	relay()
	relay() // a restart: nothing new to relay

	got, err := kafkatest.ReadCommitted(context.Background(), kc.Brokers(), "orders")
	if err != nil {
		panic(err)
	}
	for _, r := range got {
		fmt.Printf("%s %s\n", r.Key, r.Value)
	}
	positions, err := kafkatest.ReadCommitted(context.Background(), kc.Brokers(), sink.KafkaPositionsTopic("orders-relay"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d record, key %s\n", sink.KafkaPositionsTopic("orders-relay"), len(positions), positions[0].Key)
	// Output:
	// alice book
	// carol lamp
	// orders-relay-positions: 1 record, key orders/0
}
