package stream_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// user is a row of a users table; Deleted marks a tombstone.
type user struct {
	ID, Name, Country string
	Deleted           bool
}

// click is an event keyed by its user.
type click struct {
	User string
	N    int
}

// enriched is a click joined with its user.
type enriched struct {
	N       int
	Name    string
	Country string
	Found   bool
}

func usersOf(rows []user) *stream.Table[string, user] {
	src := streamtest.Slice(rows, streamtest.OnTopic("users"), streamtest.BatchSize(7))
	return stream.ToTable(stream.KeyBy(stream.From(src), func(u user) string { return u.ID }),
		stream.Tombstone(func(u user) bool { return u.Deleted }), stream.Name("users"))
}

// randomUsers returns n updates of users u0..u(keys-1), some of them
// tombstones, and the table they leave (an independent fold).
func randomUsers(r *rand.Rand, n, keys int) ([]user, map[string]user) {
	rows := make([]user, n)
	want := make(map[string]user)
	for i := range rows {
		id := fmt.Sprintf("u%d", r.IntN(keys))
		u := user{ID: id, Name: fmt.Sprintf("name-%d", i), Country: []string{"NO", "FR", "JP"}[r.IntN(3)], Deleted: r.IntN(10) == 0}
		rows[i] = u
		if u.Deleted {
			delete(want, id)
		} else {
			want[id] = u
		}
	}
	return rows, want
}

func TestTableKeepsTheLatestValueOfEachKeyAndTombstonesDelete(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, want := randomUsers(r, 5000, 300)
	tbl := usersOf(rows)
	require.NoError(t, tbl.Run(t.Context()))
	assert.Equal(t, want, maps.Collect(tbl.All()))
	assert.Equal(t, len(want), tbl.Len())
	for id, u := range want {
		got, ok := tbl.Get(id)
		require.True(t, ok, id)
		require.Equal(t, u, got)
	}
	_, ok := tbl.Get("nobody")
	assert.False(t, ok)
	select {
	case <-tbl.Ready():
	default:
		t.Fatal("a table whose input ended is not ready")
	}
	assert.ErrorIs(t, tbl.Run(t.Context()), stream.ErrAlreadyRun)
}

func TestJoinTableInnerAndLeftEqualAnIndependentLookup(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rows, table := randomUsers(r, 2000, 100)
	clicks := make([]click, 3000)
	for i := range clicks {
		clicks[i] = click{User: fmt.Sprintf("u%d", r.IntN(120)), N: i} // some users never exist
	}
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			tbl := usersOf(rows)
			ks := stream.KeyBy(stream.From(streamtest.Slice(clicks, streamtest.OnTopic("clicks"))), func(c click) string { return c.User })
			var out *stream.Stream[enriched]
			if left {
				out = stream.LeftJoinTable(ks, tbl, func(c click, u user, ok bool) enriched {
					return enriched{N: c.N, Name: u.Name, Country: u.Country, Found: ok}
				})
			} else {
				out = stream.JoinTable(ks, tbl, func(c click, u user) enriched {
					return enriched{N: c.N, Name: u.Name, Country: u.Country, Found: true}
				})
			}
			sink := streamtest.Collect[enriched]()
			store := checkpoint.NewMemoryStore()
			require.NoError(t, out.To(sink).Checkpointing(store).Run(t.Context()))

			// The table's slice is read before any click is joined (the
			// join waits for Ready): every click meets the final table.
			var want []enriched
			for _, c := range clicks {
				u, ok := table[c.User]
				if ok || left {
					want = append(want, enriched{N: c.N, Name: u.Name, Country: u.Country, Found: ok})
				}
			}
			assert.Equal(t, want, sink.Values())
			for _, topic := range []string{"users", "clicks"} {
				pos, found, err := store.Load(t.Context(), topic, 0)
				require.NoError(t, err)
				require.True(t, found, topic)
				n := map[string]int{"users": len(rows), "clicks": len(clicks)}[topic]
				assert.Equal(t, int64(n), pos.Offset, "every record of %s is finished, joined or dropped", topic)
			}
			assert.ErrorIs(t, tbl.Run(t.Context()), stream.ErrTableJoined)
		})
	}
}

