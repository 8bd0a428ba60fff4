package main

import (
	"regexp"
	"strings"
)

// family is a set of benchmarks compared with each other: a figure and
// its baseline (or several figures sharing one). Each side runs in a
// process of its own, so nothing one leaves behind (a heap, a page cache
// full of another fixture, a goroutine still writing back) is paid by the
// next, and the sides take turns, round after round (A B A B ...), so a
// slow minute of a shared machine falls on both: the ratio of a round is
// taken between neighbours.
type family struct {
	name string
	pkg  string // the package whose test binary runs it: "./log/", "./internal/bench/", "./cmd/strom/"
	// sides are benchmark names ("BenchmarkThree/strom", the GOMAXPROCS
	// suffix left out), each matching itself and its sub-benchmarks, or
	// regular expressions for -test.bench when they start with "^".
	sides []string
	// once runs the family in one round whatever the run's rounds: figures
	// judged on their value alone (a latency, a memory size), or a family
	// too long to repeat, whose benchmark measures its baseline beside it.
	once bool
	// benchtime overrides the run's -benchtime ("" keeps it).
	benchtime string
	// rounds is the least rounds the family runs (0: the run's): more for
	// the families whose single rounds scatter most on a shared machine
	// (the disk's rate for the appends, kfake's CPU for the relay), so
	// their median holds from one run to the next (issue 24).
	rounds int
}

// benchtimeOf is the -test.benchtime of f's sides: the family's, or the
// run's (run).
func (f *family) benchtimeOf(run string) string {
	if f.benchtime != "" {
		return f.benchtime
	}
	return run
}

// invocation is one process: one side of a family in one round.
type invocation struct {
	family        *family
	round, rounds int // 1-based
	side          string
}

// schedule lays the rounds out in passes over the families: each family's
// sides run in order within a round (for sides A and B, A B), so a round's
// ratio is taken between neighbours, and a family's rounds are spread
// evenly over the run's passes (as many as the most rounds any family
// has), so its median is taken over the whole run, not over the one
// minute its rounds would take back to back. Issue 24's second pair of
// runs had its families' rounds back to back: a memory-bound figure (the
// windowed join, a plain map lookup) ran 35% slower through the minute of
// one run's join family than through the next run's, while the stateless
// stages beside it did not move. A family of n rounds among P passes runs
// round r in pass (r-1)*P/n + 1; a family marked once runs one round, in
// the first pass.
func schedule(fams []family, rounds int) []invocation {
	rounds = max(rounds, 1)
	n := make([]int, len(fams))
	passes := 1
	for i := range fams {
		n[i] = max(rounds, fams[i].rounds)
		if fams[i].once {
			n[i] = 1
		}
		passes = max(passes, n[i])
	}
	var out []invocation
	for pass := 1; pass <= passes; pass++ {
		for i := range fams {
			f := &fams[i]
			for r := 1; r <= n[i]; r++ {
				if (r-1)*passes/n[i]+1 != pass {
					continue
				}
				for _, s := range f.sides {
					out = append(out, invocation{family: f, round: r, rounds: n[i], side: s})
				}
			}
		}
	}
	return out
}

