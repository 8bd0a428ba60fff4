package scaledemo_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/internal/scaledemo"
)

// binDir holds the sshwatch binary the tests build (sshwatchBinary).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strom-scaledemo-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
	buildOut  []byte
)

// sshwatchBinary builds examples/sshwatch once for the package's tests,
// without the race detector (the workers run at full speed; the test
// binary itself may run with -race).
func sshwatchBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "sshwatch")
	buildOnce.Do(func() {
		build := exec.Command("go", "build", "-o", bin, "./examples/sshwatch")
		build.Dir = filepath.Join("..", "..")
		buildOut, buildErr = build.CombinedOutput()
	})
	require.NoError(t, buildErr, "go build ./examples/sshwatch: %s", buildOut)
	return bin
}

// run runs cfg on the OpenSSH sample and fails t unless every alert and
// window equals sshwatch's on one process.
func run(t *testing.T, cfg scaledemo.Config) *scaledemo.Report {
	cfg.Input = filepath.Join(loghub.Dir(t), "OpenSSH_2k.log")
	cfg.SSHWatch = sshwatchBinary(t)
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := scaledemo.Run(ctx, cfg)
	require.NotNil(t, rep, "Run: %v", err)
	t.Logf("events:\n%s", strings.Join(rep.Events, "\n"))
	t.Logf("report:\n%s", rep)
	require.NoError(t, err, "the run's files are in %s", cfg.Dir)
	require.True(t, rep.Pass(), "the run's files are in %s", cfg.Dir)
	require.Equal(t, 2000, rep.Lines)
	require.Equal(t, 29, rep.Alerts.Expected, "the sample's alert windows, as sshwatch's own test counts them")
	return rep
}

// TestRepartitionOnThreeProcessesPrintsTheAlertsOfOneProcess is issue 18's
// Repartition case: the OpenSSH sample produced keyed by line number (an
// IP's lines in every partition), counted per source IP through
// stream.Repartition (a Kafka repartition topic, KafkaSource.Through) by 3
// sshwatch processes of one group, and a fourth that joins mid-way (its
// share of the repartition topic's partitions, and their windows, handed
// over): together they print the alerts, and the windows, of sshwatch on
// one process, each with its count.
func TestRepartitionOnThreeProcessesPrintsTheAlertsOfOneProcess(t *testing.T) {
	rep := run(t, scaledemo.Config{Repartition: true, NoKill: true})
	require.Equal(t, 1, rep.Joins)
	require.Zero(t, rep.Kills)
}

// TestKeyedByIPOnThreeProcessesSurvivesAKillAndAJoin is make demo-scale as
// a test: the sample keyed by source IP, 3 sshwatch processes of one
// group, one killed with kill -9 a third of the way (its partitions and
// their windows move to the others through the changelog), a fourth
// started at two thirds: together they print the alerts and windows of
// sshwatch on one process.
func TestKeyedByIPOnThreeProcessesSurvivesAKillAndAJoin(t *testing.T) {
	rep := run(t, scaledemo.Config{})
	require.Equal(t, 1, rep.Kills)
	require.Equal(t, 1, rep.Joins)
}