func TestTableRestoresFromItsSnapshotAndSkipsWhatItHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows, want := randomUsers(r, 3000, 500)
	store := checkpoint.NewMemoryStore()

	// First run: the first 2000 rows, checkpointed.
	first := streamtest.Slice(rows[:2000], streamtest.OnTopic("users"))
	tbl := stream.ToTable(stream.KeyBy(stream.From(first).Checkpointing(store), func(u user) string { return u.ID }),
		stream.Tombstone(func(u user) bool { return u.Deleted }))
	require.NoError(t, tbl.Run(t.Context()))

	// Second run over all rows, resumed from the store: the source starts
	// at 2000, the table from the snapshot.
	second := streamtest.Slice(rows, streamtest.OnTopic("users"))
	require.NoError(t, second.Resume(t.Context(), store))
	require.Equal(t, int64(2000), second.Position(), "the restart reads only what the checkpoint had not")
	tbl2 := stream.ToTable(stream.KeyBy(stream.From(second).Checkpointing(store), func(u user) string { return u.ID }),
		stream.Tombstone(func(u user) bool { return u.Deleted }))
	require.NoError(t, tbl2.Run(t.Context()))
	assert.Equal(t, want, maps.Collect(tbl2.All()))
	st := tbl2.Stats()
	require.Len(t, st, 1)
	assert.Equal(t, int64(1000), st[0].In, "only the records after the checkpoint were applied")

	// A table of other types refuses the snapshot.
	third := streamtest.Slice([]int{1}, streamtest.OnTopic("users"))
	bad := stream.ToTable(stream.KeyBy(stream.From(third).Checkpointing(store), func(int) string { return "" }))
	assert.ErrorIs(t, bad.Run(t.Context()), stream.ErrStateMismatch)
}

func TestJoinTableWaitsForTheTableToCatchUpAndStopsOnCancel(t *testing.T) {
	// A table whose source never ends and cannot tell when it caught up:
	// the join holds the stream's records back; cancelling Run ends it
	// with nothing of the stream saved.
	tblSrc := streamtest.Slice([]user{{ID: "u1", Name: "Ann"}}, streamtest.OnTopic("users"), streamtest.Follow())
	tbl := stream.ToTable(stream.KeyBy(stream.From(tblSrc), func(u user) string { return u.ID }))
	ks := stream.KeyBy(stream.From(streamtest.Slice([]click{{User: "u1"}}, streamtest.OnTopic("clicks"))), func(c click) string { return c.User })
	sink := streamtest.Collect[enriched]()
	store := &streamtest.RecordingStore{}
	ctx, cancel := context.WithCancel(t.Context())
	out := stream.JoinTable(ks, tbl, func(c click, u user) enriched { return enriched{Name: u.Name} }).
		Tap(func(context.Context, enriched) error { return nil }).
		To(sink).Checkpointing(store)
	done := make(chan error, 1)
	go func() { done <- out.Run(ctx) }()
	// The table gets its row; the click waits.
	require.Eventually(t, func() bool { return tbl.Len() == 1 }, time.Minute, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, sink.Values())
	_, found := store.Position("clicks", 0)
	assert.False(t, found, "the click was never joined: its position is not saved")
}

func TestToTableAndJoinTablePanicOnMisuse(t *testing.T) {
	assert.PanicsWithValue(t, "stream: ToTable called with a nil Keyed", func() { stream.ToTable[string, user](nil) })
	assert.Panics(t, func() {
		stream.Aggregate(stream.KeyBy(stream.From(streamtest.Slice([]int{1})), func(int) int { return 0 }), stream.Count[int](),
			stream.Tombstone(func(int) bool { return false }))
	}, "Tombstone applies to ToTable only")
	assert.Panics(t, func() {
		stream.ToTable(stream.KeyBy(stream.From(streamtest.Slice([]int{1})), func(int) int { return 0 }),
			stream.Tombstone(func(string) bool { return false }))
	}, "a Tombstone of another type")
	tbl := usersOf(nil)
	ks := stream.KeyBy(stream.From(streamtest.Slice([]click{})), func(c click) string { return c.User })
	stream.JoinTable(ks, tbl, func(c click, u user) click { return c })
	other := stream.KeyBy(stream.From(streamtest.Slice([]click{})), func(c click) string { return c.User })
	assert.Panics(t, func() { stream.JoinTable(other, tbl, func(c click, u user) click { return c }) },
		"a table feeds one pipeline")
}

// A table of users, its tombstones deleting, read from outside the pipeline.
func ExampleToTable() {
	updates := []user{
		{ID: "u1", Name: "Ann", Country: "NO"},
		{ID: "u2", Name: "Bo", Country: "SE"},
		{ID: "u1", Name: "Ann", Country: "FR"}, // u1 moved
		{ID: "u2", Deleted: true},              // u2 left
	}
	users := stream.ToTable(stream.KeyBy(stream.From(streamtest.Slice(updates)), func(u user) string { return u.ID }),
		stream.Tombstone(func(u user) bool { return u.Deleted }))
	if err := users.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	u1, _ := users.Get("u1")
	_, found := users.Get("u2")
	fmt.Println(users.Len(), u1.Country, found)
	// Output: 1 FR false
}

