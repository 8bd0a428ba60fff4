// Command benchtable reads `go test -bench` output on stdin and prints the
// log engine's figures (issue 3), the pipeline's (issue 6, and the cost of
// OpenTelemetry metrics, issue 8, and the time to the first checkpoint,
// issue 17), the Kafka relay's (issue 7) and the stateful stages' (issue
// 9) as one table, each beside the baseline
// measured in the same run, with the ratio and the target. Where a
// benchmark reports its own x-baseline (synced appends, recovery: the
// baseline measured beside each case, because this disk's sync latency and
// the page cache swing within minutes), that ratio is shown. The
// pipeline's baselines are go-streams v0.13.0 and rill v0.7.0 running the
// same three stages (internal/bench), the read-write log's replay for the
// read-only follower's, and KeyOrdered with one worker for more workers;
// the Kafka relay's is a plain franz-go produce or consumer group loop
// doing the same work against the same kfake cluster; the window's and
// Aggregate's is the stateless three stages over the same records. The
// cost of saving state with each checkpoint is the difference, per record,
// between a case with a store and the same pipeline without one that the
// benchmark ran beside it, shown beside the latter. A figure without a baseline is judged on its value alone
// (allocations, checkpoint saves per second, memory). `make bench` runs it
// with -run (below) over the benchmarks of ./log/, ./internal/bench/ and
// ./cmd/strom/; the raw output is kept in bench.out.
//
// With -run (make bench) it is also the driver: it builds the test
// binaries of ./log/, ./internal/bench/ and ./cmd/strom/ and runs each
// family of compared benchmarks (families, plan.go) side by side in
// processes of their own, after a sync(2), the sides taking turns for
// -rounds rounds (A B, A B, ...), and writes their output to bench.out with
// the machine it ran on (CPU model, cores, kernel, Go, commit, load
// average at the start and end, CPU steal). Each row is judged on the
// median of its per-round ratios, whose lowest and highest are printed
// beside it: issue 24 found that in one go test run of every benchmark a
// ratio depended on what ran before it and on the minute it ran in
// (internal/bench's package doc has the measurements). Without -run it
// reads go test -bench output (a saved bench.out) on stdin, where a
// benchmark seen several times counts as several rounds.
//
// A figure whose benchmark did not run (filtered out, or skipped by size)
// prints "-" and is not judged. The exit status is 0 even when a target is
// missed: targets on a shared machine are information, not a gate.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// benchCount is a -test.benchtime given as a count of iterations ("100x").
var benchCount = regexp.MustCompile(`^[1-9][0-9]*x$`)

