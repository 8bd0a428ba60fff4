package sink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// keyed returns n records with values "prefix-i", keyed over 5 keys.
func keyed(prefix string, n int) []log.Record {
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = log.Record{Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return recs
}

// nextOffsets returns the next offset of every partition of tp.
func nextOffsets(t *testing.T, tp *log.Topic) []int64 {
	t.Helper()
	ends := make([]int64, tp.Partitions())
	for i := range ends {
		p, err := tp.Partition(int32(i))
		require.NoError(t, err)
		ends[i] = p.NextOffset()
	}
	return ends
}

// topicValues returns the values of every record of tp, partition by partition.
func topicValues(t *testing.T, tp *log.Topic) []string {
	t.Helper()
	var out []string
	for id := range int32(tp.Partitions()) {
		for _, r := range readPartition(t, tp, id) {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// reopen closes lg, as a killed process leaves it (every appended record is
// in the files; nothing more is written), and opens its directory again.
func reopen(t *testing.T, lg *log.Log, mode log.Mode) *log.Log {
	t.Helper()
	require.NoError(t, lg.Close())
	lg2, err := log.Open(lg.Dir(), log.WithMode(mode), log.WithSegmentBytes(testutil.SegmentBytes))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lg2.Close()) })
	return lg2
}

var topicPos = func(topic string, p int32, off int64) checkpoint.TopicPosition {
	return checkpoint.TopicPosition{Topic: topic, Partition: p, Position: checkpoint.Position{Offset: off, Epoch: 2}}
}

// TestLogSinkCommitKeepsRecordsPositionsAndState ensures a committed
// transaction's records, positions and state are what a new sink on the
// reopened log finds: Load and LoadState return them, CommittedEnds gives
// the partitions' ends, and BeginTransactions truncates nothing.
func TestLogSinkCommitKeepsRecordsPositionsAndState(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			ctx := context.Background()
			lg := testutil.OpenLog(t, m.Mode)
			tp, err := lg.CreateTopic("out", 3)
			require.NoError(t, err)
			out := sink.Log(tp, sink.Synced())
			require.NoError(t, out.BeginTransactions(ctx))
			require.NoError(t, out.JoinTransaction(out))

			require.NoError(t, out.Write(ctx, keyed("a", 40)))
			require.NoError(t, out.SaveState(ctx, "agg", []byte("state-1")))
			got, found, err := out.LoadState(ctx, "agg")
			require.NoError(t, err)
			require.True(t, found, "the open transaction reads its own state")
			require.Equal(t, "state-1", string(got))
			committed, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 17), topicPos("in", 1, 23)}, true)
			require.NoError(t, err)
			require.True(t, committed)
			// The next transaction moves one position and leaves the state.
			require.NoError(t, out.Write(ctx, keyed("b", 10)))
			committed, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 1, 30)}, true)
			require.NoError(t, err)
			require.True(t, committed)
			ends := nextOffsets(t, tp)

			lg2 := reopen(t, lg, m.Mode)
			tp2, err := lg2.Topic("out")
			require.NoError(t, err)
			gotEnds, found, err := sink.CommittedEnds(tp2)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, ends, gotEnds)
			out2 := sink.Log(tp2)
			for _, want := range []checkpoint.TopicPosition{topicPos("in", 0, 17), topicPos("in", 1, 30)} {
				p, found, err := out2.Load(ctx, want.Topic, want.Partition)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, want.Position, p)
			}
			_, found, err = out2.Load(ctx, "in", 2)
			require.NoError(t, err)
			require.False(t, found, "a partition no transaction moved")
			require.NoError(t, out2.BeginTransactions(ctx))
			require.Equal(t, ends, nextOffsets(t, tp2), "nothing committed is truncated")
			require.Len(t, topicValues(t, tp2), 50)
			st, found, err := out2.LoadState(ctx, "agg")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, "state-1", string(st))
			_, found, err = out2.LoadState(ctx, "other")
			require.NoError(t, err)
			require.False(t, found)
		})
	}
}

