package log_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

var modes = []log.Mode{log.ModeFile, log.ModeMmap}

// forEachMode runs fn as a subtest per write path: every log test runs on
// both.
func forEachMode(t *testing.T, fn func(t *testing.T, mode log.Mode)) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) { fn(t, m) })
	}
}

func openLog(t *testing.T, dir string, opts ...log.Option) *log.Log {
	t.Helper()
	lg, err := log.Open(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	return lg
}

func openPartition(t *testing.T, lg *log.Log, topic string, n int) *log.Partition {
	t.Helper()
	tp, err := lg.CreateTopic(topic, n)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return p
}

func val(i int) []byte { return []byte(fmt.Sprintf("value-%04d", i)) }

func appendN(t *testing.T, p *log.Partition, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := p.Append(context.Background(), log.Record{Value: val(i)}) // 56-byte frames: the retention tests count on it
		require.NoError(t, err)
	}
}

// readAll returns every record of p from its start offset.
func readAll(t *testing.T, p *log.Partition) []log.Record {
	t.Helper()
	var out []log.Record
	off := p.StartOffset()
	for {
		recs, err := p.Read(off, 1<<20)
		require.NoError(t, err)
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		off = recs[len(recs)-1].Offset + 1
	}
}

func segPath(dir, topic string, partition int, base int64) string {
	return filepath.Join(dir, topic, fmt.Sprint(partition), fmt.Sprintf("%020d.log", base))
}

func segments(t *testing.T, dir, topic string, partition int) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, topic, fmt.Sprint(partition), "*.log"))
	require.NoError(t, err)
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
