package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRenderComputesRatiosAgainstTheSameRunsBaseline ensures the table
// reads go test -bench output, strips the GOMAXPROCS suffix, takes the
// appends' ratios from their turns (each against the baseline it names)
// and the synced appends' from the benchmark's own metric, judges targets,
// and marks figures that did not run.
func TestRenderComputesRatiosAgainstTheSameRunsBaseline(t *testing.T) {
	in := `goos: linux
BenchmarkAppendTurns/value=64B-2   	 1	 25000000000 ns/op	 5000000 durable-records/s	 10000000 framed-records/s	 4000000 mapped-records/s	 4000000 mmap-1024-records/s	 0.80 mmap-1024-x-durable	 0.40 mmap-1024-x-framed	 2000000 mmap-1-records/s	 0.40 mmap-1-x-durable	 0.50 mmap-1-x-mapped
BenchmarkSyncedAppend/mode=mmap/appenders=64-2   100   1 ns/op   150000 records/s   60.5 x-baseline
BenchmarkBaselineSyncPerRecord-2   100   1 ns/op   2500 records/s
BenchmarkIndexMemory-2   1   1 ns/op   40.0 index-MiB
PASS
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `append 64B, mmap, 1024/call, synced at the end\s+4.00 M/s\s+5.00 M/s\s+0.80x\s+-\s+>= 0.8x\s+met`, s)
	assert.Regexp(t, `1024/call, synced at the end.*\n\s+same, against the bare loop \(page cache only\)\s+4.00 M/s\s+10.00 M/s\s+0.40x\s+-\s*\n`, s)
	assert.Regexp(t, `mmap, 64 appenders\s+150000 /s\s+2500 /s\s+60.50x\s+-\s+>= 50x\s+met`, s)
	assert.Regexp(t, `10 GiB of 64 B records\s+40.0 MiB.*met`, s)
	assert.Regexp(t, `append 64B, mmap, 1/call, synced at the end\s+2.00 M/s\s+5.00 M/s\s+0.40x\s+-\s+>= 0.5x\s+MISSED\s*\n\s+same, against a bare mapped store loop \(its page faults\)\s+2.00 M/s\s+4.00 M/s\s+0.50x\s+-\s*\n`, s)
	assert.Regexp(t, `append 1KiB, file, 1/call, synced at the end\s+-.*not run`, s)
}

// TestRenderPipelineFigures ensures issue 6's rows take strom's ratios to
// go-streams, rill and the read-write replay from their turns in one
// process (BenchmarkTurns' x-turns), pair n=4 with the n=1 baseline of the
// same run, judge
// value-only targets (allocations, saves per second, issue 17's time to
// the first checkpoint), and show latency without a verdict.
func TestRenderPipelineFigures(t *testing.T) {
	in := `pkg: github.com/strom-dev/strom/internal/bench
BenchmarkThree/strom-2      	 9000000	 125.0 ns/op	   8000000 records/s	       0 B/op	       0 allocs/op
BenchmarkThreeFromLog/rw-2  	       2	 500000000 ns/op	 0.0025 allocs/record	   2000000 records/s	 600000000 B/op	    2600 allocs/op
BenchmarkTurns/three/strom-vs-gostreams-2  	 1	 5000000000 ns/op	 400000 base-records/s	 8000000 records/s	 20 x-turns
BenchmarkTurns/three/strom-vs-rill-2  	 1	 5000000000 ns/op	 800000 base-records/s	 8000000 records/s	 10 x-turns
BenchmarkTurns/replay/rw-vs-gostreams-2  	 1	 5000000000 ns/op	 400000 base-records/s	 2000000 records/s	 5 x-turns
BenchmarkTurns/replay/ro-vs-rw-2  	 1	 5000000000 ns/op	 2000000 base-records/s	 1000000 records/s	 0.5 x-turns
BenchmarkTailFollow-2       	       1	3000000000 ns/op	 0.27 p50-ms	 1.37 p99-ms	 2538 records	 4.99 saves/s
BenchmarkKeyOrdered/n=1-2   	       1	1161559198 ns/op	       880 records/s
BenchmarkKeyOrdered/n=4-2   	       4	 306152979 ns/op	      3344 records/s
BenchmarkKeyOrdered/n=16-2  	      15	  78298403 ns/op	      8800 records/s
BenchmarkTrackerMemory-2    	34462856	        34.95 ns/op	 8.000 MiB	 8.389 bytes/record	 0 B/op	 0 allocs/op
BenchmarkFirstCheckpoint-2   	       1	4668914126 ns/op	      1820 first-position	      4661 ms-to-first-checkpoint	 1837032 B/op	    6420 allocs/op
PASS
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `strom vs go-streams\s+8.00 M/s\s+0.40 M/s\s+20.00x\s+-\s+>= 20x\s+met`, s)
	assert.Regexp(t, `strom vs rill\s+8.00 M/s\s+0.80 M/s\s+10.00x\s+-\s+>= 8x\s+met`, s)
	assert.Regexp(t, `from memory, strom allocations\s+0.0000 allocs/record\s+-\s+-\s+-\s+< 0.01/record\s+met`, s)
	assert.Regexp(t, `FileStore vs go-streams in memory\s+2.00 M/s\s+0.40 M/s\s+5.00x\s+-\s+>= 10x\s+MISSED`, s)
	assert.Regexp(t, `read-write\) replay\s+1.00 M/s\s+2.00 M/s\s+0.50x\s+-\s+>= 0.83x \(within 1.2x\)\s+MISSED`, s)
	assert.Regexp(t, `checkpoint saves\s+5.0 /s\s+-\s+-\s+-\s+<= 10 /s\s+met`, s)
	assert.Regexp(t, `handler, p99\s+1.37 ms\s+-\s+-\s+-\s+\n`, s)
	assert.Regexp(t, `n=4 vs n=1\s+3344 records/s\s+880 records/s\s+3.80x\s+-\s+>= 3x\s+met`, s)
	assert.Regexp(t, `n=16 vs n=1\s+8800 records/s\s+880 records/s\s+10.00x\s+-\s+>= 12x\s+MISSED`, s)
	assert.Regexp(t, `Begin\+Done, allocations\s+0 allocs/op\s+-\s+-\s+-\s+0\s+met`, s)
	assert.Regexp(t, `memory per record\s+8.39 B/record`, s)
	assert.Regexp(t, `first checkpoint after\s+4661.00 ms\s+-\s+-\s+-\s+< 500 ms\s+MISSED`, s)
	assert.Regexp(t, `position saved by that checkpoint\s+1820 records\s+-\s+-\s+-\s+\n`, s)
}