// TestLogSinkBeginTruncatesATornTransaction ensures that the records of a
// transaction whose process died before its commit (records appended, no
// transaction file renamed, a temporary one half written) are truncated by
// the next BeginTransactions, that the last committed transaction's
// records, positions and state are intact, and that the temporary file is
// removed.
func TestLogSinkBeginTruncatesATornTransaction(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			ctx := context.Background()
			lg := testutil.OpenLog(t, m.Mode)
			tp, err := lg.CreateTopic("out", 2)
			require.NoError(t, err)
			out := sink.Log(tp)
			require.NoError(t, out.BeginTransactions(ctx))
			require.NoError(t, out.Write(ctx, keyed("committed", 30)))
			require.NoError(t, out.SaveState(ctx, "agg", []byte("committed")))
			ok, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 30)}, true)
			require.NoError(t, err)
			require.True(t, ok)
			ends := nextOffsets(t, tp)
			// The torn transaction: records of several segments, state
			// saved, a commit begun (a temporary file), then the kill.
			require.NoError(t, out.Write(ctx, keyed("torn", 300)))
			require.NoError(t, out.SaveState(ctx, "agg", []byte("torn")))
			tmp := filepath.Join(tp.Dir(), "."+sink.TransactionFile+".tmp-123")
			require.NoError(t, os.WriteFile(tmp, []byte("STROMTX\x00half"), 0o644))
			require.Greater(t, nextOffsets(t, tp)[0], ends[0])

			lg2 := reopen(t, lg, m.Mode)
			tp2, err := lg2.Topic("out")
			require.NoError(t, err)
			out2 := sink.Log(tp2)
			require.NoError(t, out2.BeginTransactions(ctx))
			require.Equal(t, ends, nextOffsets(t, tp2), "the torn transaction's records are truncated")
			for _, v := range topicValues(t, tp2) {
				require.True(t, strings.HasPrefix(v, "committed-"), v)
			}
			require.Len(t, topicValues(t, tp2), 30)
			p, found, err := out2.Load(ctx, "in", 0)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(30), p.Offset)
			st, _, err := out2.LoadState(ctx, "agg")
			require.NoError(t, err)
			require.Equal(t, "committed", string(st))
			require.NoFileExists(t, tmp)
			// Appends go on from the committed end.
			require.NoError(t, out2.Write(ctx, keyed("next", 4)))
			ok, err = out2.EndTransaction(ctx, nil, true)
			require.NoError(t, err)
			require.True(t, ok)
			require.Len(t, topicValues(t, tp2), 34)
		})
	}
}

// TestLogSinkFirstBeginCommitsTheTopicAsItIs ensures that on a topic with
// records and no transaction file, BeginTransactions commits the topic as
// it is (no position, no state), so a first transaction killed before its
// commit is truncated back to the records that were there before, not
// kept.
func TestLogSinkFirstBeginCommitsTheTopicAsItIs(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeMmap)
	tp, err := lg.CreateTopic("out", 2)
	require.NoError(t, err)
	require.NoError(t, sink.Log(tp).Write(ctx, keyed("before", 20)))
	before := nextOffsets(t, tp)
	_, found, err := sink.CommittedEnds(tp)
	require.NoError(t, err)
	require.False(t, found)

	out := sink.Log(tp)
	require.NoError(t, out.BeginTransactions(ctx))
	ends, found, err := sink.CommittedEnds(tp)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, before, ends)
	_, found, err = out.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, out.Write(ctx, keyed("first", 20)))

	lg2 := reopen(t, lg, log.ModeMmap)
	tp2, err := lg2.Topic("out")
	require.NoError(t, err)
	require.NoError(t, sink.Log(tp2).BeginTransactions(ctx))
	require.Equal(t, before, nextOffsets(t, tp2))
}

