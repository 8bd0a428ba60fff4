package torture_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/torture"
)

// eosKafkaSeedEnv, set to a seed, makes TestShortEOSKafkaCommitsEachWindowOnceUnderFaults run that
// seed alone (the rerun command a failing seed prints).
const eosKafkaSeedEnv = "STROM_TORTURE_EOS_KAFKA_SEED"

// eosKafkaDirEnv, set to a folder, makes TestShortEOSKafkaCommitsEachWindowOnceUnderFaults keep
// each seed's run folder (the workers' stderr, their state) in it, as
// seed-N, instead of a temporary one.
const eosKafkaDirEnv = "STROM_TORTURE_EOS_KAFKA_DIR"

// shortEOSKafkaSeeds are the seeds make test runs: fixed, so a failure is
// reproducible by name, and chosen to cover every kind of fault between
// them.
var shortEOSKafkaSeeds = []uint64{1, 2, 3}

// eosKafkaConfig is scenario eos-kafka as make test runs it: the default 400
// records over 16 keys and 3 to 5 faults drawn from the seed, the workers
// being this test binary.
func eosKafkaConfig(t *testing.T, seed uint64) torture.Config {
	dir := t.TempDir()
	if keep := os.Getenv(eosKafkaDirEnv); keep != "" {
		dir = filepath.Join(keep, fmt.Sprintf("seed-%d", seed))
	}
	return torture.Config{
		Dir:      dir,
		Seed:     seed,
		Scenario: torture.ScenarioEOSKafka,
		CatchUp:  time.Minute,
		Command:  command,
	}
}

// TestShortEOSKafkaCommitsEachWindowOnceUnderFaults ensures issue 19's fault runs, a few of
// them: for each seed, a keyed tumbling-window count from Kafka to Kafka
// under stream.ExactlyOnce, on worker processes of one group, with 3 to 5
// faults drawn from the seed (SIGKILLs, one held in the middle of a
// commit, a member joining or leaving, Produce, EndTxn, TxnOffsetCommit
// and Heartbeat requests answered with errors, dropped or delayed),
// commits every window's result exactly once, in order, with the count an
// uninterrupted computation gives: 0 lost, 0 duplicated, 0 out of order.
func TestShortEOSKafkaCommitsEachWindowOnceUnderFaults(t *testing.T) {
	t.Parallel()
	seeds := shortEOSKafkaSeeds
	if v := os.Getenv(eosKafkaSeedEnv); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q", eosKafkaSeedEnv, v)
		seeds = []uint64{seed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			cfg := eosKafkaConfig(t, seed)
			sum, err := torture.Run(context.Background(), cfg)
			require.NotNil(t, sum, "Run: %v", err)
			t.Log("\n" + sum.String())
			require.NoError(t, err, "again: %s=%d go test -race -count=1 -run 'TestShortEOSKafkaCommitsEachWindowOnceUnderFaults' ./internal/torture/", eosKafkaSeedEnv, seed)
			r := sum.EOSKafka
			require.NotNil(t, r.Check)
			require.Zero(t, r.Check.Lost, "lost")
			require.Zero(t, r.Check.Duplicated, "duplicated")
			require.Zero(t, r.Check.OutOfOrder, "out of order")
			require.Zero(t, r.Check.Failures())
			require.Positive(t, r.Check.Expected)
			require.Equal(t, r.Check.Expected, r.Check.Results)
			require.GreaterOrEqual(t, r.FaultCount(), 3)
		})
	}
}

// TestEOSKafkaReportsDuplicatesAWorkerPlants ensures the check catches what
// it is for: workers that write every result twice (a planted fault) make
// the run fail with every result duplicated, and nothing lost.
func TestEOSKafkaReportsDuplicatesAWorkerPlants(t *testing.T) {
	t.Parallel()
	cfg := eosKafkaConfig(t, 1)
	cfg.Dir = t.TempDir()
	cfg.Faults = 1
	cfg.FaultKinds = []string{torture.FaultHeartbeat}
	cfg.PlantDuplicates = true
	sum, err := torture.Run(context.Background(), cfg)
	require.NotNil(t, sum, "Run: %v", err)
	t.Log("\n" + sum.String())
	var verr *torture.ViolationError
	require.True(t, errors.As(err, &verr), "want a ViolationError, got %v", err)
	c := sum.EOSKafka.Check
	require.NotNil(t, c)
	require.Equal(t, c.Expected, c.Duplicated)
	require.Zero(t, c.Lost)
	require.Zero(t, c.OutOfOrder)
}
