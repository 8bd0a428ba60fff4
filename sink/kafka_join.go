package sink

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/stream"
)

// TransactionClienter is a stream.Transactor that runs Kafka transactions
// with a franz-go client a [KafkaSink] can produce with: source.Kafka under
// stream.ExactlyOnce (its group's offsets are committed in the
// transaction). TransactionClient returns nil until the transactions have
// begun.
type TransactionClienter interface {
	TransactionClient() *kgo.Client
}

// The interface a KafkaSink implements for stream.ExactlyOnce.
var _ stream.TransactionalSink = (*KafkaSink)(nil)

// JoinTransaction makes the sink produce into t's transactions
// (stream.TransactionalSink; an ExactlyOnce pipeline calls it before the
// first record): from then on it produces with t's transactional client,
// so its records become visible to read_committed readers only when t
// commits the transaction, with the input offsets of the records that
// made them. The client the sink made is closed; one given with
// [KafkaClient] is left open, unused.
//
// It returns an error when t runs no Kafka transactions
// ([TransactionClienter]), has not begun them, or talks to other brokers
// than the sink (one transaction cannot span two clusters: the seed
// brokers of both clients must be the same set). A sink with
// [KafkaTransactionalID] runs its own transactions: it joins only itself.
func (s *KafkaSink) JoinTransaction(t stream.Transactor) error {
	if s.txn != nil {
		return s.joinOwn(t)
	}
	tc, ok := t.(TransactionClienter)
	if !ok {
		return fmt.Errorf("sink: Kafka topic %s: a %T runs no Kafka transactions to produce into", s.topic, t)
	}
	cl := tc.TransactionClient()
	if cl == nil {
		return fmt.Errorf("sink: Kafka topic %s: %T has not begun its transactions", s.topic, t)
	}
	if cl == s.cl {
		return nil
	}
	mine, theirs := seedBrokers(s.cl), seedBrokers(cl)
	if !slices.Equal(mine, theirs) {
		return fmt.Errorf("sink: Kafka topic %s: the sink's brokers %v are not the transaction's %v: one Kafka transaction cannot span two clusters",
			s.topic, mine, theirs)
	}
	if s.own {
		s.cl.Close()
	}
	s.cl, s.own = cl, false
	return nil
}

// seedBrokers returns cl's seed brokers, sorted.
func seedBrokers(cl *kgo.Client) []string {
	var bs []string
	for _, v := range cl.OptValues(kgo.SeedBrokers) { // variadic: one []string
		if b, ok := v.([]string); ok {
			bs = append(bs, b...)
		}
	}
	slices.Sort(bs)
	return slices.Compact(bs)
}