// TestLogSinkAbortTruncatesAndDropsState ensures EndTransaction with
// commit false returns (false, nil), truncates the transaction's records,
// and drops the state it saved, keeping the committed one.
func TestLogSinkAbortTruncatesAndDropsState(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	tp, err := lg.CreateTopic("out", 3)
	require.NoError(t, err)
	out := sink.Log(tp)
	require.NoError(t, out.BeginTransactions(ctx))
	require.NoError(t, out.Write(ctx, keyed("a", 9)))
	require.NoError(t, out.SaveState(ctx, "agg", []byte("one")))
	ok, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 9)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	ends := nextOffsets(t, tp)

	require.NoError(t, out.Write(ctx, keyed("b", 50)))
	require.NoError(t, out.SaveState(ctx, "agg", []byte("two")))
	ok, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 59)}, false)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, ends, nextOffsets(t, tp))
	st, _, err := out.LoadState(ctx, "agg")
	require.NoError(t, err)
	require.Equal(t, "one", string(st))
	p, _, err := out.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.Equal(t, int64(9), p.Offset)
}

// TestLogSinkIdleTransactionLeavesTheFileAlone ensures a transaction that
// wrote nothing and moved nothing commits without rewriting the file (an
// idle pipeline does no I/O every interval).
func TestLogSinkIdleTransactionLeavesTheFileAlone(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	tp, err := lg.CreateTopic("out", 1)
	require.NoError(t, err)
	out := sink.Log(tp)
	require.NoError(t, out.BeginTransactions(ctx))
	ok, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 5)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	path := filepath.Join(tp.Dir(), sink.TransactionFile)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	// Mark the file: a rewrite would replace its inode.
	ok, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 5)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	fi2, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(fi, fi2), "an idle transaction rewrote the file")
	ok, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 6)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	fi3, err := os.Stat(path)
	require.NoError(t, err)
	require.False(t, os.SameFile(fi, fi3), "a moved position must be committed")
}

// TestLogSinkRefusesSavesOutsideTransactions ensures a LogSink used as an
// ordinary store fails loudly: Save always, SaveState and EndTransaction
// before BeginTransactions, each with ErrNoTransaction.
func TestLogSinkRefusesSavesOutsideTransactions(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	tp, err := lg.CreateTopic("out", 1)
	require.NoError(t, err)
	out := sink.Log(tp)
	require.ErrorIs(t, out.Save(ctx, "in", 0, checkpoint.At(3)), sink.ErrNoTransaction)
	require.ErrorIs(t, out.SaveState(ctx, "agg", nil), sink.ErrNoTransaction)
	_, err = out.EndTransaction(ctx, nil, true)
	require.ErrorIs(t, err, sink.ErrNoTransaction)
	require.NoError(t, out.BeginTransactions(ctx))
	require.ErrorIs(t, out.Save(ctx, "in", 0, checkpoint.At(3)), sink.ErrNoTransaction)
	require.ErrorIs(t, out.SaveState(ctx, "bad/name", nil), checkpoint.ErrInvalidStateName)

	// And so does a pipeline checkpointed to it without ExactlyOnce.
	in, err := lg.CreateTopic("in", 1)
	require.NoError(t, err)
	require.NoError(t, sink.Log(in).Write(ctx, keyed("in", 3)))
	err = stream.From(source.Topic(lg, "in", source.FromStore(out), source.Replay())).
		To(out).Checkpointing(out).Run(ctx)
	require.ErrorIs(t, err, sink.ErrNoTransaction)
}

// TestLogSinkJoinsOnlyItsOwnTransactions ensures JoinTransaction accepts
// the sink itself once its transactions began, and refuses another
// LogSink's transactions and those of another transactor, and that Run
// refuses an ExactlyOnce pipeline writing two log topics, naming the sink.
func TestLogSinkJoinsOnlyItsOwnTransactions(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	a, err := lg.CreateTopic("a", 1)
	require.NoError(t, err)
	b, err := lg.CreateTopic("b", 1)
	require.NoError(t, err)
	sa, sb := sink.Log(a), sink.Log(b)
	require.ErrorContains(t, sa.JoinTransaction(sa), "not begun")
	require.NoError(t, sa.BeginTransactions(ctx))
	require.NoError(t, sa.JoinTransaction(sa))
	require.ErrorContains(t, sb.JoinTransaction(sa), "log topic a")
	require.ErrorContains(t, sa.JoinTransaction(&otherTransactor{}), "otherTransactor")

	in, err := lg.CreateTopic("in", 1)
	require.NoError(t, err)
	require.NoError(t, sink.Log(in).Write(ctx, keyed("in", 3)))
	err = stream.From(source.Topic(lg, "in", source.FromStore(sa), source.Replay()), stream.ExactlyOnce()).
		To(sa).To(sb).Checkpointing(sa).Run(ctx)
	require.ErrorIs(t, err, stream.ErrNotExactlyOnce)
	require.ErrorContains(t, err, "log topic a")
}

