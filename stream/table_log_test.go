package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// demoEvent is an event as the demo publisher writes it, keyed by its user.
type demoEvent struct {
	User  string `json:"user"`
	Event string `json:"event"`
	Seq   int64  `json:"seq"`
}

// profile is a row of the users topic: name and country, keyed by user id.
type profile struct {
	Name    string `json:"name"`
	Country string `json:"country"`
}

// TestJoinTableOnLogTopicsEqualsAnIndependentLookupAlsoWhenCompactedMidway joins
// 20,000 publisher-style events (3 partitions) with a users table read from a
// compacted topic holding 6,000 updates of 1,000 users (names, countries,
// tombstones), inner and left; in one variant the users topic is compacted
// while the table reads it, half-way. Every output equals a lookup of the
// event's user in the topic's latest values, computed here from what was
// written, and every event's position is saved.
func TestJoinTableOnLogTopicsEqualsAnIndependentLookupAlsoWhenCompactedMidway(t *testing.T) {
	for _, tc := range []struct {
		name          string
		left, compact bool
	}{{"inner", false, false}, {"left", true, false}, {"inner compacted midway", false, true}, {"left compacted midway", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lg, err := log.Open(dir, log.WithSegmentBytes(16<<10), log.WithCleanerInterval(0))
			require.NoError(t, err)
			defer lg.Close()
			users, err := lg.CreateTopic("users", 2, log.WithCleanupPolicy(log.CleanupCompact))
			require.NoError(t, err)
			events, err := lg.CreateTopic("events", 3)
			require.NoError(t, err)

			r := rand.New(rand.NewPCG(7, 8))
			latest := make(map[string]profile)
			for i := range 6000 {
				id := fmt.Sprintf("user-%d", r.IntN(1000))
				rec := log.Record{Key: []byte(id)}
				if r.IntN(20) == 0 {
					delete(latest, id) // a tombstone: empty value
				} else {
					p := profile{Name: fmt.Sprintf("name-%d", i), Country: []string{"NO", "FR", "JP", "BR"}[r.IntN(4)]}
					rec.Value, err = json.Marshal(p)
					require.NoError(t, err)
					latest[id] = p
				}
				_, _, err := users.Append(t.Context(), rec)
				require.NoError(t, err)
			}
			var evs []demoEvent
			for i := range 20000 {
				e := demoEvent{User: fmt.Sprintf("user-%d", r.IntN(1100)), Event: "click", Seq: int64(i)}
				v, err := json.Marshal(e)
				require.NoError(t, err)
				_, _, err = events.Append(t.Context(), log.Record{Key: []byte(e.User), Value: v})
				require.NoError(t, err)
				evs = append(evs, e)
			}

			type row struct {
				ID      string
				Profile profile
				Deleted bool
			}
			var read atomic.Int64
			var removed int64
			userRecs := stream.From(source.Topic(lg, "users", source.Earliest, source.Replay())).
				Tap(func(context.Context, log.Record) error {
					if n := read.Add(1); n == 3000 && tc.compact {
						rep, err := users.Compact(time.Now())
						if err != nil {
							return err
						}
						for _, p := range rep.Partitions {
							removed += p.RecordsRemoved
						}
					}
					return nil
				})
			rows := stream.MapTo(userRecs, func(_ context.Context, rec log.Record) (row, error) {
				if len(rec.Value) == 0 {
					return row{ID: string(rec.Key), Deleted: true}, nil
				}
				var p profile
				err := json.Unmarshal(rec.Value, &p)
				return row{ID: string(rec.Key), Profile: p}, err
			})
			table := stream.ToTable(stream.KeyBy(rows, func(u row) string { return u.ID }),
				stream.Tombstone(func(u row) bool { return u.Deleted }))

			evRecs := stream.MapTo(stream.From(source.Topic(lg, "events", source.Earliest, source.Replay())),
				func(_ context.Context, rec log.Record) (demoEvent, error) {
					var e demoEvent
					return e, json.Unmarshal(rec.Value, &e)
				})
			keyed := stream.KeyBy(evRecs, func(e demoEvent) string { return e.User })
			type out struct {
				Seq     int64
				Profile profile
				Found   bool
			}
			var joined *stream.Stream[out]
			if tc.left {
				joined = stream.LeftJoinTable(keyed, table, func(e demoEvent, u row, ok bool) out { return out{e.Seq, u.Profile, ok} })
			} else {
				joined = stream.JoinTable(keyed, table, func(e demoEvent, u row) out { return out{e.Seq, u.Profile, true} })
			}
			sink := streamtest.Collect[out]()
			store := checkpoint.NewMemoryStore()
			require.NoError(t, joined.To(sink).Checkpointing(store).Run(t.Context()))
			if tc.compact {
				require.Positive(t, removed, "the pass midway removed records the table had not read yet")
			}

			got := make(map[int64]out)
			for _, o := range sink.Values() {
				_, dup := got[o.Seq]
				require.False(t, dup, "event %d joined twice in one uninterrupted run", o.Seq)
				got[o.Seq] = o
			}
			n := 0
			for _, e := range evs {
				p, ok := latest[e.User]
				if !ok && !tc.left {
					_, in := got[e.Seq]
					require.False(t, in, "an event of unknown %s is dropped by the inner join", e.User)
					continue
				}
				n++
				require.Equal(t, out{e.Seq, p, ok}, got[e.Seq], "event %d of %s", e.Seq, e.User)
			}
			assert.Len(t, got, n)
			assert.Len(t, latest, table.Len())
			for p := range int32(3) {
				pos, found, err := store.Load(t.Context(), "events", p)
				require.NoError(t, err)
				require.True(t, found)
				part, err := events.Partition(p)
				require.NoError(t, err)
				assert.Equal(t, part.HighWatermark(), pos.Offset, "every event of partition %d is finished", p)
			}
		})
	}
}

