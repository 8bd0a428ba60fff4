package log_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/strom-dev/strom/log"
)

// ExampleOpen creates a topic, appends keyed records and replays one
// partition.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)

	lg, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	events, err := lg.CreateTopic("events", 3)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, user := range []string{"alice", "dave", "alice", "carol"} {
		p, off, err := events.Append(ctx, log.Record{Key: []byte(user), Value: []byte("login")})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s -> partition %d offset %d\n", user, p, off)
	}

	p, _ := events.Partition(events.PartitionFor([]byte("alice")))
	r := p.Replay(p.StartOffset())
	for {
		recs, err := r.Next(ctx, 1<<20)
		if err == io.EOF {
			break
		}
		for _, rec := range recs {
			fmt.Printf("read %s/%d@%d %s=%s\n", rec.Topic, rec.Partition, rec.Offset, rec.Key, rec.Value)
		}
	}
	// Output:
	// alice -> partition 0 offset 0
	// dave -> partition 1 offset 0
	// alice -> partition 0 offset 1
	// carol -> partition 2 offset 0
	// read events/0@0 alice=login
	// read events/0@1 alice=login
}

// ExampleCreateIfMissing shows that Open of a missing directory fails, so a
// mistyped path is not silently made a new log, and that the process that
// makes the log says so with CreateIfMissing.
func ExampleCreateIfMissing() {
	parent, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(parent)
	dir := filepath.Join(parent, "log")

	_, err := log.Open(dir, log.ReadOnly()) // a consumer started on the wrong path
	fmt.Println(errors.Is(err, log.ErrNoLog), errors.Is(err, fs.ErrNotExist))

	lg, err := log.Open(dir, log.CreateIfMissing()) // the publisher, which makes the log
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	if _, err := lg.CreateTopic("events", 1); err != nil {
		panic(err)
	}
	names, _ := lg.Topics()
	fmt.Println(names)
	// Output:
	// true true
	// [events]
}

// ExamplePartition_Follow tails a partition from another reader while it
// is written.
func ExamplePartition_Follow() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)
	lg, _ := log.Open(dir, log.WithMode(log.ModeMmap))
	defer lg.Close()
	t, _ := lg.CreateTopic("metrics", 1)
	p, _ := t.Partition(0)

	ctx := context.Background()
	r := p.Follow(p.HighWatermark())
	go func() {
		for i := range 3 {
			p.Append(ctx, log.Record{Value: fmt.Appendf(nil, "tick %d", i)})
		}
	}()
	for seen := 0; seen < 3; {
		recs, _ := r.Next(ctx, 1<<20)
		for _, rec := range recs {
			fmt.Println(rec.Offset, string(rec.Value))
			seen++
		}
	}
	// Output:
	// 0 tick 0
	// 1 tick 1
	// 2 tick 2
}

// ExampleLog_Topic reads topic "orders", which another process writes, and
// writes topic "totals" through the same Log: opening a topic takes no
// lock, writing it does. (Here a second Log stands in for the other process;
// in real use it would be another program holding the "orders" lock.)
func ExampleLog_Topic() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	other, _ := log.Open(dir) // the process that writes "orders"
	defer other.Close()
	orders, _ := other.CreateTopic("orders", 1)
	orders.AppendBatch(ctx, []log.Record{{Value: []byte("3")}, {Value: []byte("4")}})

	lg, err := log.Open(dir) // this process: one Log, read-write
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	in, err := lg.Topic("orders") // read: no lock taken
	if err != nil {
		panic(err)
	}
	out, err := lg.CreateTopic("totals", 1) // write: the "totals" lock is ours
	if err != nil {
		panic(err)
	}
	p, _ := in.Partition(0)
	r := p.Replay(0)
	total := 0
	for {
		recs, err := r.Next(ctx, 1<<20)
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		for _, rec := range recs {
			var n int
			fmt.Sscan(string(rec.Value), &n)
			total += n
		}
	}
	if err := out.AppendBatch(ctx, []log.Record{{Value: fmt.Appendf(nil, "%d", total)}}); err != nil {
		panic(err)
	}
	fmt.Println("total", total)
	_, _, err = in.Append(ctx, log.Record{Value: []byte("5")})
	fmt.Println("writing orders:", errors.Is(err, log.ErrLocked))
	// Output:
	// total 7
	// writing orders: true
}

// ExampleScanSegment dumps every frame of a segment file, as `strom dump`
// does: byte position, offset, body length, CRC check, key and value.
func ExampleScanSegment() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)
	lg, _ := log.Open(dir)
	t, _ := lg.CreateTopic("events", 1)
	p, _ := t.Partition(0)
	for _, v := range []string{"login", "click", "logout"} {
		p.Append(context.Background(), log.Record{Key: []byte("alice"), Value: []byte(v)})
	}
	segs, _ := p.Segments()
	lg.Close()

	err := log.ScanSegment(segs[0].Path, func(f log.Frame) bool {
		if f.Err != nil {
			fmt.Println("bad frame:", f.Err)
			return false
		}
		fmt.Printf("byte %d offset %d length %d crc ok %t: %s=%s\n",
			f.Position, f.Record.Offset, f.Length, f.CRCOK, f.Record.Key, f.Record.Value)
		return true
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// byte 0 offset 0 length 46 crc ok true: alice=login
	// byte 56 offset 1 length 46 crc ok true: alice=click
	// byte 112 offset 2 length 47 crc ok true: alice=logout
}

// ExampleTopic_Compact keeps the latest record of each key of a compacted
// topic: a user's profile updates collapse to the last one, a tombstone (a
// nil Value) deletes a user, and the offsets of what is kept never change.
// The active segment is never compacted, so the example rolls small
// segments; a writable Log also compacts on its own (WithCleanerInterval).
func ExampleTopic_Compact() {
	dir, _ := os.MkdirTemp("", "strom-example-")
	defer os.RemoveAll(dir)

	lg, err := log.Open(dir, log.WithSegmentBytes(4<<10))
	if err != nil {
		panic(err)
	}
	defer lg.Close()
	users, err := lg.CreateTopic("users", 1, log.WithCleanupPolicy(log.CleanupCompact))
	if err != nil {
		panic(err)
	}
	p, _ := users.Partition(0)
	ctx := context.Background()
	for i := range 300 {
		user := []string{"alice", "bob", "carol"}[i%3]
		if _, err := p.Append(ctx, log.Record{Key: []byte(user), Value: fmt.Appendf(nil, "%s v%d", user, i)}); err != nil {
			panic(err)
		}
	}
	if _, err := p.Append(ctx, log.Record{Key: []byte("bob")}); err != nil { // bob is deleted
		panic(err)
	}
	_, err = p.Append(ctx, log.Record{Value: []byte("no key")})
	fmt.Println(errors.Is(err, log.ErrKeyRequired))

	if _, err := users.Compact(time.Now()); err != nil {
		panic(err)
	}
	latest, read := map[string]string{}, 0
	for off := p.StartOffset(); ; {
		recs, err := p.Read(off, 1<<20)
		if err != nil || len(recs) == 0 {
			break
		}
		for _, r := range recs {
			latest[string(r.Key)] = string(r.Value)
		}
		read += len(recs)
		off = recs[len(recs)-1].Offset + 1
	}
	fmt.Printf("alice=%q bob=%q carol=%q\n", latest["alice"], latest["bob"], latest["carol"])
	fmt.Printf("%d records of 301 left, high watermark %d\n", read, p.HighWatermark())
	// Output:
	// true
	// alice="alice v297" bob="" carol="carol v299"
	// 40 records of 301 left, high watermark 301
}
