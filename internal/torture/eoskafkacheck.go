package torture

// Scenario eos-kafka's check: the committed output, read with read_committed,
// against the results an uninterrupted computation gives.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EOSKafkaCheck is scenario eos-kafka's count of the committed output against the
// expected (window, key) results. A run passes with every count but
// Expected, Results and Sentinels at zero.
type EOSKafkaCheck struct {
	Expected   int // (window, key) results an uninterrupted run emits, each once
	Results    int // committed output records, sentinels' excluded
	Lost       int // expected results not in the committed output
	Duplicated int // results beyond the first of their (window, key)
	OutOfOrder int // results whose window starts before that of an earlier result of the same key (a duplicate counts as one only)
	Wrong      int // results whose count differs from the expected one
	Unknown    int // results for a (window, key) no record belongs to
	Malformed  int // output values that do not parse
	Late       int // committed records of EOSKafkaLate: records the window found late
	Sentinels  int // results for the sentinels' windows (ignored)

	lostEx, dupEx, oooEx, wrongEx, unknownEx, malformedEx []string
}

// Failures is the number of results and records that break exactly-once.
func (c *EOSKafkaCheck) Failures() int {
	return c.Lost + c.Duplicated + c.OutOfOrder + c.Wrong + c.Unknown + c.Malformed + c.Late
}

// checkExactlyOnce counts results, each output partition's in offset
// order, against expected. window is the windows' size in milliseconds.
// Every result of a key is in one output partition (keyed by it), so the
// order of a key's results is the order its worker committed them in.
func checkExactlyOnce(expected map[windowKey]int64, results []eosResult, window int64) EOSKafkaCheck {
	c := EOSKafkaCheck{Expected: len(expected)}
	seen := make(map[windowKey]eosResult) // the first result of each
	last := make(map[string]int64)        // the latest window start of each key so far
	for _, r := range results {
		if strings.HasPrefix(r.Key, "sentinel-") {
			c.Sentinels++
			continue
		}
		c.Results++
		k := windowKey{start: r.Start, key: r.Key}
		want, ok := expected[k]
		if !ok || r.End-r.Start != window {
			c.Unknown++
			c.unknownEx = appendEx(c.unknownEx, "%s [%s, %s) count %d by %s", r.Key, msTime(r.Start), msTime(r.End), r.Count, r.Worker)
			continue
		}
		first, dup := seen[k]
		switch prev, any := last[r.Key]; {
		case dup:
			c.Duplicated++
			c.dupEx = appendEx(c.dupEx, "%s [%s, %s) count %d by %s at %s, first count %d by %s at %s",
				r.Key, msTime(r.Start), msTime(r.End), r.Count, r.Worker, r.at(), first.Count, first.Worker, first.at())
		case any && r.Start < prev:
			c.OutOfOrder++
			c.oooEx = appendEx(c.oooEx, "%s [%s, %s) by %s at %s after [%s, ...)", r.Key, msTime(r.Start), msTime(r.End), r.Worker, r.at(), msTime(prev))
		}
		if !dup {
			seen[k] = r
		}
		last[r.Key] = max(last[r.Key], r.Start)
		if r.Count != want {
			c.Wrong++
			c.wrongEx = appendEx(c.wrongEx, "%s [%s, %s) count %d by %s, want %d", r.Key, msTime(r.Start), msTime(r.End), r.Count, r.Worker, want)
		}
	}
	keys := slices.SortedFunc(maps.Keys(expected), func(a, b windowKey) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.key, b.key))
	})
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			c.Lost++
			c.lostEx = appendEx(c.lostEx, "%s [%s, %s) want %d", k.key, msTime(k.start), msTime(k.start+window), expected[k])
		}
	}
	return c
}

// eosResult is a committed output record of scenario eos-kafka and where it is.
type eosResult struct {
	scaleResult
	partition int32
	offset    int64
}

// at names where r is: "p2@37" (EOSKafkaOutput's partition 2, offset 37).
func (r eosResult) at() string { return fmt.Sprintf("p%d@%d", r.partition, r.offset) }

