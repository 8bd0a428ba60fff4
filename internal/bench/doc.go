// Package bench holds the pipeline benchmarks of issue 6: strom's stream
// core against go-streams v0.13.0 and rill v0.7.0 on the same three-stage
// pipeline, the same pipeline over a log partition with a FileStore, a
// read-only follower's replay against the writer's, a tail follower's
// checkpoint rate and latency, KeyOrdered scaling and the completion
// tracker's memory; and issue 7's Kafka relay in both directions against
// kfake, beside a plain franz-go loop; and issue 17's time to the first
// checkpoint with a slow handler. Everything is in _test.go files, so
// go-streams and rill stay test dependencies of this internal package only
// and never reach the public packages.
//
// `make bench` runs them with the log's benchmarks and prints one table
// (internal/cmd/benchtable) in which each strom figure is divided by its
// baseline measured in the same run, each side in a process of its own or
// the two taking turns in one (see "Why each side runs alone" and the
// issue 24 sections below). One pair by hand:
//
//	go test -run '^$' -bench 'Turns/three/strom-vs-gostreams$' -benchtime 1x ./internal/bench/
//
// The baseline of the log replay is go-streams from memory: the faster of
// the two ways to feed go-streams, so the stricter ratio; the table's row
// says so.
//
// What one op is, per benchmark:
//
//   - BenchmarkThree/{strom,gostreams,rill}: one record (b.N records through
//     one pipeline), so ns/op and allocs/op are per record.
//   - BenchmarkThreeFromLog/*: one replay of the whole fixture partition
//     (1,048,576 records of 64 B); allocs/record is reported beside
//     allocs/op.
//   - BenchmarkTailFollow: one 3 s run whatever b.N (an op takes longer
//     than -benchtime=1s, so the framework stops at b.N = 1).
//   - BenchmarkKeyOrdered/n=*: 1,024 records through a 1 ms handler.
//   - BenchmarkTrackerMemory: one Begin+Done of one offset, beside a
//     tracker holding 1,000,000 offsets in flight.
//   - BenchmarkRelayLogToKafka/{100B,1KiB}/{strom,franz} (issue 7): one
//     relay of a whole 3-partition log topic (100,000 records of 100 B, or
//     20,000 of 1 KiB) to a fresh kfake topic; strom is source.Topic ->
//     sink.Kafka checkpointing to a FileStore, franz a plain franz-go
//     produce loop (acks=all, idempotent) over log.Reader replays.
//   - BenchmarkRelayKafkaToLog/{100B,1KiB}/{strom,franz} (issue 7): one
//     relay of a whole 3-partition kfake topic (same sizes) into a fresh
//     log topic as a fresh consumer group; strom is source.Kafka ->
//     sink.Log checkpointing to the group, franz a plain consumer group
//     loop (PollFetches, Topic.AppendBatch, CommitUncommittedOffsets).
//     Both relay benchmarks report records/s; strom/franz is the cost of
//     strom's guarantees (target >= 0.8x).
//   - BenchmarkWindow/{stateless,tumbling/*} and BenchmarkAggregate/count/*
//     (issue 9, window_test.go): one record (b.N records through one
//     pipeline): a tumbling 1-minute count and an Aggregate count over
//     1,000 keys beside the stateless three stages over the same records,
//     without a store and with a MemoryStore or FileStore (default policy
//     or CheckpointEachBatch); allocs/record is allocs/op unrounded, and
//     state-B/key the last snapshot's size over the 1,000 keys in it.
//   - BenchmarkJoin/{stateless,table/*} (issue 21, join_test.go): one op
//     is one stream record: a stream-table join of 64 B records with a
//     table of 100,000 rows read in the same pipeline (every record finds
//     its row), without a store and with a MemoryStore, beside the
//     stateless three stages over the same kind of source; state-B/key is
//     the table's snapshot over its 100,000 keys. BenchmarkJoin/window/*:
//     an inner JoinWindow within 10 s of two inputs of b.N/2 records each
//     (one record per ms of event time, 20,000 keys: one partner per
//     record), state-B/key the snapshot of the last 10 s held over its
//     10,000 keys.
//   - BenchmarkFirstCheckpoint (issue 17, firstcheckpoint_test.go): one
//     stream.ConsumeForever with default options from an empty FileStore
//     over a partition of 2,000 records of 100 B (about one 256 KiB source
//     batch), a 2 ms handler, until its first Save of a position above 0:
//     ms-to-first-checkpoint is the mean time from the first handler call
//     to that Save (target below 500 ms; a pipeline that saves whole
//     batches only takes about 4 s), first-position the position saved.
//     make torture's scenario slow times the same across processes.
//   - BenchmarkTurns/<group>/<figure>-vs-<baseline> (issue 24,
//     turns_test.go): the table's ratios between pipelines in memory, one
//     op the whole run (make bench runs each pair in a process of its own
//     with -benchtime 1x): a warm-up turn of each side, then 10 pairs of
//     turns, the order swapped every pair, the heap collected and the
//     machine synced before each turn; records/s and base-records/s are
//     the sides' median rates, x-turns the median over the pairs of the
//     figure's rate over the baseline's. A turn is a fixed count of
//     records, about 200 ms: three/strom-vs-gostreams and
//     three/strom-vs-rill (2,000,000 records through strom, 150,000
//     through go-streams, 200,000 through rill), replay/rw-vs-gostreams,
//     replay/rw-reuse-vs-gostreams and replay/ro-vs-rw (two replays of
//     the fixture partition a turn, as BenchmarkThreeFromLog),
//     stateful/tumbling-vs-stateless and stateful/aggregate-vs-stateless
//     (2,000,000 each), join/table-vs-lookup and join/table-memory-vs-lookup
//     (1,000,000 each; with the MemoryStore every turn saves the table's
//     one snapshot), join/window-vs-lookup and join/window-memory-vs-lookup
//     (600,000 against the lookup's 1,000,000: a MemoryStore saves a
//     snapshot every 200 ms, which a shorter turn would not see). The
//     relay's turns are BenchmarkRelayLogToKafka/*/turns and
//     BenchmarkRelayKafkaToLog/*/turns (opTurns: 12 pairs of turns of 2
//     ops at 100 B, 4 at 1 KiB), the Kafka window's
//     BenchmarkKafkaWindow/turns (opTurns: 3 members against 1, 10 pairs
//     of turns of 2 ops, an op a group formed then 120,000 records
//     counted, about 0.1 s timed), the compacted appends' the log
//     package's BenchmarkCompaction/append/turns.
//   - BenchmarkThreeLivePage/{off,open} (issue 23, livepage_test.go): one
//     record, as BenchmarkThree/strom; open mounts web.Pipeline on the
//     pipeline behind an httptest server with a client reading /events
//     during the run (events/s: the samples it read, about 1 a second).
//     Goal: open at least 0.99x off.
//
// # Why each side runs alone (issue 24)
//
// Until issue 24, make bench was one go test -bench . per package, and
// verdicts did not hold from one quiet run to the next (append 64 B,
// 1,024 a call, 1.08x then 0.32x of its baseline; the three stages from
// memory 13.9 then 5.5 M/s, and 12.4 M/s in a standalone program minutes
// later). What was measured on the 2-core machine on 2026-12-03 (commit
// 0f3033a, binaries built with go test -c, /proc/meminfo and /proc/stat
// sampled every 0.5 s beside the runs; other sessions raised the load
// average from 1.5 to 10 during them):
//
// Each side alone was the test binary run in its package folder after a
// sync, for example
//
//	go test -c -o /tmp/log.test ./log/ && cd log && sync &&
//	/tmp/log.test -test.run '^$' -test.bench '^BenchmarkBaselineDurablePwrite$/^value=64B$' -test.benchtime 1s
//
// then the same for '^BenchmarkSegmentAppend$/^mode=file$/^value=64B$/^batch=1024$',
// three rounds; the dirty-page runs put dd if=/dev/zero of=FILE bs=1M
// count=1024 before each process instead of the sync.
//
//   - Distance. In one binary a figure and its baseline ran up to a minute
//     apart: the twelve BenchmarkSegmentAppend cases ran 5 to 40 s into the
//     log's append block and BenchmarkBaselineDurablePwrite 51 s into it,
//     after BenchmarkRecovery's two 1 GiB fixtures and the synced appends.
//     The old make bench gave 0.40x for append 64 B, file, 1,024 a call
//     (3.30 against 8.15 M/s), 0.35x in mmap and 0.53x for the
//     OpenTelemetry row. The same binary running each side alone, after a
//     sync, taking turns for 3 rounds, at load 6.2 to 7.5: the baseline
//     11.49, 9.83, 7.45 M/s, the append 9.91, 8.80, 6.68 M/s: the absolute
//     figures fell 35% over the minute, the ratio stayed at 0.86x, 0.90x,
//     0.90x. A change of the machine between a figure and a baseline a
//     minute later falls on one side only; between neighbours, on both.
//   - Dirty pages of earlier work. With 1 GiB written (dd, not synced)
//     right before each process, the durable baseline, whose fdatasync of
//     each 64 MiB file waits behind that writeback, measured 5.37, 4.38,
//     2.74 M/s and the append 5.93, 6.65, 6.77: ratios 1.10x, 1.52x,
//     2.47x instead of 0.86x to 0.90x. This machine lets 10% of its 23 GiB
//     stay dirty before background writeback starts and writes a page back
//     30 s after it was dirtied, so a fixture is written back during a later
//     benchmark; in the old run the never-synced bare loop left up to
//     1,984 MB dirty, right before the durable baselines ran.
//   - BenchmarkRecovery's fixture: not shown either. A process of it (1
//     GiB written, opened, its folder deleted) left 0.4 to 81 MB dirty to
//     the next (the log syncs each segment at its roll), and at load 5 to
//     9.5 the append right after it measured 5.9 to 8.8 M/s, after it and a
//     sync 2.6 to 13.4, alone 1.7 to 6.3: below the noise of that hour.
//   - Heap and order in one binary: not shown. BenchmarkThree/strom after
//     BenchmarkPartitionMove (1,000,000 keys) in one process measured 6.54
//     M/s once and 12.51 M/s the next time (GODEBUG=gctrace=1: 23 MB live
//     during it, PartitionMove's 312 MB already collected), alone 8.43 to
//     12.70 M/s at load 6: single runs on a loaded machine are noise of
//     that size, which only neighbours and a median tame.
//   - CPU: steal was 0.5% of the CPU time over the 8-minute run (/proc/stat)
//     and this VM exposes no frequency scaling (no cpufreq; cpu MHz fixed
//     at 2596).
//
// The first make bench of the new layout (commit ef03b29, load average
// 5.6 to 6.5 from other sessions, 13 minutes) put append 64 B, file, 1,024
// a call at 0.78x (rounds 0.67x to 0.87x), where the quiet run had
// 0.32x; but some of the rows held in it, round after round, each
// side alone: strom produce at 3.93x (3.79x to 4.44x; 3.9x in the issue,
// 13.5x in the closing note) and append 1 KiB, file, 1,024 a call, at
// 0.43x (0.45x in the issue). Those two moved with the code or the
// machine, not with the order; what moved them is left to their owners.
//
// The appends 64 B family run twice in a row the same way (make bench
// BENCH_ONLY='appends 64B', load 5.8 to 7.8, then benchtable -compare):
// file, 1,024 a call 0.86x and 0.90x, file, 64 a call 0.44x and 0.49x, but
// one record a call and the ratios to the bare loop moved by 15 to 34%. At
// that load three rounds do not tame every row; issue 24's check (two runs
// within 15%) wants the quiet machine it names.
//
// So make bench (benchtable -run) runs every compared side in its own
// process, after a sync(2) and with Dirty and Writeback written in
// bench.out before each; inside the process settle (sync and GC) runs
// after a fixture is built and before the timed part; the sides of a
// family take turns for ROUNDS rounds, a round's ratio is taken between
// neighbours, and the verdict on the median, with the lowest and highest
// printed beside it.
//
// # What still moved between two quiet runs, and what changed (issue 24)
//
// The check is two make bench runs one after the other on a quiet
// machine, every ratio row within 15%. Pairs of runs on the 2-core machine
// (nothing else running, load average under 2) on 2026-12-03:
//
//   - Pair 1 (commit d1f0d09, 3 rounds a family back to back): 40 of 53.
//     The appends against the durable loop moved most (1 KiB, 1,024 a
//     call: 0.51x then 0.39x). With -benchtime 1s each side wrote what its
//     own speed made the testing package ask for: that append was asked
//     for 1.8 to 2.2 million records (1.9 to 2.3 GB, at this machine's
//     2.3 GB background writeback threshold) and its baseline for 1.5 to
//     1.7 million. Each side now writes the same records (benchtable's
//     appendRecords then: 800,000 of 1 KiB, 8,000,000 of 64 B, about 850 MB):
//     make bench BENCH_ONLY='appends 1KiB' ROUNDS=3 then gave 0.83x to
//     1.48x, median 1.11x. What is left is the disk's own noise: 64 MiB
//     written and fdatasynced 30 times in a row took 55 to 84 ms, in
//     stretches, so the appends run 9 rounds.
//   - The stream-table join measured 98 to 290 ns a record from one run to
//     the next and one minute to the next, the stateless stages 72 to 115.
//     The same three stages looking each key up by hand in a Go map of the
//     same 100,000 rows (BenchmarkJoin/lookup, about 6 MB: three times a
//     core's L2) measured 100 to 164 ns in the four interleaved rounds in
//     which the join measured 97 to 141: the map's cache misses, not
//     strom's join. With another process walking 256 MiB at random on the
//     other core the join took 171 and 213 ns, with a yes there 142 and
//     155: what slows it is the memory traffic of the machine's other
//     tenants, not their CPU. A cache-bound figure over a cache-resident
//     baseline measures the L3 cache left, so both joins are judged against
//     the lookup, the stateless stages' rate printed beside them.
//   - Pair 2 (those changes; other families still back to back): 46 of 53.
//     The windowed join's rounds took 1,733 to 2,478 ns a record in one run
//     and 1,120 to 1,627 in the next, while the stateless stages took 90 to
//     119 and 84 to 94: the memory-bound figures were 35% slower through
//     the one minute of the first run's join family. A family's rounds are
//     now spread over the whole run (round 1 of every family, then round
//     2, ...). The Kafka window with 3 members measured one op a process
//     at 1s (its group takes a second to form), 0.98x then 0.74x: it runs
//     6 ops a side. The three stages against go-streams moved 19.11x to
//     22.53x in 3 rounds: 5 rounds.
//   - Pair 3 (rounds spread): 48 of 53. The rows that moved were families
//     of 3 rounds (the synced mmap appends of one appender, 1.32x then
//     1.68x, with the hypervisor stealing 5.9% of the CPU through the
//     first run and 0.2% through the second; the tumbling window 0.83x then
//     0.98x; compacted appends 0.71x then 0.61x) and the windowed join,
//     against the lookup 0.19x then 0.14x (the lookup's rounds took 194 to
//     381 ns in the first run and 102 to 221 in the second, the join's
//     1,028 to 1,865 and 880 to 1,482: no baseline found moves with it).
//     Every family now runs at least 5 rounds.
//   - Pair 4 (commit b3a4233, 5 rounds or more, 16m35s and 16m37s): 48 of
//     53 again, five other rows each a little past 15% (compacted appends
//     0.88x then 0.64x, the log replay against go-streams 14.09x then
//     16.44x, the read-only follower's replay 0.98x then 0.81x, the table
//     join with a MemoryStore 1.16x then 1.37x, the relay Kafka -> log of
//     100 B 2.46x then 1.96x), rows whose rounds spread wider than 15%
//     inside one run; steal 0.8% then 3.2%.
//   - Where the scatter comes from (2026-12-03, the fourth pair's
//     bench.out): per row, the standard deviation of the log of a round's
//     ratio was 20% to 30% for the joins, the compacted appends, the
//     1 KiB appends of 1,024 a call and the mapped store loop, 8% to 15%
//     for the log replays and the relay; a median of n rounds then needs
//     n of 60 to 110 to hold within 15% from run to run most times. More
//     rounds cannot pay for that. The noise is fast: the lookup of the
//     joins measured 171 to 364 ns a record in 15 consecutive runs of
//     0.2 s in one process (go test -bench 'Join/lookup$' -count 15
//     -benchtime 0.2s), the stateless stages 82 to 103; and it is not
//     steal alone (the kernel's DAMON pages out idle memory every 5 s on
//     this VM, the neighbours' memory traffic varies). Sides a few seconds
//     apart do not share it; turns of 200 ms next to each other mostly
//     do. So the pipelines in memory, the compacted appends and the relay
//     now take turns inside one process (BenchmarkTurns, opTurns,
//     log's BenchmarkCompaction/append/turns): in six processes of 10
//     pairs each, the table join's median over the lookup was 1.15x to
//     1.41x (a round of one process a side had been 0.85x to 2.21x). Two
//     runs of make bench BENCH_ONLY=turns one after the other then held
//     all 11 of its rows within 15% (B / A 0.92 to 1.12; spreads within a
//     run: the table join 1.19x to 1.30x, the windowed join 0.17x to 0.20x,
//     go-streams 19.41x to 21.04x). The appends and their three baselines
//     take turns the same way (log's BenchmarkAppendTurns: 8 cycles of a
//     turn of every side, about 200 ms of the durable loop each, the same
//     records on every side: 2,000,000 of 64 B, 500,000 for the one-a-call
//     appends and the mapped store loop, 250,000 of 1 KiB). A turn writes
//     less than the rounds did (256 MB of 1 KiB records against 820 MB), so
//     some ratios are not the old ones: the 1 KiB mapped append of one
//     record a call measured 0.63x to 0.90x of the durable loop in turns,
//     0.51x to 0.53x writing 800,000. The synced appends run 9 rounds.
//   - Pairs 5 and 6 (turns in place; then the appends and the strom
//     command 9 rounds): 52 of 53 each, a different row each time. Pair 6's
//     was the Kafka window on 3 members against 1, 6 ops a side in a
//     process a side (rounds 0.81x to 1.05x in one run, 0.97x to 1.14x in
//     the next): its sides now take turns in one process (10 pairs of 2
//     ops; make bench BENCH_ONLY='Kafka window' gave rounds of 0.90x to
//     1.00x). The sealed recoveries' rounds scattered 10% to 22% (sd of
//     the log of a round's ratio, over pairs 5 and 6's bench.out): the
//     recovery family runs 9 rounds.
package bench
