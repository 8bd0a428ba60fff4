// Command kafkatool is what `make demo-relay` needs around the relay: an
// in-process Kafka (franz-go's kfake, the real wire protocol on a local
// port), a producer of a file's lines, and the round-trip check.
//
//	kafkatool serve --port 9092 --partitions 3 --topics ssh,ssh-back
//	kafkatool produce --brokers 127.0.0.1:9092 --topic ssh --file OpenSSH_2k.log --key '([0-9]+[.][0-9]+[.][0-9]+[.][0-9]+)'
//	kafkatool create --brokers 127.0.0.1:9092 --topics ssh,ssh-back --partitions 3
//	kafkatool count --brokers 127.0.0.1:9092 --topic ssh-back
//	kafkatool roundtrip --brokers 127.0.0.1:9092 --in ssh --out ssh-back
//	kafkatool sources --brokers 127.0.0.1:9092 --topic ssh-back
//
// serve runs until SIGINT or SIGTERM. produce writes every line of the file
// (without its line ending) as one record, keyed by the first group of
// --key (no key when the line does not match), acks=all, and exits once
// every record is acknowledged. count prints how many records the topic
// holds. roundtrip compares two topics: every record of --in must be in
// --out with the same key and value bytes, nothing in --out may be
// invented, and per key the values must come back in the order they went
// in; duplicates (records delivered again, at-least-once) are counted and
// printed, not failed. sources counts the topic's records by the source
// record each names in examples/relay's headers (strom.relay.partition and
// strom.relay.offset): how many, how many distinct, and the duplicates
// (copies beyond a source record's first), one relay's own. count,
// roundtrip and sources read what a reader of committed records sees
// (read_committed, up to the last stable offsets): the same as any
// reader's for a topic no transaction wrote, and without the records of
// aborted transactions for one an exactly-once relay wrote. Exit 0 pass, 1
// fail, 2 usage or Kafka error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/kafkatest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kafkatool serve|create|produce|count|sources|roundtrip [flags]")
		os.Exit(2)
	}
	var err error
	code := 2
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "produce":
		err = produce(os.Args[2:])
	case "count":
		err = count(os.Args[2:])
	case "create":
		err = create(os.Args[2:])
	case "sources":
		err = sources(os.Args[2:])
	case "roundtrip":
		var ok bool
		ok, err = roundtrip(os.Args[2:])
		if err == nil && !ok {
			os.Exit(1)
		}
	default:
		err = fmt.Errorf("unknown command %q: want serve, create, produce, count, sources or roundtrip", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafkatool %s: %v\n", os.Args[1], err)
		os.Exit(code)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	port := fs.Int("port", 9092, "port to listen on (127.0.0.1)")
	partitions := fs.Int("partitions", 3, "partitions of each topic of --topics")
	topics := fs.String("topics", "", "topics to create, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port)}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(os.Stderr, "kafkatool: in-process Kafka (kfake) on %s\n", strings.Join(c.ListenAddrs(), ","))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

func brokersFlag(fs *flag.FlagSet) *string {
	return fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka brokers, comma-separated (env KAFKA_BROKERS)")
}

func client(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	if brokers == "" {
		return nil, errors.New("--brokers (or KAFKA_BROKERS) is required")
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...)}, opts...)...)
}

