package kafkatest_test

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// Example starts an in-process Kafka, runs a pipeline that ends in a Kafka
// sink, and reads back what the topic holds. In a test, NewCluster(t) does
// the start and the stop.
func Example() {
	kc, err := kafkatest.Start(kafkatest.Topics("alerts"))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
	out, err := sink.Kafka(kc.Brokers(), "alerts")
	if err != nil {
		panic(err)
	}
	defer out.Close()

	recs := []log.Record{
		{Key: []byte("host-1"), Value: []byte("disk full")},
		{Key: []byte("host-2"), Value: []byte("fan stopped")},
	}
	if err := stream.From(streamtest.Slice(recs)).To(out).Run(context.Background()); err != nil {
		panic(err)
	}
	got, err := kc.ReadAll(context.Background(), "alerts")
	if err != nil {
		panic(err)
	}
	for _, r := range got {
		fmt.Printf("%s: %s\n", r.Key, r.Value)
	}
	// Output:
	// host-1: disk full
	// host-2: fan stopped
}
