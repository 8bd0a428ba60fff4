package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
)

// ExampleReadCommitted reads only the committed records of a topic a
// sink.LogSink writes in transactions (what an exactly-once pipeline into
// the log does at every transaction interval): the open transaction's
// record is not returned.
func ExampleReadCommitted() {
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
	t, err := lg.CreateTopic("payments", 1)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	out := sink.Log(t)
	if err := out.BeginTransactions(ctx); err != nil {
		panic(err)
	}
	write := func(v string) {
		if err := out.Write(ctx, []log.Record{{Key: []byte("acct-1"), Value: []byte(v)}}); err != nil {
			panic(err)
		}
	}
	write("paid 10")
	write("paid 20")
	pos := []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: checkpoint.Position{Offset: 2, Epoch: checkpoint.NoEpoch}}}
	if _, err := out.EndTransaction(ctx, pos, true); err != nil {
		panic(err)
	}
	write("paid 30") // in the next transaction, not committed yet

	src := source.Partition(lg, "payments", 0, source.Earliest, source.ReadCommitted(), source.Replay())
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
			fmt.Printf("%d %s\n", e.Offset, e.Value.Value)
		}
	}
	// Output:
	// 0 paid 10
	// 1 paid 20
}