// otherTransactor is a stream.Transactor that is no LogSink.
type otherTransactor struct{ checkpoint.MemoryStore }

func (*otherTransactor) BeginTransactions(context.Context) error { return nil }
func (*otherTransactor) EndTransaction(context.Context, []checkpoint.TopicPosition, bool) (bool, error) {
	return true, nil
}

// TestLogSinkBeginFailsWhenCommittedRecordsAreGone ensures that a
// partition ending below its committed end (committed records lost) fails
// BeginTransactions with ErrCommittedLost naming the partition, and
// changes nothing.
func TestLogSinkBeginFailsWhenCommittedRecordsAreGone(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	tp, err := lg.CreateTopic("out", 1)
	require.NoError(t, err)
	out := sink.Log(tp)
	require.NoError(t, out.BeginTransactions(ctx))
	require.NoError(t, out.Write(ctx, keyed("a", 10)))
	_, err = out.EndTransaction(ctx, nil, true)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	require.NoError(t, p.Truncate(4))
	err = sink.Log(tp).BeginTransactions(ctx)
	require.ErrorIs(t, err, sink.ErrCommittedLost)
	require.ErrorContains(t, err, "partition 0")
	require.ErrorContains(t, err, "offset 4")
	require.Equal(t, int64(4), p.NextOffset())
}

// TestLogSinkDamagedTransactionFileIsCorrupt ensures a transaction file
// with a flipped byte, or cut short, is an error wrapping
// checkpoint.ErrCorrupt naming the file, from Load, LoadState,
// CommittedEnds and BeginTransactions, never "no transaction".
func TestLogSinkDamagedTransactionFileIsCorrupt(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-2] }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			lg := testutil.OpenLog(t, log.ModeFile)
			tp, err := lg.CreateTopic("out", 2)
			require.NoError(t, err)
			out := sink.Log(tp)
			require.NoError(t, out.BeginTransactions(ctx))
			require.NoError(t, out.SaveState(ctx, "agg", []byte("state")))
			_, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 1)}, true)
			require.NoError(t, err)
			path := filepath.Join(tp.Dir(), sink.TransactionFile)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, damage.fn(b), 0o644))

			fresh := sink.Log(tp)
			_, _, err = fresh.Load(ctx, "in", 0)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, path)
			_, _, err = fresh.LoadState(ctx, "agg")
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, _, err = sink.CommittedEnds(tp)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorIs(t, fresh.BeginTransactions(ctx), checkpoint.ErrCorrupt)
		})
	}
}

// countRecords returns every value of tp as "key=count" for the
// aggregate pipeline below, counting how often each occurs.
func countRecords(t *testing.T, tp *log.Topic) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for id := range int32(tp.Partitions()) {
		for _, r := range readPartition(t, tp, id) {
			seen[string(r.Key)+"="+string(r.Value)]++
		}
	}
	return seen
}

