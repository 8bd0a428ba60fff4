package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestExactlyOnceRunStoppedWhileBeginningReturnsNil ensures a worker told
// to stop (SIGTERM: Run's context cancelled) while its exactly-once
// pipeline begins its transactions stops cleanly, as the same pipeline
// without ExactlyOnce does: Run returns nil (scenario eos-kafka, seeds 6054 and
// 6093: a member that joins and is stopped 120 ms later exited 1). Fails
// while Run returns BeginTransactions' context error.
func TestExactlyOnceRunStoppedWhileBeginningReturnsNil(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(1), kafkatest.Topics("in", "out"),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	for _, eos := range []bool{false, true} {
		src, err := source.Kafka(kc.Brokers(), "g", []string{"in"}, source.KafkaTransactionalID("t1"),
			source.KafkaClientOpts(kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond)))
		require.NoError(t, err)
		out, err := sink.Kafka(kc.Brokers(), "out")
		require.NoError(t, err)
		var opts []stream.Option
		if eos {
			opts = append(opts, stream.ExactlyOnce())
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err = stream.MapTo(stream.From(src, opts...), func(_ context.Context, r log.Record) (log.Record, error) { return r, nil }).
			To(out).Checkpointing(src).Run(ctx)
		require.NoError(t, err, "ExactlyOnce %v: Run stopped before its first record", eos)
		require.NoError(t, out.Close())
		require.NoError(t, src.Close())
	}
}