// readCommitted returns every committed record of topic, by partition in
// offset order, as a read_committed consumer sees them: up to each
// partition's last stable offset, without the records of aborted
// transactions and the transactions' markers. It fetches with raw
// requests, as the source's restore does: a consumer does not say where it
// stands when the last offsets of a partition are markers.
func readCommitted(ctx context.Context, cl *kgo.Client, topic string) ([]*kgo.Record, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("torture: list the last stable offsets of %s: %w", topic, err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("torture: describe %s: %w", topic, err)
	}
	id := details[topic].ID
	var recs []*kgo.Record
	parts := ends[topic]
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		o := parts[p]
		if o.Err != nil {
			return nil, fmt.Errorf("torture: the last stable offset of %s/%d: %w", topic, p, o.Err)
		}
		for off := int64(0); off < o.Offset; {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = -1, 100, 1<<20, 1, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, off, 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return nil, fmt.Errorf("torture: fetch %s/%d at %d: %w", topic, p, off, err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return nil, fmt.Errorf("torture: fetch %s/%d at %d: %d topics in the response", topic, p, off, len(resp.Topics))
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic, Partition: p,
				IsolationLevel: kgo.ReadCommitted()}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return nil, fmt.Errorf("torture: fetch %s/%d at %d: %w", topic, p, off, fp.Err)
			}
			for _, r := range fp.Records {
				if r.Offset < o.Offset {
					recs = append(recs, r)
				}
			}
			if next <= off {
				return nil, fmt.Errorf("torture: fetch %s/%d: no progress at offset %d of %d", topic, p, off, o.Offset)
			}
			off = next
		}
	}
	return recs, nil
}

// checkEOSKafka reads the committed output and late records and checks them;
// each kind of failure is one violation naming its count and examples.
func (s *supervisor) checkEOSKafka(ctx context.Context) error {
	es := s.eosKafka
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	late, err := readCommitted(rctx, es.admCl, EOSKafkaLate)
	if err != nil {
		return err
	}
	out, err := readCommitted(rctx, es.admCl, EOSKafkaOutput)
	if err != nil {
		return err
	}
	var results []eosResult
	var malformed []string
	for _, r := range out {
		res, err := parseScaleResult(r.Value)
		if err != nil {
			malformed = appendEx(malformed, "%s partition %d offset %d: %v", EOSKafkaOutput, r.Partition, r.Offset, err)
			continue
		}
		results = append(results, eosResult{scaleResult: res, partition: r.Partition, offset: r.Offset})
	}
	c := checkExactlyOnce(es.data.expected(), results, scaleWindow.Milliseconds())
	c.Malformed, c.malformedEx = len(out)-len(results), malformed
	c.Late = len(late)
	es.rep.Check = &c
	for _, slot := range s.children {
		for inc := 0; inc <= slot.inc && slot.cmd != nil; inc++ {
			commits, aborts := readEOSKafkaStats(eosKafkaStatsPath(filepath.Join(s.cfg.Dir, slot.name), inc))
			es.rep.Commits += commits
			es.rep.Aborts += aborts
		}
	}
	es.rep.BrokerCommits, es.rep.BrokerAborts = es.watch.counts()
	for _, v := range []struct {
		n    int
		what string
		ex   []string
	}{
		{c.Lost, fmt.Sprintf("of %d expected results lost (not in the committed output)", c.Expected), c.lostEx},
		{c.Duplicated, "results duplicated (a (window, key) committed more than once)", c.dupEx},
		{c.OutOfOrder, "results out of order (a window committed after a later one of its key)", c.oooEx},
		{c.Wrong, "results carry a wrong count", c.wrongEx},
		{c.Unknown, "results for windows no record belongs to", c.unknownEx},
		{c.Malformed, "output values do not parse", c.malformedEx},
	} {
		if v.n > 0 {
			s.violate("eos-kafka: %d %s, e.g. %s", v.n, v.what, strings.Join(v.ex, "; "))
		}
	}
	if c.Late > 0 {
		s.violate("eos-kafka: %d records committed to %s: the window found them late (their counts are low)", c.Late, EOSKafkaLate)
	}
	return nil
}