// TestLogSinkExactlyOnceAggregateSurvivesAFailedRun ensures a log ->
// Aggregate -> log pipeline under ExactlyOnce, checkpointed to its
// LogSink, writes each key's running count once: a first run commits the
// counts of half the input; a second, over the whole input, fails midway
// (a Map error) after writing records of its open transaction, which is
// aborted and truncated; a third resumes from the committed positions and
// state, so the output holds counts 1 to N of every key, each once.
func TestLogSinkExactlyOnceAggregateSurvivesAFailedRun(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			ctx := context.Background()
			lg := testutil.OpenLog(t, m.Mode)
			in, err := lg.CreateTopic("in", 2)
			require.NoError(t, err)
			const n = 600
			recs := keyed("in", n)
			require.NoError(t, sink.Log(in).Write(ctx, recs[:n/2]))
			tp, err := lg.CreateTopic("out", 3)
			require.NoError(t, err)
			out := sink.Log(tp, sink.Synced())

			errBoom := errors.New("boom")
			run := func(failAt int) (written int, err error) {
				handled := 0
				// One transaction per run, but for the last one when
				// Run ends: an interval longer than the test.
				s := stream.From(source.Topic(lg, "in", source.FromStore(out), source.Replay(), source.MaxBytes(512)),
					stream.ExactlyOnce(stream.TransactionInterval(time.Hour)))
				s = s.Map(func(_ context.Context, r log.Record) (log.Record, error) {
					handled++
					if handled == failAt {
						return r, errBoom
					}
					return r, nil
				})
				counts := stream.Aggregate(stream.KeyBy(s, func(r log.Record) string { return string(r.Key) }), stream.Count[log.Record]())
				err = stream.MapTo(counts, func(_ context.Context, kv stream.KV[string, int64]) (log.Record, error) {
					return log.Record{Key: []byte(kv.Key), Value: strconv.AppendInt(nil, kv.Value, 10)}, nil
				}).To(out).Tap(func(context.Context, log.Record) error { written++; return nil }).Checkpointing(out).Run(ctx)
				return written, err
			}
			written, err := run(-1)
			require.NoError(t, err)
			require.Equal(t, n/2, written)
			half, _, err := sink.CommittedEnds(tp)
			require.NoError(t, err)
			require.Equal(t, half, nextOffsets(t, tp))

			require.NoError(t, sink.Log(in).Write(ctx, recs[n/2:]))
			written, err = run(n / 4)
			require.ErrorIs(t, err, errBoom)
			require.Positive(t, written, "the failed run wrote records before it failed")
			ends, _, err := sink.CommittedEnds(tp)
			require.NoError(t, err)
			require.Equal(t, half, ends, "the failed run committed nothing")
			require.Equal(t, half, nextOffsets(t, tp), "the failed run's records are truncated")

			_, err = run(-1)
			require.NoError(t, err)
			seen := countRecords(t, tp)
			for k := range 5 {
				for c := 1; c <= n/5; c++ {
					require.Equal(t, 1, seen[fmt.Sprintf("k%d=%d", k, c)], "key k%d count %d", k, c)
				}
			}
			require.Len(t, seen, n, "nothing but counts 1 to N of every key")
		})
	}
}