// TestWindowAfterAJoinIsNotHeldBackByTheTablesPartitions runs a tumbling
// window after a stream-table join, both topics followed: the table's
// partitions deliver nothing to the window, so they must not hold its
// watermark back (a window whose input never ends fires only on its
// watermark). A result while both sources still follow shows they do not.
func TestWindowAfterAJoinIsNotHeldBackByTheTablesPartitions(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	users, err := lg.CreateTopic("users", 2)
	require.NoError(t, err)
	events, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	_, _, err = users.Append(t.Context(), log.Record{Key: []byte("u1"), Value: []byte("NO")})
	require.NoError(t, err)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 50 {
		_, _, err := events.Append(t.Context(), log.Record{Key: []byte("u1"), Value: []byte("click"), Timestamp: base + int64(i)*100})
		require.NoError(t, err)
	}
	table := stream.ToTable(stream.KeyBy(stream.From(source.Topic(lg, "users", source.Earliest)),
		func(r log.Record) string { return string(r.Key) }))
	clicks := stream.KeyBy(stream.From(source.Topic(lg, "events", source.Earliest)), func(r log.Record) string { return string(r.Key) })
	byCountry := stream.JoinTable(clicks, table, func(c log.Record, u log.Record) log.Record {
		c.Key = u.Value
		return c
	})
	counts := stream.Window(stream.KeyBy(byCountry, func(r log.Record) string { return string(r.Key) }),
		stream.Tumbling(time.Second), stream.Count[log.Record]())
	sink := streamtest.Collect[stream.WindowResult[string, int64]]()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- counts.To(sink).Run(ctx) }()
	require.Eventually(t, func() bool { return len(sink.Values()) >= 4 }, time.Minute, time.Millisecond,
		"the windows of the first 4 s fire on the watermark while both topics are followed")
	cancel()
	require.NoError(t, <-done)
	for _, r := range sink.Values()[:4] {
		assert.Equal(t, "NO", r.Key)
		assert.Equal(t, int64(10), r.Value)
	}
}
