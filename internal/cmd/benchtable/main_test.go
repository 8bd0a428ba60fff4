package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRenderComputesRatiosAgainstTheSameRunsBaseline ensures the table
// reads go test -bench output, strips the GOMAXPROCS suffix, computes
// ratios and judges targets, and marks figures that did not run.
func TestRenderComputesRatiosAgainstTheSameRunsBaseline(t *testing.T) {
	in := `goos: linux
BenchmarkSegmentAppend/mode=mmap/value=64B/batch=1024-2   	 1000	 250.0 ns/op	 256.00 MB/s	   4000000 records/s
BenchmarkBaselineFramedPwrite/value=64B-2               	 1000	 100.0 ns/op	   10000000 records/s
BenchmarkSyncedAppend/mode=mmap/appenders=64-2   100   1 ns/op   150000 records/s   60.5 x-baseline
BenchmarkBaselineSyncPerRecord-2   100   1 ns/op   2500 records/s
BenchmarkIndexMemory-2   1   1 ns/op   40.0 index-MiB
PASS
`
	m, err := parse(strings.NewReader(in), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	render(&out, m)
	s := out.String()
	assert.Regexp(t, `append 64B, mmap, 1024/call, no sync\s+4.00 M/s\s+10.00 M/s\s+0.40x\s+>= 0.8x\s+MISSED`, s)
	assert.Regexp(t, `mmap, 64 appenders\s+150000 /s\s+2500 /s\s+60.50x\s+>= 50x\s+met`, s)
	assert.Regexp(t, `10 GiB of 64 B records\s+40.0 MiB.*met`, s)
	assert.Regexp(t, `append 1KiB, file, 1/call, no sync\s+-.*not run`, s)
}