// TestLogSinkExactlyOnceFromKafka ensures a Kafka -> log pipeline (a
// source.Kafka group member, the LogSink its transactor) writes each Kafka
// record once across a failed run: run A commits 150 records; run B, after
// 150 more were produced, fails midway, its open transaction aborted and
// truncated; the group's offsets are then committed at the topic's end
// (as a member committing at a revocation could leave them); run C starts
// from the log's positions (the runtime moves an assigned partition's
// start to the transactor's Load), not the group's, so the output holds
// each of the 300 records once.
func TestLogSinkExactlyOnceFromKafka(t *testing.T) {
	ctx := context.Background()
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(3), kafkatest.Topics("in"))
	cl := kc.Client(t)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "r%d", i)}
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		}
	}
	lg := testutil.OpenLog(t, log.ModeMmap)
	tp, err := lg.CreateTopic("out", 2)
	require.NoError(t, err)
	out := sink.Log(tp)
	committed := func() int64 {
		ends, _, err := sink.CommittedEnds(tp)
		require.NoError(t, err)
		return total(ends)
	}
	errBoom := errors.New("boom")
	// run runs the pipeline until failAt records were handled (it then
	// fails) or the log committed want outputs (it is then cancelled).
	run := func(failAt int, want int64) error {
		src, err := source.Kafka(kc.Brokers(), "g", []string{"in"})
		require.NoError(t, err)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		handled := 0
		done := make(chan error, 1)
		go func() {
			done <- stream.From(src, stream.ExactlyOnce(stream.TransactionInterval(10*time.Millisecond))).
				Map(func(_ context.Context, r log.Record) (log.Record, error) {
					handled++
					if handled == failAt {
						return r, errBoom
					}
					return log.Record{Key: r.Key, Value: r.Value}, nil
				}).To(out).Checkpointing(out).Run(rctx)
		}()
		for {
			select {
			case err := <-done:
				return err
			case <-time.After(5 * time.Millisecond):
				if want > 0 && committed() >= want {
					cancel()
					return <-done
				}
			}
		}
	}
	produce(0, 150)
	require.NoError(t, run(-1, 150))
	require.Equal(t, int64(150), committed())

	produce(150, 300)
	require.ErrorIs(t, run(75, -1), errBoom)
	// Its transactions before the failure may have committed (one each
	// 10 ms: under load, some do), never the one the failure aborted.
	failed := committed()
	require.GreaterOrEqual(t, failed, int64(150))
	require.Less(t, failed, int64(150+75), "the failed run committed at most the records handled before the failure")
	require.Equal(t, failed, total(nextOffsets(t, tp)), "its records past the committed ends are truncated")
	// The group's commits past the log's positions, as a member that
	// committed its finished records at a revocation would leave them:
	// run C must not start there.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "in")
	require.NoError(t, err)
	var ahead kadm.Offsets
	for p := range int32(3) {
		pos, found, err := out.Load(ctx, "in", p)
		require.NoError(t, err)
		require.True(t, found, "partition %d has a committed position", p)
		end, ok := ends.Lookup("in", p)
		require.True(t, ok)
		require.GreaterOrEqual(t, end.Offset, pos.Offset)
		ahead.Add(kadm.Offset{Topic: "in", Partition: p, At: end.Offset, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", ahead)
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	require.NoError(t, run(-1, 300))
	seen := map[string]int{}
	for _, v := range topicValues(t, tp) {
		seen[v]++
	}
	for i := range 300 {
		require.Equal(t, 1, seen[fmt.Sprintf("r%d", i)], "record r%d", i)
	}
	require.Len(t, seen, 300)
}

func total(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// TestLogSinkReadCommittedReaderNeverSeesAnAbortedTransaction ensures a
// source.ReadCommitted reader of a LogSink's topic, following it while it
// writes, returns the records of committed transactions once each and
// never those of an open or aborted one, whose offsets the abort's
// truncation hands to the next transaction's records: the contract a
// log -> Kafka relay behind an exactly-once Kafka -> log relay relies on.
func TestLogSinkReadCommittedReaderNeverSeesAnAbortedTransaction(t *testing.T) {
	ctx := context.Background()
	lg := testutil.OpenLog(t, log.ModeFile)
	tp, err := lg.CreateTopic("out", 3)
	require.NoError(t, err)
	out := sink.Log(tp)
	require.NoError(t, out.BeginTransactions(ctx))
	src := source.Topic(lg, "out", source.Earliest, source.ReadCommitted())
	defer src.Close()
	read := func(n int) []string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var vals []string
		for len(vals) < n {
			batch, err := src.Read(rctx)
			require.NoError(t, err)
			for _, e := range batch {
				vals = append(vals, string(e.Value.Value))
			}
		}
		require.Len(t, vals, n)
		return vals
	}
	requireNothing := func() {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		batch, err := src.Read(rctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Empty(t, batch, "an uncommitted record was read")
	}

	require.NoError(t, out.Write(ctx, keyed("a", 9)))
	requireNothing()
	ok, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 9)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	for _, v := range read(9) {
		require.True(t, strings.HasPrefix(v, "a-"), v)
	}

	require.NoError(t, out.Write(ctx, keyed("b", 50)))
	requireNothing()
	ok, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 59)}, false)
	require.NoError(t, err)
	require.False(t, ok, "aborted: b's records are truncated")

	require.NoError(t, out.Write(ctx, keyed("c", 20)))
	ok, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{topicPos("in", 0, 29)}, true)
	require.NoError(t, err)
	require.True(t, ok)
	for _, v := range read(20) {
		require.True(t, strings.HasPrefix(v, "c-"), "only c's records after a's: %s", v)
	}
	requireNothing()
}
