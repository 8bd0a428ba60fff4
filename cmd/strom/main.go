// Command strom inspects and edits a strom log directory.
//
// Usage:
//
//	strom create   -dir DIR TOPIC PARTITIONS   create a topic
//	strom describe -dir DIR TOPIC              print each partition's log start offset, high watermark and segments
//	strom read     -dir DIR [-from N] [-follow] TOPIC PARTITION
//	                                           print records as JSON lines
//	strom append   -dir DIR [-key K] TOPIC VALUE...
//	                                           append one record per VALUE (partition picked by key)
//
// -dir defaults to $STROM_DIR, then ./strom-data. describe and read open the
// log read-only, so they work beside a running writer; create and append take
// the topic's writer lock and fail, naming the holder's pid, while another
// process writes the topic. Exit status: 0 on success, 1 on an error, 2 on a
// usage error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/strom-dev/strom/log"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: strom create|describe|read|append -dir DIR ...")
		return 2
	}
	fs := flag.NewFlagSet("strom "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("STROM_DIR")
	if def == "" {
		def = "strom-data"
	}
	dir := fs.String("dir", def, "log directory (env STROM_DIR)")
	var from *int64
	var follow *bool
	var key *string
	switch args[0] {
	case "read":
		from = fs.Int64("from", -1, "first offset (default: the log start offset)")
		follow = fs.Bool("follow", false, "wait for new records instead of stopping at the high watermark")
	case "append":
		key = fs.String("key", "", "record key (empty: no key, round-robin)")
	}
	// Flags may come before, between or after the positional arguments.
	var rest []string
	for more := args[1:]; ; {
		if err := fs.Parse(more); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		more = fs.Args()[1:]
	}
	var err error
	switch args[0] {
	case "create":
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "usage: strom create -dir DIR TOPIC PARTITIONS")
			return 2
		}
		err = create(*dir, rest[0], rest[1], stdout)
	case "describe":
		if len(rest) != 1 {
			fmt.Fprintln(stderr, "usage: strom describe -dir DIR TOPIC")
			return 2
		}
		err = describe(*dir, rest[0], stdout)
	case "read":
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "usage: strom read -dir DIR [-from N] [-follow] TOPIC PARTITION")
			return 2
		}
		err = read(ctx, *dir, rest[0], rest[1], *from, *follow, stdout)
	case "append":
		if len(rest) < 2 {
			fmt.Fprintln(stderr, "usage: strom append -dir DIR [-key K] TOPIC VALUE...")
			return 2
		}
		err = appendValues(ctx, *dir, rest[0], *key, rest[1:], stdout)
	default:
		fmt.Fprintf(stderr, "strom: unknown command %q (want create, describe, read or append)\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "strom:", err)
		return 1
	}
	return 0
}

func create(dir, topic, n string, stdout io.Writer) error {
	partitions, err := strconv.Atoi(n)
	if err != nil {
		return fmt.Errorf("partition count %q is not a number", n)
	}
	lg, err := log.Open(dir)
	if err != nil {
		return err
	}
	defer lg.Close()
	if _, err := lg.CreateTopic(topic, partitions); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "topic %s: %d partitions in %s\n", topic, partitions, filepath.Join(dir, topic))
	return nil
}

func describe(dir, topic string, stdout io.Writer) error {
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "topic %s: %d partitions\n", t.Name(), t.Partitions())
	fmt.Fprintf(stdout, "%-10s %12s %14s %9s\n", "partition", "log start", "high watermark", "segments")
	for i := range t.Partitions() {
		p, _ := t.Partition(int32(i))
		segs, _ := filepath.Glob(filepath.Join(dir, topic, strconv.Itoa(i), "*.log"))
		fmt.Fprintf(stdout, "%-10d %12d %14d %9d\n", i, p.StartOffset(), p.NextOffset(), len(segs))
	}
	return nil
}

// jsonRecord is how read prints a record: key and value as strings when
// they are valid UTF-8 (JSON escapes the rest), key null when absent.
type jsonRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
}

func read(ctx context.Context, dir, topic, part string, from int64, follow bool, stdout io.Writer) error {
	pn, err := strconv.ParseInt(part, 10, 32)
	if err != nil {
		return fmt.Errorf("partition %q is not a number", part)
	}
	lg, err := log.Open(dir, log.ReadOnly())
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	p, err := t.Partition(int32(pn))
	if err != nil {
		return err
	}
	if from < 0 {
		from = p.StartOffset()
	}
	r := p.Replay(from)
	if follow {
		r = p.Follow(from)
	}
	enc := json.NewEncoder(stdout)
	for {
		recs, err := r.Next(ctx, 1<<20)
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, rec := range recs {
			jr := jsonRecord{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
				Timestamp: rec.Timestamp, Value: string(rec.Value)}
			if rec.Key != nil {
				k := string(rec.Key)
				jr.Key = &k
			}
			if err := enc.Encode(jr); err != nil {
				return err
			}
		}
	}
}

func appendValues(ctx context.Context, dir, topic, key string, values []string, stdout io.Writer) error {
	lg, err := log.Open(dir)
	if err != nil {
		return err
	}
	defer lg.Close()
	t, err := lg.Topic(topic)
	if err != nil {
		return err
	}
	var k []byte
	if key != "" {
		k = []byte(key)
	}
	for _, v := range values {
		p, off, err := t.Append(ctx, log.Record{Key: k, Value: []byte(v)})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s/%d@%d\n", topic, p, off)
	}
	return t.Sync()
}