func produce(args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topic := fs.String("topic", "", "topic to write")
	file := fs.String("file", "", "file whose lines to produce")
	key := fs.String("key", "", "regular expression whose first group keys a line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var re *regexp.Regexp
	if *key != "" {
		var err error
		if re, err = regexp.Compile(*key); err != nil {
			return fmt.Errorf("--key: %w", err)
		}
		if re.NumSubexp() < 1 {
			return fmt.Errorf("--key %q has no group", *key)
		}
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	cl, err := client(*brokers, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		r := &kgo.Record{Topic: *topic, Value: line}
		if re != nil {
			if m := re.FindSubmatch(line); m != nil {
				r.Key = bytes.Clone(m[1])
			}
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	fmt.Printf("produced %d records to %s\n", len(recs), *topic)
	return nil
}

func create(args []string) error {
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topics := fs.String("topics", "", "topics to create, comma-separated")
	partitions := fs.Int("partitions", 3, "partitions of each topic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := client(*brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, int32(*partitions), 1, nil, strings.Split(*topics, ",")...)
	if err != nil {
		return err
	}
	return res.Error()
}

func count(args []string) error {
	fs := flag.NewFlagSet("count", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topic := fs.String("topic", "", "topic to count")
	if err := fs.Parse(args); err != nil {
		return err
	}
	recs, err := readAll(*brokers, *topic)
	if err != nil {
		return err
	}
	fmt.Println(len(recs))
	return nil
}

// readAll reads every committed record of topic up to the last stable
// offsets (read_committed).
func readAll(brokers, topic string) ([]*kgo.Record, error) {
	if brokers == "" {
		return nil, errors.New("--brokers (or KAFKA_BROKERS) is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return kafkatest.ReadCommitted(ctx, strings.Split(brokers, ","), topic)
}

// The headers examples/relay puts on every record it writes.
const (
	relayHeaderPartition = "strom.relay.partition"
	relayHeaderOffset    = "strom.relay.offset"
)

func sources(args []string) error {
	fs := flag.NewFlagSet("sources", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	topic := fs.String("topic", "", "topic a relay wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	recs, err := readAll(*brokers, *topic)
	if err != nil {
		return err
	}
	n, distinct, dups, foreign := countSources(recs)
	fmt.Printf("%s: %d records from %d distinct source records: %d duplicates", *topic, n, distinct, dups)
	if foreign > 0 {
		fmt.Printf(" (%d records without the relay's headers)", foreign)
	}
	fmt.Println()
	return nil
}

// countSources counts recs by the source record the relay's headers name:
// all of them, the distinct sources, the copies beyond each source's
// first, and the records without the headers.
func countSources(recs []*kgo.Record) (n, distinct, dups, foreign int) {
	seen := map[[2]string]int{}
	for _, r := range recs {
		var p, o string
		var hasP, hasO bool
		for _, h := range r.Headers {
			switch h.Key {
			case relayHeaderPartition:
				p, hasP = string(h.Value), true
			case relayHeaderOffset:
				o, hasO = string(h.Value), true
			}
		}
		if !hasP || !hasO {
			foreign++
			continue
		}
		seen[[2]string{p, o}]++
	}
	for _, c := range seen {
		distinct++
		dups += c - 1
	}
	return len(recs), distinct, dups, foreign
}

func roundtrip(args []string) (bool, error) {
	fs := flag.NewFlagSet("roundtrip", flag.ContinueOnError)
	brokers := brokersFlag(fs)
	in := fs.String("in", "", "the topic records went in")
	out := fs.String("out", "", "the topic they came back in")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	sent, err := readAll(*brokers, *in)
	if err != nil {
		return false, fmt.Errorf("%s: %w", *in, err)
	}
	back, err := readAll(*brokers, *out)
	if err != nil {
		return false, fmt.Errorf("%s: %w", *out, err)
	}
	r := compare(sent, back)
	fmt.Printf("sent %d records to %s; %d came back in %s: %d distinct, %d duplicates, %d missing, %d invented, %d keys out of order\n",
		len(sent), *in, len(back), *out, r.distinct, r.duplicates, r.missing, r.invented, r.disordered)
	for _, p := range r.problems {
		fmt.Println("  " + p)
	}
	return r.missing == 0 && r.invented == 0 && r.disordered == 0, nil
}

type report struct {
	distinct, duplicates, missing, invented, disordered int
	problems                                            []string
}

// compare checks back against sent: each (key, value) of sent must come
// back (as many times as it was sent, at least), nothing else may, and per
// key the first time each record comes back follows the order it was sent
// in.
func compare(sent, back []*kgo.Record) report {
	type kv struct {
		key, value string
		nilKey     bool
	}
	id := func(r *kgo.Record) kv { return kv{string(r.Key), string(r.Value), r.Key == nil} }
	want := map[kv]int{}
	order := map[kv][]int{} // per key: indexes in sent, in order
	for i, r := range sent {
		want[id(r)]++
		k := kv{key: string(r.Key), nilKey: r.Key == nil}
		order[k] = append(order[k], i)
	}
	got := map[kv]int{}
	var rep report
	firstSeen := map[kv]int{} // record -> position of its first return in its key's sequence
	seq := map[kv]int{}
	for _, r := range back {
		x := id(r)
		got[x]++
		if _, ok := want[x]; !ok {
			rep.invented++
			if len(rep.problems) < 10 {
				rep.problems = append(rep.problems, fmt.Sprintf("invented: key %q value %q", r.Key, r.Value))
			}
			continue
		}
		if _, seen := firstSeen[x]; !seen {
			k := kv{key: x.key, nilKey: x.nilKey}
			firstSeen[x] = seq[k]
			seq[k]++
		}
	}
	for x, n := range want {
		switch g := got[x]; {
		case g == 0:
			rep.missing += n
			if len(rep.problems) < 10 {
				rep.problems = append(rep.problems, fmt.Sprintf("missing: key %q value %q", x.key, x.value))
			}
		case g < n:
			rep.missing += n - g
		default:
			rep.distinct += n
			rep.duplicates += g - n
		}
	}
	// Per key (keyed records only: a nil key has no order across
	// partitions), the i-th distinct record sent must be the i-th distinct
	// one seen first coming back.
	for k, idx := range order {
		if k.nilKey {
			continue
		}
		pos := 0
		for _, i := range idx {
			x := id(sent[i])
			if f, ok := firstSeen[x]; ok {
				if f < pos {
					rep.disordered++
					if len(rep.problems) < 10 {
						rep.problems = append(rep.problems, fmt.Sprintf("out of order: key %q value %q", k.key, x.value))
					}
					break
				}
				pos = f
			}
		}
	}
	return rep
}