// validBenchtime reports whether s is a -test.benchtime the test binaries
// take: a positive duration or a count.
func validBenchtime(s string) bool {
	if benchCount.MatchString(s) {
		return true
	}
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// metrics maps a benchmark name (GOMAXPROCS suffix removed) to its
// reported values by unit, one per time the benchmark ran, in the order of
// the output: one per round when the driver ran it (-run), and the i-th of
// a figure was measured in the same round as the i-th of its baseline.
type metrics map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// roundLine is the driver's comment before each process, "# family, round
// r/R: side (...)".
var roundLine = regexp.MustCompile(`^# .*, round (\d+)/(\d+): `)

// addRound puts v at round's place in xs (1-based), filling rounds not
// measured (a process that failed) with NaN, or appends it when round is 0
// (plain go test output) or its place is taken.
func addRound(xs []float64, round int, v float64) []float64 {
	if round <= 0 || round <= len(xs) && !math.IsNaN(xs[round-1]) {
		return append(xs, v)
	}
	for len(xs) < round {
		xs = append(xs, math.NaN())
	}
	xs[round-1] = v
	return xs
}

// parse reads go test -bench output (bench.out), echoing each line to
// echo when it is not nil. A benchmark line appends its values to the
// benchmark's; a line of the driver's machine header ("# machine: ...")
// is kept in the returned header, so a table rendered again from a saved
// bench.out names the machine it was measured on.
func parse(r io.Reader, echo io.Writer) (metrics, []string, error) {
	m := metrics{}
	var header []string
	round, total := 0, 0       // the round the driver's last comment line named, of how many; 0: none
	totals := map[string]int{} // per benchmark, the rounds its family ran
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if echo != nil {
			fmt.Fprintln(echo, line)
		}
		if h, ok := strings.CutPrefix(line, machinePrefix); ok {
			header = append(header, h)
			continue
		}
		if sm := roundLine.FindStringSubmatch(line); sm != nil {
			round, _ = strconv.Atoi(sm[1])
			total, _ = strconv.Atoi(sm[2])
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if m[name] == nil {
			m[name] = map[string][]float64{}
		}
		if round > 0 {
			totals[name] = max(totals[name], total)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			m[name][f[i+1]] = addRound(m[name][f[i+1]], round, v)
		}
	}
	// A round whose process failed at the end leaves no value behind the
	// last one measured: fill it in as not measured, so that ratios pairs
	// the rounds measured with their own neighbours and no baseline's last
	// round is lent to a figure's round it was not measured next to.
	for name, n := range totals {
		for unit, xs := range m[name] {
			for len(xs) < n {
				xs = append(xs, math.NaN())
			}
			m[name][unit] = xs
		}
	}
	return m, header, sc.Err()
}

// row is one figure of the table.
type row struct {
	figure    string
	bench     string // benchmark name
	unit      string // metric shown
	baseline  string // baseline benchmark name, "" for none
	baseUnit  string
	target    string  // printed target
	minRatio  float64 // ratio must be >= this (0: no lower bound)
	maxRatio  float64 // ratio must be <= this (0: no upper bound)
	ratioUnit string  // when set, the benchmark's own ratio metric (a baseline it measured beside each case)
	// beside, when set, is another metric of the same benchmark shown in
	// the baseline column, with no ratio: what a cost the benchmark
	// measured side by side (save-ns/record) is the cost over.
	beside    string
	formatter func(float64) string
	// meets judges a figure without a baseline by its value alone; nil
	// leaves it unjudged.
	meets func(v float64) bool
}

func millions(v float64) string { return fmt.Sprintf("%.2f M/s", v/1e6) }
func perSec(v float64) string   { return fmt.Sprintf("%.0f /s", v) }
func seconds(v float64) string  { return fmt.Sprintf("%.3f s/GiB", v) }
func micros(v float64) string   { return fmt.Sprintf("%.0f µs", v) }
func mib(v float64) string      { return fmt.Sprintf("%.1f MiB", v) }
func rate(v float64) string     { return fmt.Sprintf("%.0f records/s", v) }
func allocs(v float64) string   { return fmt.Sprintf("%.4f allocs/record", v) }
func allocsOp(v float64) string { return fmt.Sprintf("%.0f allocs/op", v) }
func ms(v float64) string       { return fmt.Sprintf("%.2f ms", v) }
func kib(v float64) string      { return fmt.Sprintf("%.0f KiB", v) }
func nanos(v float64) string    { return fmt.Sprintf("%.1f ns", v) }
func bytesEach(v float64) string {
	return fmt.Sprintf("%.2f B/record", v)
}
func perRecordNanos(v float64) string { return fmt.Sprintf("%.1f ns/record", v) }
func bytesPerKey(v float64) string    { return fmt.Sprintf("%.1f B/key", v) }

func rows() []row {
	var rs []row
	for _, size := range []string{"64B", "1KiB"} {
		// The appends, which end with one Sync, are judged against the bare
		// loop with the same durability (BenchmarkBaselineDurablePwrite:
		// each full 64 MiB file fdatasynced by a second goroutine, the run
		// ending when all are); the bare loop leaves its whole run in the
		// page cache, so the 1,024-record rows give the ratio against it
		// too, without a target (README, "Write modes").
		//
		// All of them are measured by log's BenchmarkAppendTurns, the sides
		// taking turns in one process: a row's ratio is the median over its
		// cycles of turns (<side>-x-durable, -x-mapped, -x-framed).
		bench := "BenchmarkAppendTurns/value=" + size
		for _, mode := range []string{"file", "mmap"} {
			for _, batch := range []string{"1", "64", "1024"} {
				side := mode + "-" + batch
				r := row{
					figure:    fmt.Sprintf("append %s, %s, %s/call, synced at the end", size, mode, batch),
					bench:     bench,
					unit:      side + "-records/s",
					baseline:  bench,
					baseUnit:  "durable-records/s",
					ratioUnit: side + "-x-durable",
					formatter: millions,
				}
				switch {
				case batch == "1024":
					// The baseline writes 64 KiB per pwrite; 1024 records per
					// call (72 to 1,100 KiB) is the comparable shape.
					r.target, r.minRatio = ">= 0.8x", 0.8
				case batch == "1" && mode == "mmap":
					// A mapped append of one record is a copy and a store.
					r.target, r.minRatio = ">= 0.5x", 0.5
				}
				rs = append(rs, r)
				if batch == "1" && mode == "mmap" {
					mapped := r
					mapped.figure = "  same, against a bare mapped store loop (its page faults)"
					mapped.baseUnit, mapped.ratioUnit = "mapped-records/s", side+"-x-mapped"
					mapped.target, mapped.minRatio = "", 0
					rs = append(rs, mapped)
				}
				if batch == "1024" {
					bare := r
					bare.figure = "  same, against the bare loop (page cache only)"
					bare.baseUnit, bare.ratioUnit = "framed-records/s", side+"-x-framed"
					bare.target, bare.minRatio = "", 0
					rs = append(rs, bare)
				}
			}
		}
	}
	for _, mode := range []string{"file", "mmap"} {
		for _, n := range []string{"1", "8", "64"} {
			r := row{
				figure:    fmt.Sprintf("synced appends (AckSynced, 64 B), %s, %s appenders", mode, n),
				bench:     fmt.Sprintf("BenchmarkSyncedAppend/mode=%s/appenders=%s", mode, n),
				unit:      "records/s",
				baseline:  "BenchmarkBaselineSyncPerRecord",
				baseUnit:  "records/s",
				ratioUnit: "x-baseline",
				formatter: perSec,
			}
			if n == "64" {
				r.target, r.minRatio = ">= 50x", 50
			}
			rs = append(rs, r)
		}
	}
	for _, size := range []string{"64B", "1KiB"} {
		for _, how := range []string{"walk", "sealed"} {
			rs = append(rs, row{
				figure:    fmt.Sprintf("recovery of 1 GiB of %s records (%s)", size, how),
				bench:     fmt.Sprintf("BenchmarkRecovery/value=%s/%s", size, how),
				unit:      "s/GiB",
				baseline:  fmt.Sprintf("BenchmarkRecovery/value=%s/baseline", size),
				baseUnit:  "s/GiB",
				ratioUnit: "x-baseline",
				target:    "<= 1.2x",
				maxRatio:  1.2,
				formatter: seconds,
			})
		}
	}
	for _, mode := range []string{"file", "mmap"} {
		for _, q := range []string{"p50-us", "p99-us"} {
			rs = append(rs, row{
				figure:    fmt.Sprintf("follow latency across processes, %s, %s", mode, strings.TrimSuffix(q, "-us")),
				bench:     "BenchmarkFollowLatency/mode=" + mode,
				unit:      q,
				formatter: micros,
			})
		}
	}
	rs = append(rs, row{
		figure:    "in-memory index, 10 GiB of 64 B records",
		bench:     "BenchmarkIndexMemory",
		unit:      "index-MiB",
		target:    "< 64 MiB",
		formatter: mib,
		meets:     func(v float64) bool { return v < 64 },
	})
	for _, mode := range []string{"file", "mmap"} {
		rs = append(rs, row{
			figure: fmt.Sprintf("disk held by a partition of one 100 B record, %s (du, worst of 16)", mode),
			bench:  "BenchmarkIdlePartitionDisk/mode=" + mode,
			unit:   "disk-KiB",
			// The segment's first step (1 MiB in ModeMmap) plus the
			// partition's small files (epochs, waiters), a block each.
			target:    "<= 1 MiB + 16 KiB",
			formatter: kib,
			meets:     func(v float64) bool { return v <= 1024+16 },
		})
	}
	rs = append(rs, damagedLengthRows()...)
	rs = append(rs, compactionRows()...)
	rs = append(rs, pipelineRows()...)
	rs = append(rs, statefulRows()...)
	rs = append(rs, joinRows()...)
	rs = append(rs, scaleOutRows()...)
	rs = append(rs, exactlyOnceRows()...)
	rs = append(rs, relayRows()...)
	return append(rs, cliRows()...)
}

// compactionRows are issue 21's figures for the log cleaner
// (BenchmarkCompaction): how fast a pass cleans, and what passes running
// back to back cost the appends beside them (on two cores a pass takes one
// of them; the background cleaner runs one every 15 s at most).
func compactionRows() []row {
	return []row{{
		figure:    "compaction pass, 200k records of 64 B over 10k keys, MB of sealed segments cleaned",
		bench:     "BenchmarkCompaction/clean",
		unit:      "MB/s",
		formatter: func(v float64) string { return fmt.Sprintf("%.0f MB/s", v) },
	}, withTurns("BenchmarkCompaction/append/turns", row{
		figure:    "appends to a compacted topic, passes back to back vs no cleaner",
		target:    ">= 0.5x",
		minRatio:  0.5,
		formatter: millions,
	})}
}

// relayRows are issue 7's figures, from internal/bench: the Kafka relay in
// both directions against kfake, strom beside a plain franz-go loop doing
// the same work, in turns in one process (the ratio is the cost of strom's
// guarantees).
func relayRows() []row {
	var rs []row
	for _, dir := range []struct{ name, figure string }{
		{"BenchmarkRelayLogToKafka", "relay log -> Kafka (kfake)"},
		{"BenchmarkRelayKafkaToLog", "relay Kafka -> log (kfake)"},
	} {
		for _, size := range []struct{ name, figure string }{{"100B", "100 B"}, {"1KiB", "1 KiB"}} {
			rs = append(rs, withTurns(dir.name+"/"+size.name+"/turns", row{
				figure:    fmt.Sprintf("%s, %s, strom vs plain franz-go loop", dir.figure, size.figure),
				target:    ">= 0.8x",
				minRatio:  0.8,
				formatter: rate,
			}))
		}
	}
	return rs
}

// turnsRow is a ratio row of internal/bench's BenchmarkTurns/pair: the
// figure's and its baseline's median rates over their turns in one
// process, and the median over the pairs of turns of the figure's rate
// over the baseline's (x-turns), a round's ratio; target and minRatio as
// in row ("" and 0: not judged).
func turnsRow(figure, pair, target string, minRatio float64) row {
	return withTurns("BenchmarkTurns/"+pair, row{figure: figure, target: target, minRatio: minRatio, formatter: millions})
}

// withTurns makes r a ratio row of bench, a benchmark that measured the
// figure and its baseline in turns in one process and reported records/s,
// base-records/s and x-turns (BenchmarkTurns, BenchmarkCompaction/append/turns).
func withTurns(bench string, r row) row {
	r.bench, r.unit, r.baseline, r.baseUnit, r.ratioUnit = bench, "records/s", bench, "base-records/s", "x-turns"
	return r
}

// pipelineRows are issue 6's figures, from internal/bench.
func pipelineRows() []row {
	const (
		three   = "BenchmarkThree/strom"
		fromLog = "BenchmarkThreeFromLog/rw"
		keyed   = "BenchmarkKeyOrdered/n="
	)
	perRecord := func(v float64) bool { return v < 0.01 } // per batch at most, never per record
	rs := []row{
		turnsRow("3 stages from memory (64 B), strom vs go-streams", "three/strom-vs-gostreams", ">= 20x", 20),
		turnsRow("3 stages from memory (64 B), strom vs rill", "three/strom-vs-rill", ">= 8x", 8),
		{figure: "3 stages from memory, strom allocations", bench: three, unit: "allocs/op",
			target: "< 0.01/record", formatter: allocs, meets: perRecord},
		{figure: "3 stages from memory, OpenTelemetry SDK metrics on vs none installed", bench: "BenchmarkThreeTelemetry/metrics", unit: "records/s",
			baseline: three, baseUnit: "records/s", target: ">= 0.9x", minRatio: 0.9, formatter: millions},
		{figure: "  same, allocations", bench: "BenchmarkThreeTelemetry/metrics", unit: "allocs/op",
			target: "< 0.01/record", formatter: allocs, meets: perRecord},
		// Issue 23: a live page open (web.Pipeline, its /events read by a
		// client) costs the pipeline it shows at most 1%.
		{figure: "3 stages from memory, live page open vs off", bench: "BenchmarkThreeLivePage/open", unit: "records/s",
			baseline: "BenchmarkThreeLivePage/off", baseUnit: "records/s", target: ">= 0.99x", minRatio: 0.99, formatter: millions},
		{figure: "  same, events the page's client read", bench: "BenchmarkThreeLivePage/open", unit: "events/s",
			formatter: func(v float64) string { return fmt.Sprintf("%.2f /s", v) }},
		turnsRow("3 stages from a log replay + FileStore vs go-streams in memory", "replay/rw-vs-gostreams", ">= 10x", 10),
		turnsRow("  same, with source.ReuseBytes (record bytes valid until the next Read)", "replay/rw-reuse-vs-gostreams", ">= 10x", 10),
		{figure: "3 stages from a log replay + FileStore, allocations", bench: fromLog, unit: "allocs/record",
			target: "< 0.01/record", formatter: allocs, meets: perRecord},
		turnsRow("read-only follower replay vs the writer's (read-write) replay", "replay/ro-vs-rw", ">= 0.83x (within 1.2x)", 1/1.2),
		{figure: "tail follower, FileStore, default policy: checkpoint saves", bench: "BenchmarkTailFollow", unit: "saves/s",
			target: "<= 10 /s", formatter: func(v float64) string { return fmt.Sprintf("%.1f /s", v) },
			meets: func(v float64) bool { return v <= 10 }},
		{figure: "tail follower at 1,000 appends/s: append to handler, p50", bench: "BenchmarkTailFollow", unit: "p50-ms", formatter: ms},
		{figure: "tail follower at 1,000 appends/s: append to handler, p99", bench: "BenchmarkTailFollow", unit: "p99-ms", formatter: ms},
		{figure: "KeyOrdered, 1 ms handler, 64 keys, n=1", bench: keyed + "1", unit: "records/s", formatter: rate},
	}
	for _, n := range []int{4, 16} {
		want := 0.75 * float64(n)
		rs = append(rs, row{figure: fmt.Sprintf("KeyOrdered, 1 ms handler, 64 keys, n=%d vs n=1", n),
			bench: fmt.Sprintf("%s%d", keyed, n), unit: "records/s", baseline: keyed + "1", baseUnit: "records/s",
			target: fmt.Sprintf(">= %.0fx", want), minRatio: want, formatter: rate})
	}
	return append(rs,
		row{figure: "tracker, 1,000,000 in flight: memory per record", bench: "BenchmarkTrackerMemory", unit: "bytes/record", formatter: bytesEach},
		row{figure: "tracker, 1,000,000 in flight: ring", bench: "BenchmarkTrackerMemory", unit: "MiB", formatter: mib},
		row{figure: "tracker Begin+Done of one offset", bench: "BenchmarkTrackerMemory", unit: "ns/op", formatter: nanos},
		row{figure: "tracker Begin+Done, allocations", bench: "BenchmarkTrackerMemory", unit: "allocs/op",
			target: "0", formatter: allocsOp, meets: func(v float64) bool { return v == 0 }},
		// Issue 17: positions advance within a source batch as records
		// finish, not once the whole 256 KiB batch (about 1,800 of these
		// records, 4 s at 2 ms) is.
		row{figure: "ConsumeForever, 2 ms handler, 2,000 records of 100 B: first checkpoint after", bench: "BenchmarkFirstCheckpoint",
			unit: "ms-to-first-checkpoint", target: "< 500 ms", formatter: ms, meets: func(v float64) bool { return v < 500 }},
		row{figure: "  same, position saved by that checkpoint", bench: "BenchmarkFirstCheckpoint", unit: "first-position",
			formatter: func(v float64) string { return fmt.Sprintf("%.0f records", v) }},
	)
}

// statefulRows are issue 9's figures, from internal/bench: a tumbling-window
// count and an Aggregate count over 1,000 keys beside the stateless three
// stages over the same records in the same run (BenchmarkWindow/stateless),
// the state a key costs in a snapshot, and the cost of saving the state
// with each checkpoint: with a store minus without, per record, as the
// benchmark measured them side by side.
// damagedLengthRows are log.BenchmarkOpenDamagedLength's worst length,
// 2^31-1, per write path: Open of a crashed partition whose second frame's
// length prefix is damaged, the torn tail cut (2 records) or ErrCorrupt
// (20,000 records, intact frames behind); what Open allocated must stay
// below 16 MiB (issue 10), whatever the length claims.
func damagedLengthRows() []row {
	var rs []row
	for _, mode := range []string{"file", "mmap"} {
		for _, layout := range []string{"torn", "corrupt"} {
			b := fmt.Sprintf("BenchmarkOpenDamagedLength/%s/%s/len=0x7fffffff", mode, layout)
			rs = append(rs,
				row{figure: fmt.Sprintf("open, length 2^31-1 damaged, %s, %s: time", mode, layout), bench: b,
					unit: "ns/op", formatter: func(v float64) string { return ms(v / 1e6) }},
				row{figure: "  same, allocated", bench: b, unit: "B/op", target: "< 16 MiB",
					formatter: func(v float64) string { return mib(v / (1 << 20)) },
					meets:     func(v float64) bool { return v < 16<<20 }})
		}
	}
	return rs
}

// scaleOutRows are issue 18's figures, from internal/bench, on an
// in-process kfake: a partition's state moving to another member (restore
// to the first record applied, the goal 1 s + 0.3 s per GiB: goal-x
// below 1 meets it), the changelog store's restore alone, the checkpoint
// cost of a Window whose state is saved per partition as changes, and the
// windowed count through Kafka on 3 members against 1 (on 2 cores: the
// cost of distribution, not scaling).
func scaleOutRows() []row {
	secs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	goal := func(v float64) string { return fmt.Sprintf("%.2fx the goal", v) }
	below1 := func(v float64) bool { return v < 1 }
	return []row{
		{figure: "partition of 1,000,000 keys moves: assignment to first record applied", bench: "BenchmarkPartitionMove/nocache", unit: "move-s", formatter: secs},
		{figure: "  same, against the goal (1 s + 0.3 s/GiB)", bench: "BenchmarkPartitionMove/nocache", unit: "goal-x", target: "< 1", formatter: goal, meets: below1},
		{figure: "  same, with the local snapshot cache", bench: "BenchmarkPartitionMove/cache", unit: "move-s", formatter: secs},
		{figure: "  same, against the goal", bench: "BenchmarkPartitionMove/cache", unit: "goal-x", target: "< 1", formatter: goal, meets: below1},
		{figure: "changelog restore alone, 1,000,000 keys", bench: "BenchmarkChangelogRestore/nocache", unit: "restore-s", formatter: secs},
		{figure: "  same, from the cache", bench: "BenchmarkChangelogRestore/cache", unit: "restore-s", formatter: secs},
		{figure: "window state saved per partition as changes, default policy (vs no store)", bench: "BenchmarkWindowChangelog/default", unit: "save-ns/record", formatter: perRecordNanos},
		{figure: "  bytes per changed key", bench: "BenchmarkWindowChangelog/default", unit: "B/changed-key", formatter: bytesPerKey},
		{figure: "changelog save, 10,000 changed keys: per key", bench: "BenchmarkChangelogSave/nocache", unit: "ns/key", formatter: nanos},
		// Both from the turns of 1 and 3 members in one process.
		{figure: "windowed count through Kafka, 1 member", bench: "BenchmarkKafkaWindow/turns", unit: "base-records/s", formatter: rate},
		withTurns("BenchmarkKafkaWindow/turns", row{figure: "  same, 3 members (2 cores: distribution's cost)", formatter: rate}),
	}
}

// exactlyOnceRows are issue 19's figures, from internal/bench, on an
// in-process kfake: the same Kafka -> window -> Kafka pipeline exactly-once
// against at-least-once (goal 0.7x or better), and the visibility latency
// of a read_committed reader at the default transaction interval (goal p99
// at most 150 ms).
func exactlyOnceRows() []row {
	msf := func(v float64) string { return fmt.Sprintf("%.1f ms", v) }
	return []row{
		{figure: "Kafka -> window -> Kafka, exactly-once (vs at-least-once)", bench: "BenchmarkKafkaExactlyOnce/mode=exactly-once", unit: "records/s",
			baseline: "BenchmarkKafkaExactlyOnce/mode=at-least-once", baseUnit: "records/s", target: ">= 0.7x", minRatio: 0.7, formatter: rate},
		{figure: "exactly-once visibility latency, read_committed, p50", bench: "BenchmarkKafkaVisibility", unit: "p50-ms", formatter: msf},
		{figure: "  same, p99", bench: "BenchmarkKafkaVisibility", unit: "p99-ms", target: "<= 150 ms", formatter: msf,
			meets: func(v float64) bool { return v <= 150 }},
	}
}

// joinRows are issue 21's join figures, from internal/bench: a stream-table
// join over a table of 100,000 keys and a windowed join of two inputs
// within 10 s, each judged against the same three stages looking each key
// up by hand in a Go map of the table's rows (the lookup of BenchmarkTurns'
// join pairs, in turns with each join in one process), and the bytes of
// state per key. Both joins' rates follow the L3 cache the machine's other tenants
// leave (their lookups miss a core's L2), as the lookup's does and the
// stateless stages' does not: against the stateless stages the table join
// measured a median of 0.44x in one quiet make bench and 0.68x in the
// next, and the windowed join 0.05x and 0.06x; against the lookup the
// windowed join's medians were 0.19x and 0.19x, 0.19x and 0.14x, 0.17x and
// 0.18x in three pairs of runs (issue 24: closer, not always within 15%);
// in turns, 0.18x and 0.17x.
func joinRows() []row {
	return []row{
		turnsRow("stream-table join, 100,000 keys in the table (64 B), vs the 3 stages looking keys up in a Go map", "join/table-vs-lookup", "", 0),
		{figure: "  same, allocations", bench: "BenchmarkJoin/table/none", unit: "allocs/record", formatter: allocs},
		turnsRow("  same, table checkpointed to a MemoryStore", "join/table-memory-vs-lookup", "", 0),
		{figure: "  table state per key (snapshot / 100,000 keys)", bench: "BenchmarkJoin/table/memory", unit: "state-B/key", formatter: bytesPerKey},
		turnsRow("windowed stream-stream join, 10 s bound, 1 pair per record (64 B), vs the same lookup", "join/window-vs-lookup", "", 0),
		turnsRow("  same, state checkpointed to a MemoryStore", "join/window-memory-vs-lookup", "", 0),
		{figure: "  join state per key held (snapshot of the last 10 s / 10,000 keys)", bench: "BenchmarkJoin/window/memory", unit: "state-B/key", formatter: bytesPerKey},
	}
}

func statefulRows() []row {
	const (
		window  = "BenchmarkWindow/tumbling/"
		agg     = "BenchmarkAggregate/count/"
		cost    = "save-ns/record"    // with a store minus without, measured side by side
		without = "without-ns/record" // the same pipeline without a store
	)
	return []row{
		turnsRow("tumbling 1-min window count, 1,000 keys (64 B), vs the stateless 3 stages", "stateful/tumbling-vs-stateless", "", 0),
		{figure: "  same, allocations", bench: window + "none", unit: "allocs/record", formatter: allocs},
		{figure: "  window state per key open (last snapshot / 1,000 keys)", bench: window + "memory", unit: "state-B/key", formatter: bytesPerKey},
		{figure: "  cost of saving state, MemoryStore, default policy (vs no store)", bench: window + "memory", unit: cost,
			beside: without, formatter: perRecordNanos},
		{figure: "  same, state snapshots saved", bench: window + "memory", unit: "saves/s", formatter: perSec},
		{figure: "  cost of saving state, FileStore, default policy (vs no store)", bench: window + "file", unit: cost,
			beside: without, formatter: perRecordNanos},
		{figure: "  same, state snapshots saved", bench: window + "file", unit: "saves/s", formatter: perSec},
		{figure: "  cost of saving state, MemoryStore, CheckpointEachBatch (worst case)", bench: window + "memory-each-batch", unit: cost,
			beside: without, formatter: perRecordNanos},
		{figure: "  cost of saving state, FileStore, CheckpointEachBatch (worst case)", bench: window + "file-each-batch", unit: cost,
			beside: without, formatter: perRecordNanos},
		turnsRow("Aggregate count, 1,000 keys (64 B), vs the stateless 3 stages", "stateful/aggregate-vs-stateless", "", 0),
		{figure: "  aggregate state per key (last snapshot / 1,000 keys)", bench: agg + "memory", unit: "state-B/key", formatter: bytesPerKey},
		{figure: "  cost of saving state, MemoryStore, default policy (vs no store)", bench: agg + "memory", unit: cost,
			beside: without, formatter: perRecordNanos},
	}
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runMain is the command: with -run it drives the benchmarks itself (make
// bench), with -compare it sets two saved runs side by side, otherwise it
// reads go test -bench output (a bench.out) on stdin.
// It returns the exit status: 0 even where a target is missed, 1 when a
// benchmark process failed or the output could not be read, 2 for bad
// flags.
func runMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fl.SetOutput(stderr)
	drive := fl.Bool("run", false, "build the test binaries and run every family's sides in processes of their own, interleaved, -rounds times")
	rounds := fl.Int("rounds", 5, "with -run: rounds of each family (A B A B ...); the verdict is on the median ratio")
	benchtime := fl.String("benchtime", "1s", "with -run: -test.benchtime of each process (a family may set its own)")
	out := fl.String("out", "bench.out", "with -run: where the raw output goes")
	only := fl.String("only", "", "with -run: only the families whose name contains this")
	echo := fl.Bool("echo", false, "without -run: echo the input to stderr")
	cmp := fl.Bool("compare", false, "compare two raw outputs given as arguments (A.out B.out): each row's median ratio side by side, and whether they are within 15%")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if !*cmp && fl.NArg() > 0 {
		fmt.Fprintf(stderr, "benchtable: unexpected argument %q: the raw output is read on stdin (benchtable < bench.out), or two files with -compare\n", fl.Arg(0))
		return 2
	}
	if *drive {
		if *rounds < 1 {
			fmt.Fprintf(stderr, "benchtable: -rounds %d (ROUNDS): want 1 or more\n", *rounds)
			return 2
		}
		if !validBenchtime(*benchtime) {
			fmt.Fprintf(stderr, "benchtable: -benchtime %q (BENCHTIME): want a duration (1s, 500ms) or a count (100x)\n", *benchtime)
			return 2
		}
		if *only != "" && len(selectFamilies(families(), *only)) == 0 {
			fmt.Fprintf(stderr, "benchtable: -only %q (BENCH_ONLY) names no family (case matters); the families: %s\n", *only, strings.Join(familyNames(), ", "))
			return 2
		}
	}
	if *cmp {
		if fl.NArg() != 2 {
			fmt.Fprintln(stderr, "benchtable: -compare wants two files: benchtable -compare A.out B.out")
			return 2
		}
		if err := compareFiles(stdout, fl.Arg(0), fl.Arg(1)); err != nil {
			fmt.Fprintln(stderr, "benchtable:", err)
			return 1
		}
		return 0
	}
	var (
		m      metrics
		header []string
		failed []string
		err    error
	)
	if *drive {
		goCmd := os.Getenv("GO")
		if goCmd == "" {
			goCmd = "go"
		}
		m, header, failed, err = driveRun(runConfig{goCmd: goCmd, rounds: *rounds, benchtime: *benchtime, out: *out, only: *only}, stderr)
	} else {
		var e io.Writer
		if *echo {
			e = stderr
		}
		m, header, err = parse(stdin, e)
		if err == nil && len(m) == 0 {
			err = errors.New("no benchmark results on stdin (want go test -bench output, a bench.out)")
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchtable:", err)
		return 1
	}
	for _, h := range header {
		fmt.Fprintln(stdout, h)
	}
	if len(header) > 0 {
		fmt.Fprintln(stdout)
	}
	render(stdout, m)
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, tableNotes)
	if len(failed) > 0 {
		fmt.Fprintln(stderr, "benchtable: these benchmark processes failed (their output is in the raw file):")
		for _, f := range failed {
			fmt.Fprintln(stderr, "  "+f)
		}
		return 1
	}
	return 0
}

// tableNotes is printed under the table.
const tableNotes = `measured, baseline: the median of the rounds; ratio: the median of the per-round ratios; spread: the
lowest and the highest of those ratios (or values, for a figure without a baseline), and how many
rounds. A round is one process a side after a sync, the sides next to each other, or, for the appends,
the pipelines in memory, the compacted appends, the relay and the Kafka window, one process in which
the sides took turns of about 200 ms (8 cycles of a turn of every append side, each the same records:
2,000,000 of 64 B, 500,000 one a call, 250,000 of 1 KiB; 10 or 12 pairs of turns for the others, the
Kafka window's of 2 ops a side), its ratio the median of the cycles' or pairs'. A family's rounds are
spread over the whole run (round 1 of every family, then round 2, ...). Families of figures without a
baseline run once; the others -rounds (ROUNDS, default 5), the appends, the synced appends, the
recovery and the strom command at least 9, the Kafka window at least 5; the recovery runs 10 ops (10x), the
families in turns and the strom command one (1x). The verdict is on the median.
`

// render prints the table: per row the median of the figure's rounds, the
// median of its baseline's, the median of the per-round ratios with their
// spread (lowest to highest ratio, and how many rounds), the target and the
// verdict, taken on the median ratio (or the median value for a row
// without a baseline, whose spread is that of its values).
func render(w io.Writer, m metrics) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\tbaseline (same run)\tratio\tspread\ttarget\tverdict")
	for _, r := range rows() {
		vs := m[r.bench][r.unit]
		if len(present(vs)) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\tnot run\n", r.figure, r.target)
			continue
		}
		v := median(vs)
		baseStr, ratioStr, spreadStr, verdict := "-", "-", spreadText(vs, r.formatter), ""
		if b := m[r.bench][r.beside]; len(b) > 0 && r.beside != "" {
			baseStr = r.formatter(median(b))
		}
		if r.baseline != "" {
			rs := ratios(vs, m[r.baseline][r.baseUnit])
			if own := m[r.bench][r.ratioUnit]; len(own) > 0 && r.ratioUnit != "" {
				rs = own
			}
			if len(rs) > 0 {
				baseStr = r.formatter(median(m[r.baseline][r.baseUnit]))
				ratio := median(rs)
				ratioStr, spreadStr = ratioText(ratio), spreadText(rs, ratioText)
				switch {
				case r.minRatio > 0 && ratio >= r.minRatio, r.maxRatio > 0 && ratio <= r.maxRatio:
					verdict = "met"
				case r.minRatio > 0 || r.maxRatio > 0:
					verdict = "MISSED"
				}
			}
		}
		if r.meets != nil {
			verdict = "met"
			if !r.meets(v) {
				verdict = "MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.figure, r.formatter(v), baseStr, ratioStr, spreadStr, r.target, verdict)
	}
	tw.Flush()
}
