package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kgo"
)

func recs(kvs ...string) []*kgo.Record {
	var out []*kgo.Record
	for i := 0; i < len(kvs); i += 2 {
		r := &kgo.Record{Value: []byte(kvs[i+1])}
		if kvs[i] != "" {
			r.Key = []byte(kvs[i])
		}
		out = append(out, r)
	}
	return out
}

// TestCompareJudgesTheRoundTrip proves the round-trip check passes a
// complete return with duplicates and fails a missing, an invented and a
// reordered record, each counted.
func TestCompareJudgesTheRoundTrip(t *testing.T) {
	sent := recs("a", "1", "b", "2", "a", "3", "", "4")

	r := compare(sent, recs("b", "2", "a", "1", "a", "1", "a", "3", "", "4"))
	assert.Equal(t, report{distinct: 4, duplicates: 1}, report{distinct: r.distinct, duplicates: r.duplicates})
	assert.Zero(t, r.missing+r.invented+r.disordered)

	r = compare(sent, recs("a", "1", "a", "3", "", "4"))
	assert.Equal(t, 1, r.missing, "b/2 never came back")

	r = compare(sent, recs("a", "1", "b", "2", "a", "3", "", "4", "c", "9"))
	assert.Equal(t, 1, r.invented)

	r = compare(sent, recs("a", "3", "b", "2", "a", "1", "", "4"))
	assert.Equal(t, 1, r.disordered, "a/3 came back before a/1")

	r = compare(sent, recs("b", "2", "a", "1", "a", "3", "4", "4"))
	assert.Equal(t, 1, r.missing, "a nil key is not an empty or other key")
	assert.Equal(t, 1, r.invented)
}

// TestCountSourcesCountsCopiesOfOneSourceRecord proves sources counts a
// record whose relay headers name a source record already seen as a
// duplicate, tells apart the same offset of two partitions, and counts
// records without the headers apart.
func TestCountSourcesCountsCopiesOfOneSourceRecord(t *testing.T) {
	from := func(p, o string) *kgo.Record {
		return &kgo.Record{Headers: []kgo.RecordHeader{{Key: relayHeaderPartition, Value: []byte(p)}, {Key: relayHeaderOffset, Value: []byte(o)}}}
	}
	n, distinct, dups, foreign := countSources([]*kgo.Record{from("0", "1"), from("1", "1"), from("0", "1"), from("0", "1"), from("0", "2"), {}})
	assert.Equal(t, [4]int{6, 3, 2, 1}, [4]int{n, distinct, dups, foreign})
}
