package source

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The group balancers [KafkaBalancers] takes, by their Kafka protocol names
// (what Kafka's partition.assignment.strategy and librdkafka's
// partition.assignment.strategy configure, and what a group's
// description shows as its protocol).
const (
	// BalancerCooperativeSticky is Kafka's cooperative-sticky assignor
	// (KIP-429): partitions stay where they are as far as balance allows,
	// and a rebalance revokes only the partitions that move, while the
	// others go on being read. kgo.CooperativeStickyBalancer.
	BalancerCooperativeSticky = "cooperative-sticky"
	// BalancerRange is Kafka's range assignor (eager): each topic's
	// partitions in consecutive ranges, one per member. kgo.RangeBalancer.
	BalancerRange = "range"
	// BalancerRoundRobin is Kafka's roundrobin assignor (eager): every
	// partition of every topic dealt out in turn. kgo.RoundRobinBalancer.
	BalancerRoundRobin = "roundrobin"
	// BalancerSticky is Kafka's older, eager sticky assignor.
	// kgo.StickyBalancer.
	BalancerSticky = "sticky"
)

// DefaultKafkaBalancers is the balancers a [KafkaSource] offers its group
// unless [KafkaBalancers] says otherwise, most preferred first:
// cooperative-sticky, then range.
//
// Kafka picks one protocol per group: among the protocols every member
// offers, each member votes for the first of its own list, and the most
// votes win (a tie is the broker's pick). A member offering none of the
// protocols the others share cannot join: its JoinGroup fails with
// INCONSISTENT_GROUP_PROTOCOL. franz-go's own default,
// cooperative-sticky alone, is refused by a librdkafka member with its
// default range,roundrobin (kcat, confluent-kafka-go/-python, node-rdkafka)
// and by a Java member before Kafka 3.0 (range). Offering range second
// lets a strom member share a group with the defaults of those clients and
// of the Java client since 3.0 (range, cooperative-sticky), of Sarama
// (range) and of kafka-python (range, roundrobin):
//
//   - a group of strom members only (or of members that also put
//     cooperative-sticky first) runs cooperative-sticky: a rebalance
//     revokes only the partitions that move;
//   - a group with a member that does not offer cooperative-sticky
//     (librdkafka's default, Sarama's) runs range, which is eager: every
//     rebalance revokes every partition of every member before they are
//     assigned again, partitions a member keeps included (franz-go then
//     rebalances eagerly too; a group running cooperative-sticky that
//     such a member joins is downgraded, each strom member revoking all
//     it holds). The source handles an eager revocation as any other:
//     the finished positions of every revoked partition are committed
//     first, the pipeline's Revoked and Assigned hooks are called for
//     every partition (a stateful stage saves and restores the state of
//     each at each rebalance), and the commits of the other members are
//     where the partitions resume;
//   - with a Java member on its default (range, cooperative-sticky) both
//     protocols are common, and the votes decide: the group runs
//     cooperative-sticky while strom members are the majority, range
//     while Java members are, either on a tie. Java members behave
//     eagerly under either (a member with range in its list revokes
//     everything); strom members follow the protocol chosen.
//
// A group whose members must all stay cooperative (no eager rebalances,
// ever) gives KafkaBalancers(BalancerCooperativeSticky): a member without
// cooperative-sticky is then refused, as by franz-go's default.
const DefaultKafkaBalancers = BalancerCooperativeSticky + "," + BalancerRange

// KafkaBalancers sets the group balancers the source offers, by name, most
// preferred first: [BalancerCooperativeSticky], [BalancerRange],
// [BalancerRoundRobin], [BalancerSticky] (Kafka's
// partition.assignment.strategy), overriding [DefaultKafkaBalancers],
// whose doc says how Kafka picks one for a group and what mixing eager
// and cooperative protocols does. No names keeps the default; an unknown
// or repeated name makes [Kafka] return an error naming it. Every member
// of a group must share at least one of its protocols with every other.
//
// A balancer of your own (a kgo.GroupBalancer) is given with
// [KafkaClientOpts](kgo.Balancers(...)), which overrides this option.
func KafkaBalancers(names ...string) KafkaOption {
	return func(c *kafkaConfig) { c.balancers = append([]string(nil), names...) }
}

// kafkaBalancers returns the franz-go balancers of names, in order: those
// of DefaultKafkaBalancers for none. An unknown or repeated name is an
// error naming it and the known ones.
func kafkaBalancers(names []string) ([]kgo.GroupBalancer, error) {
	if len(names) == 0 {
		names = strings.Split(DefaultKafkaBalancers, ",")
	}
	out := make([]kgo.GroupBalancer, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("balancer %q given twice", n)
		}
		seen[n] = true
		switch n {
		case BalancerCooperativeSticky:
			out = append(out, kgo.CooperativeStickyBalancer())
		case BalancerRange:
			out = append(out, kgo.RangeBalancer())
		case BalancerRoundRobin:
			out = append(out, kgo.RoundRobinBalancer())
		case BalancerSticky:
			out = append(out, kgo.StickyBalancer())
		default:
			return nil, fmt.Errorf("balancer %q: want %s, %s, %s or %s", n,
				BalancerCooperativeSticky, BalancerRange, BalancerRoundRobin, BalancerSticky)
		}
	}
	return out, nil
}
