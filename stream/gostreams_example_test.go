package stream_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/reugn/go-streams/flow"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// A go-streams flow inside a checkpointed strom pipeline: each value the
// flow emits carries the lineage of the input it answers, so the position
// saved is never past a record whose output is still in flight.
func ExampleVia() {
	store := checkpoint.NewMemoryStore()
	src := streamtest.Slice([]string{"apple", "kiwi", "banana"})
	out := streamtest.Collect[int]()

	lengths := stream.Via[string, int](stream.From[string](src), flow.NewMap(func(s string) int { return len(s) }, 1))
	err := lengths.To(out).Checkpointing(store).Run(context.Background())

	pos, _, _ := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	fmt.Println(out.Values(), err, "next offset to read:", pos.Offset)
	// Output: [5 4 6] <nil> next offset to read: 3
}

// A plain go-streams pipeline reading one log topic and writing another.
// It saves no positions (go-streams has no acknowledgements): it starts
// where its source is told to.
func ExampleGoSource() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)
	lg, _ := log.Open(dir)
	defer lg.Close()
	events, _ := lg.CreateTopic("events", 1)
	shouts, _ := lg.CreateTopic("shouts", 1)
	for _, v := range []string{"hello", "go-streams"} {
		_, _, _ = events.Append(context.Background(), log.Record{Value: []byte(v)})
	}

	ctx := context.Background()
	src := stream.GoSource(ctx, source.Topic(lg, "events", source.Earliest, source.Replay()))
	dst := stream.GoSink(ctx, sink.Log(shouts))
	src.Via(flow.NewMap(func(r log.Record) log.Record {
		return log.Record{Value: []byte(strings.ToUpper(string(r.Value)) + "!")}
	}, 1)).To(dst) // returns once dst has written everything
	fmt.Println("read:", src.Err(), "written:", dst.Err())

	got := streamtest.Collect[log.Record]()
	_ = stream.From(source.Topic(lg, "shouts", source.Earliest, source.Replay())).To(got).Run(ctx)
	for _, r := range got.Values() {
		fmt.Printf("%d %s\n", r.Offset, r.Value)
	}
	// Output:
	// read: <nil> written: <nil>
	// 0 HELLO!
	// 1 GO-STREAMS!
}
