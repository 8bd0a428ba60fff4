package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/torture"
)

// shortScaleConfig is issue 18's churn case cut down to run in seconds:
// 12 partitions, 12,000 records over 100 keys, workers 1 → 2 → 1 and one
// SIGKILL, the workers being this test binary.
func shortScaleConfig(t *testing.T, stateless bool) torture.Config {
	return torture.Config{
		Dir:             t.TempDir(),
		Scenario:        torture.ScenarioScale,
		Records:         12_000,
		Keys:            100,
		ScalePartitions: 12,
		Members:         []int{1, 2, 1},
		Kills:           1,
		Stateless:       stateless,
		CatchUp:         time.Minute,
		Command:         command,
	}
}

// TestShortScaleChurnGivesEveryWindowItsCount ensures issue 18's churn
// case, cut down: a keyed tumbling-window count over a 12-partition Kafka
// topic, run by worker processes of one group that join, leave and are
// SIGKILLed, emits every (window, key) of the records at least once, each
// with the count computed from the records. Fails until a partition's
// window state follows it to the member that takes it over.
func TestShortScaleChurnGivesEveryWindowItsCount(t *testing.T) {
	t.Parallel()
	sum, err := torture.Run(context.Background(), shortScaleConfig(t, false))
	require.NotNil(t, sum, "Run: %v", err)
	t.Log("\n" + sum.String())
	require.NoError(t, err)
	w := sum.Scale.Windows
	require.NotNil(t, w)
	require.Zero(t, w.Missing, "(window, key) results never emitted")
	require.Zero(t, w.Wrong, "results with a wrong count")
	require.Zero(t, w.Unknown)
	require.Equal(t, w.Expected, w.Distinct)
	require.Equal(t, 1, sum.Scale.Kills)
	require.Equal(t, 1, sum.Scale.Leaves)
}

// TestShortScaleStatelessRelaysEveryRecord ensures the harness can pass:
// the same churn (workers 1 → 2 → 1, one SIGKILL) with workers that relay
// every record to the output topic delivers every input record at least
// once and nothing else, every partition committed to its end.
func TestShortScaleStatelessRelaysEveryRecord(t *testing.T) {
	t.Parallel()
	sum, err := torture.Run(context.Background(), shortScaleConfig(t, true))
	require.NotNil(t, sum, "Run: %v", err)
	t.Log("\n" + sum.String())
	require.NoError(t, err)
	c := sum.Scale.Relay
	require.NotNil(t, c)
	require.Equal(t, 12_000+12, c.Input, "the records and one sentinel per partition")
	require.Zero(t, c.Missing)
	require.Zero(t, c.Phantoms)
	require.Equal(t, c.Input, c.Distinct)
	require.Equal(t, 1, sum.Scale.Kills)
	require.Equal(t, 1, sum.Scale.Leaves)
	require.Zero(t, sum.Scale.Crashes)
}