// TestRenderRelayFigures ensures issue 7's rows pair each strom relay with
// the plain franz-go loop of the same direction and size, from their turns,
// judge the 0.8x target, and mark a direction that did not run.
func TestRenderRelayFigures(t *testing.T) {
	in := `pkg: github.com/strom-dev/strom/internal/bench
BenchmarkRelayLogToKafka/100B/turns-2   	       1	5066891806 ns/op	   2000000 base-records/s	   1500000 records/s	 0.75 x-turns
BenchmarkRelayLogToKafka/1KiB/turns-2   	       1	5040250319 ns/op	    500000 base-records/s	    450000 records/s	 0.90 x-turns
PASS
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `relay log -> Kafka \(kfake\), 100 B, strom vs plain franz-go loop\s+1500000 records/s\s+2000000 records/s\s+0.75x\s+-\s+>= 0.8x\s+MISSED`, s)
	assert.Regexp(t, `relay log -> Kafka \(kfake\), 1 KiB, strom vs plain franz-go loop\s+450000 records/s\s+500000 records/s\s+0.90x\s+-\s+>= 0.8x\s+met`, s)
	assert.Regexp(t, `relay Kafka -> log \(kfake\), 100 B, strom vs plain franz-go loop\s+-\s+-\s+-\s+-\s+>= 0.8x\s+not run`, s)
}

// TestRenderStatefulFigures ensures issue 9's rows take the window's and
// Aggregate's ratios to the stateless pipeline from their turns, show
// the cost of saving state per record the benchmark measured beside the
// same pipeline without a store, and show state bytes per key.
func TestRenderStatefulFigures(t *testing.T) {
	in := `pkg: github.com/strom-dev/strom/internal/bench
BenchmarkTurns/stateful/tumbling-vs-stateless-2  	 1	 5000000000 ns/op	 12500000 base-records/s	 8000000 records/s	 0.64 x-turns
BenchmarkWindow/tumbling/none-2     	 8045126	       125.0 ns/op	         0.08391 allocs/record	   8000000 records/s	       2 B/op	       0 allocs/op
BenchmarkWindow/tumbling/memory-2   	 7365334	       135.5 ns/op	         0.08468 allocs/record	   7380000 records/s	        10.50 save-ns/record	       106.2 saves/s	     25397 state-B	        25.40 state-B/key	       125.0 without-ns/record	       8 B/op	       0 allocs/op
BenchmarkWindow/tumbling/memory-each-batch-2         	 2380234	       493.1 ns/op	         0.1476 allocs/record	   2028263 records/s	       368.1 save-ns/record	      1982 saves/s	       125.0 without-ns/record	     246 B/op	       0 allocs/op
BenchmarkAggregate/count/memory-2                    	11428472	        94.80 ns/op	         0.0008358 allocs/record	  10550439 records/s	        30.10 save-ns/record	       163.4 saves/s	      8158 state-B	         8.158 state-B/key	        64.70 without-ns/record	       2 B/op	       0 allocs/op
PASS
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `tumbling 1-min window count, 1,000 keys \(64 B\), vs the stateless 3 stages\s+8.00 M/s\s+12.50 M/s\s+0.64x\s+-\s+\n`, s)
	assert.Regexp(t, `same, allocations\s+0.0839 allocs/record`, s)
	assert.Regexp(t, `window state per key open \(last snapshot / 1,000 keys\)\s+25.4 B/key`, s)
	assert.Regexp(t, `MemoryStore, default policy \(vs no store\)\s+10.5 ns/record\s+125.0 ns/record\s+-\s+-\s+\n`, s)
	assert.Regexp(t, `state snapshots saved\s+106 /s`, s)
	assert.Regexp(t, `MemoryStore, CheckpointEachBatch \(worst case\)\s+368.1 ns/record\s+125.0 ns/record`, s)
	assert.Regexp(t, `FileStore, CheckpointEachBatch \(worst case\)\s+-\s+-\s+-\s+-\s+not run`, s)
	assert.Regexp(t, `aggregate state per key \(last snapshot / 1,000 keys\)\s+8.2 B/key`, s)
	assert.Regexp(t, `Aggregate count, 1,000 keys \(64 B\), vs the stateless 3 stages\s+-.*not run`, s)
	assert.Regexp(t, `Aggregate count[^\n]*\n[^\n]*\n\s+cost of saving state, MemoryStore, default policy \(vs no store\)\s+30.1 ns/record\s+64.7 ns/record\s+-\s+-\s+\n`, s)
}

func TestRenderDamagedLengthFigures(t *testing.T) {
	in := `pkg: github.com/strom-dev/strom/log
BenchmarkOpenDamagedLength/file/torn/len=0x7fffffff-2    	       3	  12078557 ns/op	 2118562 B/op	     219 allocs/op
BenchmarkOpenDamagedLength/mmap/corrupt/len=0x7fffffff-2 	       3	   3624419 ns/op	 20111301 B/op	     147 allocs/op
PASS
`
	m, _, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `open, length 2\^31-1 damaged, file, torn: time\s+12.08 ms`, s)
	assert.Regexp(t, `open, length 2\^31-1 damaged, file, torn: time[^\n]*\n\s+same, allocated\s+2.0 MiB.*< 16 MiB\s+met`, s)
	assert.Regexp(t, `open, length 2\^31-1 damaged, mmap, corrupt: time[^\n]*\n\s+same, allocated\s+19.2 MiB.*< 16 MiB\s+MISSED`, s)
}