// benchPattern turns a benchmark name into the -test.bench pattern that
// runs it and its sub-benchmarks only, one anchored expression per level
// ("BenchmarkThree/strom" -> "^BenchmarkThree$/^strom$"); a side starting
// with "^" is already a pattern.
func benchPattern(side string) string {
	if strings.HasPrefix(side, "^") {
		return side
	}
	parts := strings.Split(side, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// turnsPairs are internal/bench's BenchmarkTurns pairs, one process each.
var turnsPairs = []string{
	"BenchmarkTurns/three/strom-vs-gostreams", "BenchmarkTurns/three/strom-vs-rill",
	"BenchmarkTurns/replay/rw-vs-gostreams", "BenchmarkTurns/replay/rw-reuse-vs-gostreams", "BenchmarkTurns/replay/ro-vs-rw",
	"BenchmarkTurns/stateful/tumbling-vs-stateless", "BenchmarkTurns/stateful/aggregate-vs-stateless",
	"BenchmarkTurns/join/table-vs-lookup", "BenchmarkTurns/join/table-memory-vs-lookup",
	"BenchmarkTurns/join/window-vs-lookup", "BenchmarkTurns/join/window-memory-vs-lookup",
}

// families is what make bench runs, in order. Every figure of rows() is in
// one; benchmarks the table does not show are not run (go test -bench runs
// them).
func families() []family {
	var fs []family
	for _, size := range []string{"64B", "1KiB"} {
		// The appends and their three baselines take turns in one process
		// (log's BenchmarkAppendTurns), each turn the same records. 9
		// rounds: in issue 24's fifth pair of runs the one row that moved
		// (the 1 KiB mapped append of one a call over the mapped store
		// loop, 0.56x then 0.66x) moved from one process to the next, its
		// rounds 0.54x to 0.76x, its cycles within a process close.
		fs = append(fs, family{name: "appends " + size, pkg: "./log/", sides: []string{"BenchmarkAppendTurns/value=" + size}, benchtime: "1x", rounds: 9})
	}
	synced := []string{"BenchmarkBaselineSyncPerRecord"}
	for _, mode := range []string{"file", "mmap"} {
		for _, n := range []string{"1", "8", "64"} {
			synced = append(synced, "BenchmarkSyncedAppend/mode="+mode+"/appenders="+n)
		}
	}
	fs = append(fs,
		// The synced appends wait on the VM disk's fsync: their rounds
		// scattered 7-13% (sd) in issue 24's fourth pair of runs.
		family{name: "synced appends", pkg: "./log/", sides: synced, rounds: 9},
		// 9 rounds: the sealed recoveries' round ratios scattered 10-22%
		// (sd of the log) in issue 24's fifth and sixth pairs of runs; a
		// round takes about 16 s.
		family{name: "recovery", pkg: "./log/", sides: []string{"BenchmarkRecovery/value=64B", "BenchmarkRecovery/value=1KiB"}, benchtime: "10x", rounds: 9},
		family{name: "compaction", pkg: "./log/", sides: []string{"BenchmarkCompaction/append/turns"}, benchtime: "1x"},
		family{name: "log, value only", pkg: "./log/", once: true, sides: []string{"BenchmarkCompaction/clean",
			"BenchmarkFollowLatency", "BenchmarkIndexMemory", "BenchmarkIdlePartitionDisk", "BenchmarkOpenDamagedLength"}},
		family{name: "three stages", pkg: "./internal/bench/", sides: []string{"BenchmarkThree/strom",
			"BenchmarkThreeTelemetry/metrics", "BenchmarkThreeFromLog/rw"}},
		// A run of 3 s holds 3 of the page's samples (one a second).
		family{name: "live page", pkg: "./internal/bench/", sides: []string{"BenchmarkThreeLivePage/off", "BenchmarkThreeLivePage/open"}, benchtime: "3s"},
		family{name: "KeyOrdered", pkg: "./internal/bench/", sides: []string{"BenchmarkKeyOrdered/n=1", "BenchmarkKeyOrdered/n=4", "BenchmarkKeyOrdered/n=16"}},
		// The pipelines' ratios to other pipelines in memory, each pair in
		// turns of 200 ms in one process (internal/bench's BenchmarkTurns).
		family{name: "turns", pkg: "./internal/bench/", sides: turnsPairs, benchtime: "1x"},
		family{name: "stateful stages", pkg: "./internal/bench/", sides: []string{"BenchmarkWindow/tumbling", "BenchmarkAggregate"}},
		// The joins' allocations and state per key: their rates are turns'.
		family{name: "joins", pkg: "./internal/bench/", once: true, sides: []string{"BenchmarkJoin/table", "BenchmarkJoin/window"}},
		family{name: "relay", pkg: "./internal/bench/", benchtime: "1x", sides: []string{
			"BenchmarkRelayLogToKafka/100B/turns", "BenchmarkRelayLogToKafka/1KiB/turns",
			"BenchmarkRelayKafkaToLog/100B/turns", "BenchmarkRelayKafkaToLog/1KiB/turns"}},
		// Each op is one windowed count of 120,000 records after the group
		// formed; 1 and 3 members take turns of 2 ops in one process
		// (BenchmarkKafkaWindow/turns, 10 pairs). A process a side with 6
		// ops each moved 0.90x then 1.07x in issue 24's sixth pair of runs.
		family{name: "Kafka window", pkg: "./internal/bench/", sides: []string{"BenchmarkKafkaWindow/turns"}, benchtime: "1x", rounds: 5},
		family{name: "exactly-once", pkg: "./internal/bench/", sides: []string{"BenchmarkKafkaExactlyOnce/mode=at-least-once", "BenchmarkKafkaExactlyOnce/mode=exactly-once"}},
		family{name: "pipeline, value only", pkg: "./internal/bench/", once: true, sides: []string{"BenchmarkTailFollow", "BenchmarkTrackerMemory",
			"BenchmarkFirstCheckpoint", "BenchmarkKafkaVisibility", "BenchmarkPartitionMove", "BenchmarkChangelogRestore",
			"BenchmarkChangelogSave", "BenchmarkWindowChangelog"}},
		// 9 rounds: strom consume moved 12.44x then 14.00x in the fifth
		// pair, its rounds 12.19x to 13.43x (an op is one 200 MB run).
		family{name: "strom command", pkg: "./cmd/strom/", sides: []string{"BenchmarkCLI"}, benchtime: "1x", rounds: 9},
	)
	return fs
}