// Clicks enriched with their user's country; a click of an unknown user is
// kept by the left join.
func ExampleLeftJoinTable() {
	users := stream.ToTable(stream.KeyBy(stream.From(streamtest.Slice([]user{{ID: "u1", Name: "Ann", Country: "NO"}}, streamtest.OnTopic("users"))),
		func(u user) string { return u.ID }))
	clicks := stream.KeyBy(stream.From(streamtest.Slice([]click{{User: "u1", N: 1}, {User: "u9", N: 2}}, streamtest.OnTopic("clicks"))),
		func(c click) string { return c.User })
	enriched := stream.LeftJoinTable(clicks, users, func(c click, u user, found bool) string {
		if !found {
			return fmt.Sprintf("click %d: unknown user %s", c.N, c.User)
		}
		return fmt.Sprintf("click %d: %s from %s", c.N, u.Name, u.Country)
	})
	out := streamtest.Collect[string]()
	if err := enriched.To(out).Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	for _, line := range out.Values() {
		fmt.Println(line)
	}
	// Output:
	// click 1: Ann from NO
	// click 2: unknown user u9
}

// TestAJoinFunctionMayReadItsOwnTable has the join function read the table
// (Get) once a checkpoint is taking the table's write lock for its
// snapshot: the function runs outside the table's read lock, so its read
// never waits behind a writer that waits for the join's own read lock (a
// goroutine's second read lock deadlocks once a writer waits between).
func TestAJoinFunctionMayReadItsOwnTable(t *testing.T) {
	rows := make([]user, 100)
	for i := range rows {
		rows[i] = user{ID: fmt.Sprintf("u%d", i), Name: fmt.Sprintf("n%d", i)}
	}
	clicks := make([]click, 2000)
	for i := range clicks {
		clicks[i] = click{User: fmt.Sprintf("u%d", i%100), N: i}
	}
	tbl := usersOf(rows)
	ks := stream.KeyBy(stream.From(streamtest.Slice(clicks, streamtest.OnTopic("clicks"))), func(c click) string { return c.User })
	var out *stream.Stream[string]
	saved := make(chan error, 1)
	out = stream.JoinTable(ks, tbl, func(c click, u user) string {
		if c.N == 500 {
			go func() { saved <- out.Checkpoint(context.Background()) }()
			for !stream.TableLocked(tbl) && len(saved) == 0 {
				runtime.Gosched() // until the save holds or waits for the table's lock, or is done
			}
		}
		boss, _ := tbl.Get("u0")
		return u.Name + "/" + boss.Name
	})
	sink := streamtest.Collect[string]()
	out = out.To(sink).Checkpointing(checkpoint.NewMemoryStore())
	done := make(chan error, 1)
	go func() { done <- out.Run(t.Context()) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the pipeline is stuck: the join function's Get waits behind the checkpoint's write lock")
	}
	require.NoError(t, <-saved)
	require.Len(t, sink.Values(), len(clicks))
	assert.Equal(t, "n7/n0", sink.Values()[7])
}

// TestATableWithoutItsStateOverSavedPositionsIsRefused renames a
// checkpointed table, and adds a stateful stage beside it: either way the
// pipeline's state is looked up under another name and not found, and the
// table would start empty at the saved positions, missing every key below
// them. Run refuses it with ErrStateMismatch instead.
func TestATableWithoutItsStateOverSavedPositionsIsRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	rows, _ := randomUsers(r, 500, 50)
	store := checkpoint.NewMemoryStore()
	build := func(name string, withAgg bool) *stream.Table[string, user] {
		src := streamtest.Slice(rows, streamtest.OnTopic("users"))
		require.NoError(t, src.Resume(t.Context(), store))
		s := stream.From(src).Checkpointing(store)
		if withAgg {
			counts := stream.Aggregate(stream.KeyBy(s, func(u user) string { return u.ID }), stream.Count[user](), stream.Name("count"))
			s = stream.MapTo(counts, func(_ context.Context, kv stream.KV[string, int64]) (user, error) { return user{ID: kv.Key}, nil })
		}
		return stream.ToTable(stream.KeyBy(s, func(u user) string { return u.ID }), stream.Name(name))
	}
	require.NoError(t, build("users", false).Run(t.Context()))
	rows = append(rows, user{ID: "late", Name: "new"})
	for _, tc := range []struct {
		name    string
		table   string
		withAgg bool
	}{{"renamed", "people", false}, {"stage added", "users", true}} {
		t.Run(tc.name, func(t *testing.T) {
			err := build(tc.table, tc.withAgg).Run(t.Context())
			require.ErrorIs(t, err, stream.ErrStateMismatch)
			assert.ErrorContains(t, err, "position of users/0 is saved (500)")
			assert.ErrorContains(t, err, "miss every record before it")
		})
	}
	tbl := build("users", false)
	require.NoError(t, tbl.Run(t.Context()), "the old stages find their state")
	u, ok := tbl.Get("late")
	assert.True(t, ok)
	assert.Equal(t, "new", u.Name)
}
