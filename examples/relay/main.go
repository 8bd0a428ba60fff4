// Command relay moves records between a strom log and Kafka, at-least-once,
// or exactly once with --exactly-once, in the direction --direction says.
//
//	go run ./examples/relay --direction kafka-to-log --brokers 127.0.0.1:9092 --dir /tmp/strom-log --from ssh --to ssh
//	go run ./examples/relay --direction log-to-kafka --brokers 127.0.0.1:9092 --dir /tmp/strom-log --from ssh --to ssh-back --state /tmp/relay-state
//	go run ./examples/relay --direction log-to-kafka --brokers 127.0.0.1:9092 --dir /tmp/strom-log --from ssh --to ssh-back --exactly-once
//
// kafka-to-log reads the Kafka topic --from with a consumer group (--group)
// and appends each record, with its key, headers and timestamp, to the log
// topic --to (created with --partitions partitions, 3 by default: with the
// same count on both sides a key lands in the same partition number,
// murmur2 on both), creating the log directory --dir too when it does not
// exist. Its position is the group's committed offsets, and a
// record's offset is committed only after the record was appended to the
// log: a crash between the two appends it again on restart, never skips it.
//
// log-to-kafka reads every partition of the log topic --from (its --dir
// must exist: a missing one is a startup error, not a log to wait on; a
// topic --from not in it yet is waited for, as its writer may not have
// created it, each try printed on stderr as "attempt N: ...", so a
// misspelt name retries until the relay is stopped), from
// the positions in a checkpoint.FileStore in --state, and produces each record
// to the Kafka topic --to (acks=all, idempotent, murmur2 on the key); a
// position is saved only once Kafka acknowledged every record below it.
//
// # Exactly once
//
// log-to-kafka with --exactly-once runs the pipeline under
// stream.ExactlyOnce with a transactional sink.Kafka
// (sink.KafkaTransactionalID) as its checkpoint store instead of the
// FileStore (--state is not needed): every 100 ms one Kafka transaction
// commits the records produced since the last one together with the log
// positions past them, in the compacted topic <transactional id>-positions
// (sink.KafkaPositionsTopic). A reader of --to that reads only committed
// records (read_committed) sees each log record once, across crashes: a
// relay killed mid-transaction leaves that transaction open, its restart
// aborts it (it takes the transactional id over) and starts from the
// committed positions. Readers of uncommitted records also see the aborted
// records. log-to-kafka reads --from with source.ReadCommitted, in both
// modes: only records a kafka-to-log relay with --exactly-once committed
// are relayed, never those of its open or killed transactions, which its
// restart truncates and writes again (a topic no such relay writes is
// read whole, as appended). The transactional id (--transactional-id) must stay the same
// across restarts and be used by one relay at a time: its default,
// <group>-<from>-<to> (strom-relay-ssh-ssh-back above), is stable for a
// relay that keeps its flags; give a second relay of the same topics its
// own --group or --transactional-id. A relay fenced by a newer one with
// its id (sink.ErrFenced) exits with an error. A transaction that cannot
// commit is aborted and the pipeline restarts from the committed
// positions, with backoff, printing the attempt on stderr.
//
// kafka-to-log with --exactly-once runs the pipeline under
// stream.ExactlyOnce with the sink.LogSink of --to as its checkpoint store:
// every 100 ms the records appended since the last transaction and the
// Kafka positions past them are committed together in the topic's
// transaction file (exactly-once.txn), and a restart first cuts what was
// appended after the last commit. The positions are the log's, not the
// group's: the group's commits do not move (a partition assigned starts
// where the log's transactions say). It reads --from with read_committed,
// so records of aborted Kafka transactions (a log-to-kafka relay's under
// --exactly-once) are never copied.
//
// Every record written carries two headers naming where it came from:
// strom.relay.partition and strom.relay.offset (its source partition and
// offset, decimal), replacing any the record had. At startup the relay
// reads the last records it wrote (up to 10,000 per partition) to learn the
// highest source offset already relayed per source partition, and counts a
// record read again at or below it as delivered again: what at-least-once
// costs after a crash.
//
// Both directions run the pipeline under stream.Forever: a broker that goes
// away, or a topic that does not exist yet, is retried with backoff and the
// relay resumes from its last position. log-to-kafka also retries a record
// Kafka did not acknowledge (within --timeout) with a new producer client,
// from its saved positions, printing each failed attempt on stderr.
//
// # Records too large for Kafka
//
// log-to-kafka cannot send a record larger, as a record batch of its own
// (sink.KafkaRecordBytes: the key, value and headers, the relay's two
// included, and about 75 bytes of framing), than --max-record-bytes: the
// producer's limit, 1,000,012 bytes by default (franz-go's; a Kafka
// topic takes 1,048,588 by default). Retrying cannot help, so by default
// (--on-too-large=fail) the relay stops at once with an error naming the
// Kafka topic, the log topic, partition and offset of the record, its size
// and the limit (sink.ErrRecordTooLarge), and exits 1; its position stays
// before the record, so a restart meets it again. --on-too-large=skip
// drops each such record and goes on (its position is saved past it),
// logging one line on stderr per record dropped, naming its log topic,
// partition and offset, its size and the limit, and counting it in /stats
// (skipped);
// --on-too-large=dead-letter appends it, with headers naming the error and
// where it was read (sink.DeadLetter), to the log topic --dead-letter in
// --dir (created with one partition if missing; synced before the
// position passes the record), and goes on. Raising --max-record-bytes
// sends larger records, up to what the Kafka topic takes: its
// max.message.bytes (by default the broker's message.max.bytes,
// 1,048,588), which a larger batch would exceed (the broker refuses it, and
// the relay stops as above). Under --exactly-once, dead-letter is refused:
// a log topic cannot join the Kafka transaction.
//
// # Consumer group balancers
//
// kafka-to-log offers its group the balancers of --balancer, most
// preferred first; the default, cooperative-sticky,range
// (source.DefaultKafkaBalancers), lets members of other clients on their
// defaults share the group: librdkafka's (kcat, confluent-kafka-*) offer
// range,roundrobin, and the group then runs range, an eager protocol in
// which every rebalance revokes every partition of every member first;
// the Java client's offer range,cooperative-sticky. Relays alone run
// cooperative-sticky. --balancer=cooperative-sticky refuses members that
// do not offer it (franz-go's default).
//
// # Flags and environment
//
// A flag given on the command line wins over its environment variable,
// which wins over the default. A variable that does not parse, or a value
// the relay refuses, stops it at startup (exit 2) with an error naming
// where the value came from: `--on-too-large "bogus": ...` for the command
// line, `environment STROM_ON_TOO_LARGE="bogus" (--on-too-large): ...` for
// the environment.
//
//	--direction   STROM_DIRECTION   kafka-to-log or log-to-kafka (required)
//	--brokers     KAFKA_BROKERS     Kafka bootstrap brokers, comma-separated (required)
//	--dir         STROM_DIR         log directory (required)
//	--from        STROM_FROM        topic to read (required)
//	--to          STROM_TO          topic to write (required)
//	--partitions  STROM_PARTITIONS  partitions of the log topic kafka-to-log creates, default 3
//	--group       STROM_GROUP       Kafka consumer group of kafka-to-log, default "strom-relay"
//	--state       STROM_STATE       checkpoint folder of log-to-kafka (required there, unless --exactly-once)
//	--exactly-once STROM_EXACTLY_ONCE  exactly once: log-to-kafka in Kafka transactions, kafka-to-log in the log's (see above); default false
//	--transactional-id STROM_TRANSACTIONAL_ID  log-to-kafka --exactly-once: the Kafka transactional id,
//	                                   default <group>-<from>-<to>; its positions topic is <id>-positions
//	--timeout     STROM_KAFKA_TIMEOUT  log-to-kafka: how long a record may wait for Kafka's
//	                                   acknowledgement (sink.KafkaDeliveryTimeout); kafka-to-log:
//	                                   how long joining the group or a commit may take
//	                                   (source.KafkaTimeout); default 30s
//	--session-timeout STROM_KAFKA_SESSION_TIMEOUT  kafka-to-log: the consumer group
//	                                   session timeout (heartbeats every third of it); default 45s.
//	                                   A relay killed with kill -9 holds its partitions
//	                                   until it expires, so a restart waits that long
//	--rebalance-timeout STROM_KAFKA_REBALANCE_TIMEOUT  kafka-to-log: how long a rebalance
//	                                   waits for every member to rejoin (kgo.RebalanceTimeout,
//	                                   Kafka's rebalance.timeout.ms); default 60s. franz-go's
//	                                   kfake v0.0.0-20260918054303 waits this long for a member
//	                                   killed with kill -9 (its session expiring does not end
//	                                   the wait), so the torture sets it to 2s
//	--instance-id STROM_KAFKA_INSTANCE_ID  kafka-to-log: a static group member id
//	                                   (KIP-345, kgo.InstanceID); default none. A relay
//	                                   restarted with the same id takes its partitions back at
//	                                   once, without a rebalance or waiting for the old
//	                                   session to expire; give each running relay its own
//	--balancer    STROM_KAFKA_BALANCER  kafka-to-log: the group balancers offered, comma-separated,
//	                                   most preferred first: cooperative-sticky, range,
//	                                   roundrobin, sticky; default cooperative-sticky,range
//	                                   (see "Consumer group balancers"). Spaces around a name
//	                                   are trimmed; an empty entry ("", "range,,sticky") is refused
//	--max-record-bytes STROM_MAX_RECORD_BYTES  log-to-kafka: the producer's limit on a record
//	                                   batch, so on a record, in bytes (sink.KafkaMaxRecordBytes);
//	                                   default 1000012. The topic's max.message.bytes must allow it
//	--on-too-large STROM_ON_TOO_LARGE  log-to-kafka: a record over it: fail (stop, naming it; the
//	                                   default), skip, or dead-letter (see "Records too large")
//	--dead-letter STROM_DEAD_LETTER  log-to-kafka --on-too-large=dead-letter: the log topic in --dir
//	                                   the records too large go to (required there, refused otherwise)
//	--addr        STROM_ADDR        HTTP address, default 127.0.0.1:7080
//	--batch       STROM_BATCH       records per read: Kafka records per poll, and about 128 bytes
//	                                each of log records; default 256. A position is saved at most
//	                                every 200ms, and only below finished batches
//	--delay       STROM_DELAY       time spent per record, default 0 (the demo slows the
//	                                relays down with it so its kill -9 lands mid-way)
//
// # Test hook
//
//	STROM_RELAY_CRASH_AFTER_APPEND=N
//
// For tests only: kafka-to-log sends itself SIGKILL right after the
// record that brings the count of records appended to the log by this
// process to N was appended, and before that record is finished, so before
// its offset can be committed to Kafka: the crash between append and commit
// that at-least-once must survive. log-to-kafka ignores it.
//
// # HTTP
//
//	GET /stats   {"direction","relayed","deliveredAgain","lastIn":{partition:offset},
//	              "lastOut":{partition:offset},"positions":{partition:offset},"lag","reconnects",
//	              "skipped"}
//	GET /metrics the process's OpenTelemetry metrics in Prometheus's text format (see the
//	             metrics package for the series): the pipeline's (named by --direction)
//	             and, kafka-to-log, the log's appends
//	GET /health  200 "ok"
//
// relayed counts records this process wrote (handed to the sink);
// deliveredAgain those of them already relayed before a restart (with
// --exactly-once, those already visible to read_committed readers: 0,
// unless something is wrong); lastIn the
// last source offset read per source partition; lastOut the highest
// offset written per destination partition (log-to-kafka: the Kafka
// topic's high watermarks minus one); positions the saved positions (log-to-kafka: FileStore, or
// the committed positions with --exactly-once; kafka-to-log: the group's commits); lag the records
// of the source not yet
// covered by a position; skipped the records too large for Kafka that
// log-to-kafka --on-too-large=skip dropped (counted in relayed too), each
// also logged on stderr as it is dropped:
//
//	relay log-to-kafka: skipped a record too large for Kafka topic back (--on-too-large=skip): log topic mid partition 0 offset 1, 1000122 bytes over the limit of 1000012 bytes (--max-record-bytes)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/kafkaread"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/metrics"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// The headers naming a relayed record's source partition and offset.
const (
	headerPartition = "strom.relay.partition"
	headerOffset    = "strom.relay.offset"
)

// tailRecords is how many of its last records per partition the relay
// reads at startup to learn what it had relayed.
const tailRecords = 10_000

const (
	toLog   = "kafka-to-log"
	toKafka = "log-to-kafka"
)

type config struct {
	direction  string
	brokers    []string
	dir        string
	from, to   string
	partitions int
	group      string
	state      string
	addr       string
	delay      time.Duration
	batch      int
	timeout    time.Duration
	session    time.Duration // consumer group session timeout
	rebalance  time.Duration // consumer group rebalance timeout
	instance   string        // static group member id; "" for a dynamic member
	eos        bool          // --exactly-once
	txnID      string        // --transactional-id, defaulted to <group>-<from>-<to> with eos
	balancers  []string      // --balancer: kafka-to-log's group balancers, by name
	maxRecord  int           // --max-record-bytes: log-to-kafka's producer limit
	onTooLarge string        // --on-too-large: tooLargeFail, tooLargeSkip or tooLargeDeadLetter
	deadLetter string        // --dead-letter: the log topic of log-to-kafka's dead letters
	crashAfter int64         // STROM_RELAY_CRASH_AFTER_APPEND, the test hook; 0 = off
}

// What log-to-kafka does with a record too large for Kafka (--on-too-large).
const (
	tooLargeFail       = "fail"
	tooLargeSkip       = "skip"
	tooLargeDeadLetter = "dead-letter"
)

// crashAfterAppendEnv names the test hook (see the package doc).
const crashAfterAppendEnv = "STROM_RELAY_CRASH_AFTER_APPEND"

func main() { service.Main("relay", parseFlags, run) }

// flagEnv names the environment variable of each flag that has one.
var flagEnv = map[string]string{
	"direction": "STROM_DIRECTION", "brokers": "KAFKA_BROKERS", "dir": "STROM_DIR", "from": "STROM_FROM",
	"to": "STROM_TO", "partitions": "STROM_PARTITIONS", "group": "STROM_GROUP", "state": "STROM_STATE",
	"addr": "STROM_ADDR", "delay": "STROM_DELAY", "batch": "STROM_BATCH", "timeout": "STROM_KAFKA_TIMEOUT",
	"session-timeout": "STROM_KAFKA_SESSION_TIMEOUT", "rebalance-timeout": "STROM_KAFKA_REBALANCE_TIMEOUT",
	"instance-id": "STROM_KAFKA_INSTANCE_ID", "exactly-once": "STROM_EXACTLY_ONCE",
	"transactional-id": "STROM_TRANSACTIONAL_ID", "balancer": "STROM_KAFKA_BALANCER",
	"max-record-bytes": "STROM_MAX_RECORD_BYTES", "on-too-large": "STROM_ON_TOO_LARGE", "dead-letter": "STROM_DEAD_LETTER",
}

func parseFlags(args []string) (config, error) {
	var env service.Env
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	direction := fs.String("direction", env.String("STROM_DIRECTION", ""), "kafka-to-log or log-to-kafka (env STROM_DIRECTION)")
	brokers := fs.String("brokers", env.String("KAFKA_BROKERS", ""), "Kafka brokers, comma-separated (env KAFKA_BROKERS)")
	dir := fs.String("dir", env.String("STROM_DIR", ""), "log directory (env STROM_DIR)")
	from := fs.String("from", env.String("STROM_FROM", ""), "topic to read (env STROM_FROM)")
	to := fs.String("to", env.String("STROM_TO", ""), "topic to write (env STROM_TO)")
	partitions := fs.Int("partitions", int(env.Int("STROM_PARTITIONS", 3)), "partitions of the log topic kafka-to-log creates (env STROM_PARTITIONS)")
	group := fs.String("group", env.String("STROM_GROUP", "strom-relay"), "Kafka consumer group of kafka-to-log (env STROM_GROUP)")
	state := fs.String("state", env.String("STROM_STATE", ""), "checkpoint folder of log-to-kafka (env STROM_STATE)")
	addr := fs.String("addr", env.String("STROM_ADDR", "127.0.0.1:7080"), "HTTP address (env STROM_ADDR)")
	delay := fs.Duration("delay", env.Duration("STROM_DELAY", 0), "time spent per record (env STROM_DELAY)")
	batch := fs.Int("batch", int(env.Int("STROM_BATCH", 256)), "records per read (Kafka), about 128 bytes each from the log (env STROM_BATCH)")
	timeout := fs.Duration("timeout", env.Duration("STROM_KAFKA_TIMEOUT", sink.DefaultKafkaDeliveryTimeout), "Kafka delivery (log-to-kafka) or group and commit (kafka-to-log) timeout (env STROM_KAFKA_TIMEOUT)")
	session := fs.Duration("session-timeout", env.Duration("STROM_KAFKA_SESSION_TIMEOUT", 45*time.Second), "consumer group session timeout of kafka-to-log (env STROM_KAFKA_SESSION_TIMEOUT)")
	rebalance := fs.Duration("rebalance-timeout", env.Duration("STROM_KAFKA_REBALANCE_TIMEOUT", 60*time.Second), "how long a rebalance of kafka-to-log's group waits for members to rejoin (env STROM_KAFKA_REBALANCE_TIMEOUT)")
	instance := fs.String("instance-id", env.String("STROM_KAFKA_INSTANCE_ID", ""), "static consumer group member id of kafka-to-log (env STROM_KAFKA_INSTANCE_ID)")
	eos := fs.Bool("exactly-once", env.Bool("STROM_EXACTLY_ONCE", false), "exactly once: log-to-kafka in Kafka transactions, kafka-to-log in the log's (env STROM_EXACTLY_ONCE)")
	txnID := fs.String("transactional-id", env.String("STROM_TRANSACTIONAL_ID", ""), "log-to-kafka --exactly-once: Kafka transactional id, default <group>-<from>-<to> (env STROM_TRANSACTIONAL_ID)")
	balancer := fs.String("balancer", env.String("STROM_KAFKA_BALANCER", source.DefaultKafkaBalancers), "kafka-to-log: the group balancers offered, most preferred first: cooperative-sticky, range, roundrobin, sticky (env STROM_KAFKA_BALANCER)")
	maxRecord := fs.Int("max-record-bytes", int(env.Int("STROM_MAX_RECORD_BYTES", sink.DefaultKafkaMaxRecordBytes)), "log-to-kafka: the largest record batch the producer sends, so the largest record, in bytes; the topic's max.message.bytes must allow it (env STROM_MAX_RECORD_BYTES)")
	onTooLarge := fs.String("on-too-large", env.String("STROM_ON_TOO_LARGE", tooLargeFail), "log-to-kafka: a record over --max-record-bytes: fail (stop, naming it), skip, or dead-letter (to --dead-letter) (env STROM_ON_TOO_LARGE)")
	deadLetter := fs.String("dead-letter", env.String("STROM_DEAD_LETTER", ""), "log-to-kafka --on-too-large=dead-letter: the log topic in --dir the records go to, created with 1 partition if missing (env STROM_DEAD_LETTER)")
	crashAfter := env.Int(crashAfterAppendEnv, 0)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	// given names a flag's value in an error: the environment variable
	// that set it, as env.Err does for one that does not parse, or the flag.
	given := func(name string) string { return service.Given(fs, name, flagEnv[name]) }
	if env.Err != nil {
		return config{}, env.Err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := config{direction: *direction, dir: *dir, from: *from, to: *to, partitions: *partitions,
		group: *group, state: *state, addr: *addr, delay: *delay, batch: *batch,
		timeout: *timeout, session: *session, rebalance: *rebalance, instance: *instance, crashAfter: int64(crashAfter),
		eos: *eos, txnID: *txnID, maxRecord: *maxRecord, onTooLarge: *onTooLarge, deadLetter: *deadLetter}
	balancers, err := splitBalancers(*balancer)
	if err != nil {
		return config{}, fmt.Errorf("%s: %w", given("balancer"), err)
	}
	cfg.balancers = balancers
	if cfg.eos && cfg.txnID == "" && cfg.direction == toKafka {
		cfg.txnID = cfg.group + "-" + cfg.from + "-" + cfg.to
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.brokers = append(cfg.brokers, b)
		}
	}
	switch {
	case cfg.direction != toLog && cfg.direction != toKafka:
		return config{}, fmt.Errorf("%s: want %s or %s", given("direction"), toLog, toKafka)
	case len(cfg.brokers) == 0:
		return config{}, errors.New("--brokers (or KAFKA_BROKERS) is required")
	case cfg.dir == "":
		return config{}, errors.New("--dir (or STROM_DIR) is required")
	case cfg.from == "" || cfg.to == "":
		return config{}, errors.New("--from and --to are required")
	case cfg.direction == toKafka && cfg.state == "" && !cfg.eos:
		return config{}, errors.New("--state (or STROM_STATE) is required for log-to-kafka, unless --exactly-once")
	case cfg.txnID != "" && !cfg.eos:
		return config{}, fmt.Errorf("%s is for --exactly-once", given("transactional-id"))
	case cfg.txnID != "" && cfg.direction == toLog:
		return config{}, fmt.Errorf("%s is for log-to-kafka: kafka-to-log --exactly-once commits in the log (the sink.LogSink's transaction file), not in Kafka", given("transactional-id"))
	case cfg.batch < 1:
		return config{}, fmt.Errorf("%s: must be at least 1", given("batch"))
	case cfg.delay < 0:
		return config{}, fmt.Errorf("%s: must not be negative", given("delay"))
	case cfg.timeout <= 0:
		return config{}, fmt.Errorf("%s: want more than 0", given("timeout"))
	case cfg.session < 30*time.Millisecond:
		return config{}, fmt.Errorf("%s: want at least 30ms", given("session-timeout"))
	case cfg.rebalance < cfg.session:
		return config{}, fmt.Errorf("%s: want at least the session timeout %v", given("rebalance-timeout"), cfg.session)
	case cfg.partitions < 1 || cfg.partitions > log.MaxPartitions:
		return config{}, fmt.Errorf("%s: want 1 to %d", given("partitions"), log.MaxPartitions)
	}
	if err := cfg.checkKafkaSizes(*balancer, given); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// splitBalancers splits the value of --balancer into its names: the
// entries between commas, each trimmed of surrounding spaces (as --brokers'
// are: " range" is range). An empty entry ("", "range,,sticky", "range,")
// is an error naming its place: it is a typo, not a request for a default.
func splitBalancers(v string) ([]string, error) {
	entries := strings.Split(v, ",")
	names := make([]string, 0, len(entries))
	for i, b := range entries {
		b = strings.TrimSpace(b)
		if b == "" {
			return nil, fmt.Errorf("entry %d of %d is empty: want names separated by single commas, of cooperative-sticky, range, roundrobin, sticky", i+1, len(entries))
		}
		names = append(names, b)
	}
	return names, nil
}

// checkKafkaSizes checks --balancer (given as balancer), which is
// kafka-to-log's, and --max-record-bytes, --on-too-large and --dead-letter,
// which are log-to-kafka's. given names a flag's value in an error, by the
// environment variable that set it if one did.
func (cfg *config) checkKafkaSizes(balancer string, given func(flag string) string) error {
	if cfg.direction == toLog {
		var set string
		switch {
		case cfg.maxRecord != sink.DefaultKafkaMaxRecordBytes:
			set = given("max-record-bytes")
		case cfg.onTooLarge != tooLargeFail:
			set = given("on-too-large")
		case cfg.deadLetter != "":
			set = given("dead-letter")
		}
		if set != "" {
			return fmt.Errorf("%s: --max-record-bytes, --on-too-large and --dead-letter are for log-to-kafka: kafka-to-log produces nothing to Kafka", set)
		}
		if _, err := source.Kafka(cfg.brokers, cfg.group, []string{cfg.from}, source.KafkaBalancers(cfg.balancers...)); err != nil {
			return fmt.Errorf("%s: %w", given("balancer"), err)
		}
		return nil
	}
	switch {
	case balancer != source.DefaultKafkaBalancers:
		return fmt.Errorf("%s is for kafka-to-log: log-to-kafka joins no consumer group", given("balancer"))
	case cfg.maxRecord < 512 || cfg.maxRecord > 1<<30:
		return fmt.Errorf("%s: want 512 to %d (franz-go's bounds); the topic's max.message.bytes must allow it", given("max-record-bytes"), 1<<30)
	case cfg.onTooLarge != tooLargeFail && cfg.onTooLarge != tooLargeSkip && cfg.onTooLarge != tooLargeDeadLetter:
		return fmt.Errorf("%s: want %s, %s or %s", given("on-too-large"), tooLargeFail, tooLargeSkip, tooLargeDeadLetter)
	case cfg.onTooLarge == tooLargeDeadLetter && cfg.deadLetter == "":
		return fmt.Errorf("%s needs --dead-letter (or STROM_DEAD_LETTER): the log topic in --dir the records too large go to", given("on-too-large"))
	case cfg.onTooLarge != tooLargeDeadLetter && cfg.deadLetter != "":
		return fmt.Errorf("%s is for --on-too-large=dead-letter, not %s", given("dead-letter"), cfg.onTooLarge)
	case cfg.deadLetter == cfg.from:
		return fmt.Errorf("%s: the topic the relay reads (--from): a dead letter would be read again", given("dead-letter"))
	case cfg.onTooLarge == tooLargeDeadLetter && cfg.eos:
		return errors.New("--on-too-large=dead-letter with --exactly-once: a dead letter goes to a log topic, which cannot join the Kafka transaction; use fail or skip")
	}
	if cfg.deadLetter != "" {
		if err := log.ValidateTopicName(cfg.deadLetter); err != nil {
			return fmt.Errorf("%s: %w", given("dead-letter"), err)
		}
	}
	return nil
}

// relay holds the counters /stats reports.
type relay struct {
	cfg config

	mu             sync.Mutex
	relayed        int64
	deliveredAgain int64
	reconnects     int64
	skipped        int64 // records too large dropped under --on-too-large=skip
	lastIn         map[int32]int64
	lastOut        map[int32]int64
	positions      map[int32]int64
	appended       int64                                                 // records that went past the log sink, for crashAfterAppend
	before         map[int32]int64                                       // highest source offset relayed before this process, per source partition
	lag            func(context.Context) (int64, map[int32]int64, error) // lag and saved positions
	lastOutFn      func(context.Context) map[int32]int64                 // log-to-kafka: Kafka's high watermarks - 1
	stderr         io.Writer                                             // where logf writes; nil: os.Stderr
}

func run(cfg config) error {
	ln, err := service.Listen(cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	metricsHandler, err := metrics.Handler("relay")
	if err != nil {
		return err
	}
	var opts []log.Option
	if cfg.direction == toLog {
		opts = append(opts, log.CreateIfMissing()) // it writes, and creates, the log topic --to
	}
	lg, err := log.Open(cfg.dir, opts...)
	if err != nil {
		return err
	}
	defer lg.Close()
	r := &relay{cfg: cfg, lastIn: map[int32]int64{}, lastOut: map[int32]int64{}, positions: map[int32]int64{}}

	var pipeline func(ctx context.Context) error
	switch cfg.direction {
	case toLog:
		pipeline, err = r.kafkaToLog(ctx, lg)
	default:
		pipeline, err = r.logToKafka(ctx, lg)
	}
	if err != nil {
		return err
	}

	mux := r.routes(metricsHandler)
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux) }()
	fmt.Fprintf(os.Stderr, "relay %s: %s -> %s; stats on http://%s/stats\n", cfg.direction, cfg.from, cfg.to, ln.Addr())

	relayed := make(chan error, 1)
	go func() { relayed <- pipeline(ctx) }()
	var relayErr, serveErr error
	select {
	case relayErr = <-relayed:
		cancel()
		serveErr = <-served
	case serveErr = <-served:
		cancel()
		relayErr = <-relayed
	}
	if errors.Is(relayErr, sink.ErrRecordTooLarge) {
		// The sink's message names its Go option; a relay user has flags.
		return fmt.Errorf("%w\nrelay: raise the producer's limit with --max-record-bytes (up to the topic's max.message.bytes), or pass such records on with --on-too-large=skip or --on-too-large=dead-letter --dead-letter TOPIC", relayErr)
	}
	if relayErr != nil && !errors.Is(relayErr, context.Canceled) {
		return relayErr
	}
	if serveErr != nil {
		return fmt.Errorf("http: %w", serveErr)
	}
	return nil
}

// kafkaToLog builds the Kafka -> log pipeline runner.
func (r *relay) kafkaToLog(ctx context.Context, lg *log.Log) (func(context.Context) error, error) {
	out, err := lg.CreateTopic(r.cfg.to, r.cfg.partitions)
	if err != nil {
		return nil, err
	}
	r.before = logTail(out)
	adm, err := admin(r.cfg.brokers)
	if err != nil {
		return nil, err
	}
	logSink := sink.Log(out)
	r.lag = func(ctx context.Context) (int64, map[int32]int64, error) {
		commits, err := adm.FetchOffsetsForTopics(ctx, r.cfg.group, r.cfg.from)
		if err != nil {
			return 0, nil, err
		}
		if r.cfg.eos {
			// The positions are the log's transactions'.
			ends, err := adm.ListEndOffsets(ctx, r.cfg.from)
			if err != nil {
				return 0, nil, err
			}
			var lag int64
			positions := map[int32]int64{}
			var lerr error
			ends.Each(func(e kadm.ListedOffset) {
				pos, found, err := logSink.Load(ctx, e.Topic, e.Partition)
				if err != nil {
					lerr = err
				}
				if found {
					positions[e.Partition] = pos.Offset
				}
				lag += max(e.Offset-pos.Offset, 0)
			})
			return lag, positions, lerr
		}
		ends, err := adm.ListEndOffsets(ctx, r.cfg.from)
		if err != nil {
			return 0, nil, err
		}
		var lag int64
		positions := map[int32]int64{}
		ends.Each(func(e kadm.ListedOffset) {
			c, ok := commits.Lookup(e.Topic, e.Partition)
			pos := int64(0)
			if ok && c.At >= 0 {
				pos = c.At
				positions[e.Partition] = pos
			}
			lag += max(e.Offset-pos, 0)
		})
		return lag, positions, nil
	}
	return func(ctx context.Context) error {
		defer adm.Close()
		return stream.Forever(ctx, func() stream.Runner {
			opts := []kgo.Opt{kgo.SessionTimeout(r.cfg.session), kgo.HeartbeatInterval(r.cfg.session / 3), kgo.RebalanceTimeout(r.cfg.rebalance)}
			if r.cfg.instance != "" {
				opts = append(opts, kgo.InstanceID(r.cfg.instance))
			}
			if r.cfg.eos {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			src, err := source.Kafka(r.cfg.brokers, r.cfg.group, []string{r.cfg.from}, source.KafkaTimeout(r.cfg.timeout),
				source.KafkaMaxRecords(r.cfg.batch), source.KafkaBalancers(r.cfg.balancers...), source.KafkaClientOpts(opts...))
			if err != nil {
				return failed{err}
			}
			if r.cfg.eos {
				return stream.From(src, stream.WithName(r.cfg.direction), stream.ExactlyOnce()).
					Map(r.tag).
					To(logSink).
					Tap(r.wroteLog(out)).
					Tap(r.crashAfterAppend).
					Checkpointing(logSink)
			}
			return stream.From(src, stream.WithName(r.cfg.direction)).
				Map(r.tag).
				To(sink.Log(out)).
				Tap(r.wroteLog(out)).
				Tap(r.crashAfterAppend).
				Checkpointing(src)
		}, r.foreverOpts()...)
	}, nil
}

// logToKafka builds the log -> Kafka pipeline runner.
func (r *relay) logToKafka(ctx context.Context, lg *log.Log) (func(context.Context) error, error) {
	var file *checkpoint.FileStore
	if !r.cfg.eos {
		var err error
		if file, err = checkpoint.NewFileStore(r.cfg.state); err != nil {
			return nil, err
		}
	}
	out, err := r.kafkaSink()
	if err != nil {
		return nil, err
	}
	// store is where the positions are: the FileStore, or under
	// --exactly-once the sink itself, replaced with it after a failure.
	var mu sync.Mutex
	store := func() checkpoint.Store {
		mu.Lock()
		defer mu.Unlock()
		if file != nil {
			return file
		}
		return out
	}
	tooLarge, err := r.tooLargeOpts(lg)
	if err != nil {
		out.Close()
		return nil, err
	}
	r.before = kafkaTail(ctx, out.Client(), r.cfg.to)
	// Its own client: the sink's is replaced after a failure.
	adm, err := admin(r.cfg.brokers)
	if err != nil {
		out.Close()
		return nil, err
	}
	r.lastOutFn = func(ctx context.Context) map[int32]int64 {
		ends, err := adm.ListEndOffsets(ctx, r.cfg.to)
		if err != nil {
			return nil
		}
		m := map[int32]int64{}
		ends.Each(func(e kadm.ListedOffset) {
			if e.Err == nil && e.Offset > 0 {
				m[e.Partition] = e.Offset - 1
			}
		})
		return m
	}
	r.lag = func(ctx context.Context) (int64, map[int32]int64, error) {
		t, err := lg.Topic(r.cfg.from)
		if err != nil {
			return 0, nil, err
		}
		st := store()
		var lag int64
		positions := map[int32]int64{}
		for p := range int32(t.Partitions()) {
			part, err := t.Partition(p)
			if err != nil {
				return 0, nil, err
			}
			pos, found, err := st.Load(ctx, r.cfg.from, p)
			if err != nil {
				return 0, nil, err
			}
			if found {
				positions[p] = pos.Offset
			}
			lag += max(part.HighWatermark()-pos.Offset, 0)
		}
		return lag, positions, nil
	}
	return func(ctx context.Context) error {
		defer adm.Close()
		backoff := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			err := stream.Forever(ctx, func() stream.Runner {
				st := store()
				var opts []stream.Option
				if r.cfg.eos {
					opts = append(opts, stream.ExactlyOnce())
				}
				s := stream.From(source.Topic(lg, r.cfg.from, source.FromStore(st), source.MaxBytes(r.cfg.batch*128), source.ReadCommitted()),
					append(opts, stream.WithName(r.cfg.direction))...).
					Map(r.tag)
				if tooLarge != nil {
					// Each record too large meets --on-too-large alone,
					// before the sink: the sink's own policy would apply
					// to its whole batch.
					s = s.Tap(out.CheckSize, tooLarge...)
				}
				return s.To(out).Checkpointing(st)
			}, r.foreverOpts()...)
			out.Close()
			if err == nil || ctx.Err() != nil || !r.retrySink(err) {
				return err
			}
			r.mu.Lock()
			r.reconnects++
			r.mu.Unlock()
			r.logf("sink attempt %d: %v", attempt, err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			next, err := r.kafkaSink()
			if err != nil {
				return err
			}
			mu.Lock()
			out = next
			mu.Unlock()
		}
	}, nil
}

// kafkaSink returns the sink of log-to-kafka: transactional under
// --exactly-once, with the producer's limit of --max-record-bytes.
func (r *relay) kafkaSink() (*sink.KafkaSink, error) {
	opts := []sink.KafkaOption{sink.KafkaDeliveryTimeout(r.cfg.timeout), sink.KafkaMaxRecordBytes(r.cfg.maxRecord)}
	if r.cfg.eos {
		opts = append(opts, sink.KafkaTransactionalID(r.cfg.txnID))
	}
	return sink.Kafka(r.cfg.brokers, r.cfg.to, opts...)
}

// tooLargeStage names the stage that checks each record's size against
// --max-record-bytes under --on-too-large=skip or dead-letter.
const tooLargeStage = "too-large"

// tooLargeOpts returns the options of the stage checking each record's
// size before the sink, for --on-too-large: the default policy for fail
// (the relay stops, naming the record; checked before the sink, so that no
// record after it is sent: the sink produces a batch's records together,
// and the ones after a record it refuses could reach Kafka before the
// refusal), Skip, or DeadLetter to the log topic --dead-letter (opened, or
// created with one partition), synced before the position passes the
// record.
func (r *relay) tooLargeOpts(lg *log.Log) ([]stream.StageOption, error) {
	switch r.cfg.onTooLarge {
	case tooLargeFail:
		return []stream.StageOption{stream.Name(tooLargeStage)}, nil
	case tooLargeSkip:
		return []stream.StageOption{stream.Name(tooLargeStage), stream.Skip(), stream.OnError(r.skippedTooLarge)}, nil
	case tooLargeDeadLetter:
		dlq, err := lg.Topic(r.cfg.deadLetter)
		if errors.Is(err, log.ErrUnknownTopic) {
			dlq, err = lg.CreateTopic(r.cfg.deadLetter, 1)
		}
		if err != nil {
			return nil, fmt.Errorf("--dead-letter %s: %w", r.cfg.deadLetter, err)
		}
		return []stream.StageOption{stream.Name(tooLargeStage), stream.DeadLetter(sink.DeadLetter(dlq, sink.Synced()))}, nil
	}
	return nil, nil
}

// skippedTooLarge logs, on stderr, a record --on-too-large=skip drops, naming
// its log topic, partition and offset, its size and the limit, and counts it
// in /stats (skipped). It is the too-large stage's OnError hook: that
// stage's only failure is a record too large (sink.KafkaSink.CheckSize).
func (r *relay) skippedTooLarge(f stream.Failure) {
	size, limit := -1, r.cfg.maxRecord
	var big *sink.RecordTooLargeError
	if errors.As(f.Err, &big) {
		size, limit = big.Bytes, big.MaxBytes
	}
	r.mu.Lock()
	r.skipped++
	r.mu.Unlock()
	r.logf("skipped a record too large for Kafka topic %s (--on-too-large=skip): log topic %s partition %d offset %d, %d bytes over the limit of %d bytes (--max-record-bytes)",
		r.cfg.to, f.Topic, f.Partition, f.Offset, size, limit)
}

// logf prints one line on the relay's stderr, after "relay DIRECTION: ".
func (r *relay) logf(format string, args ...any) {
	var w io.Writer = os.Stderr
	if r.stderr != nil {
		w = r.stderr
	}
	fmt.Fprintf(w, "relay %s: %s\n", r.cfg.direction, fmt.Sprintf(format, args...))
}

// retrySink reports whether log-to-kafka runs again, with a new sink,
// after its pipeline failed with err. stream.Forever retries the source,
// not the sink. A record Kafka did not acknowledge (the broker went away,
// or came back as a new cluster whose topic has a new ID; the topic does
// not exist yet) is retried, with a new client, from the saved positions:
// nothing past them was acknowledged. Under --exactly-once so is every
// failure of the transactions (an aborted one, brokers that cannot be
// reached when they begin), from the committed positions, except a fenced
// sink (another relay took the transactional id over: this one stops), a
// corrupt position, and a pipeline ExactlyOnce refuses. A record too large
// for Kafka (sink.ErrRecordTooLarge) is never retried, in either mode: it
// would fail again forever, holding its partition.
func (r *relay) retrySink(err error) bool {
	var pe *sink.ProduceError
	switch {
	case errors.Is(err, sink.ErrFenced), errors.Is(err, sink.ErrRecordTooLarge):
		return false
	case errors.As(err, &pe):
		return true
	case !r.cfg.eos:
		return false
	case errors.Is(err, checkpoint.ErrCorrupt), errors.Is(err, stream.ErrNotExactlyOnce):
		return false
	default:
		return true
	}
}

func (r *relay) foreverOpts() []stream.ConsumeOption {
	return []stream.ConsumeOption{
		stream.WithBackoff(50*time.Millisecond, 2*time.Second),
		stream.OnSourceError(func(err error, attempt int) {
			r.mu.Lock()
			r.reconnects++
			r.mu.Unlock()
			r.logf("attempt %d: %v", attempt, err)
		}),
		stream.OnCheckpoint(func(_ string, partition int32, pos checkpoint.Position) {
			r.mu.Lock()
			r.positions[partition] = pos.Offset
			r.mu.Unlock()
		}),
	}
}

// tag marks a record with its source partition and offset, and counts it.
func (r *relay) tag(ctx context.Context, rec log.Record) (log.Record, error) {
	if r.cfg.delay > 0 {
		select {
		case <-time.After(r.cfg.delay):
		case <-ctx.Done():
			return log.Record{}, ctx.Err()
		}
	}
	hs := make([]log.Header, 0, len(rec.Headers)+2)
	for _, h := range rec.Headers {
		if h.Key != headerPartition && h.Key != headerOffset {
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		log.Header{Key: headerPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		log.Header{Key: headerOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))})
	r.mu.Lock()
	r.relayed++
	r.lastIn[rec.Partition] = rec.Offset
	if b, ok := r.before[rec.Partition]; ok && rec.Offset <= b {
		r.deliveredAgain++
	}
	r.mu.Unlock()
	return log.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: hs,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Epoch: rec.Epoch}, nil
}

// wroteLog records the log's high watermarks after a batch was appended.
func (r *relay) wroteLog(out *log.Topic) func(context.Context, log.Record) error {
	return func(_ context.Context, rec log.Record) error {
		p := out.PartitionFor(rec.Key)
		if rec.Key == nil {
			return nil // round-robin: where it went is not known here
		}
		part, err := out.Partition(p)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.lastOut[p] = part.HighWatermark() - 1
		r.mu.Unlock()
		return nil
	}
}

// crashAfterAppend is the test hook STROM_RELAY_CRASH_AFTER_APPEND (see the
// package doc): it SIGKILLs the process once r.cfg.crashAfter records were
// appended to the log, before the record that reached the count finishes
// (so before it can be committed).
func (r *relay) crashAfterAppend(context.Context, log.Record) error {
	if r.cfg.crashAfter <= 0 {
		return nil
	}
	r.mu.Lock()
	r.appended++
	n := r.appended
	r.mu.Unlock()
	if n >= r.cfg.crashAfter {
		r.logf("%s: %d records appended, killing myself before the commit", crashAfterAppendEnv, n)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously everywhere: never return
	}
	return nil
}

// routes are the relay's endpoints, all read-only: GET /stats, /metrics and /health. Any
// other method is 405 with an Allow header (http.ServeMux's method patterns).
func (r *relay) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", r.handleStats)
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /health", service.Health)
	return mux
}

func (r *relay) handleStats(w http.ResponseWriter, req *http.Request) {
	var lag *int64
	var lastOut map[int32]int64
	ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
	defer cancel()
	var positions map[int32]int64
	if r.lag != nil {
		if l, ps, err := r.lag(ctx); err == nil {
			lag, positions = &l, ps
		}
	}
	if r.lastOutFn != nil {
		lastOut = r.lastOutFn(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lastOut == nil {
		lastOut = r.lastOut
	}
	if positions == nil {
		positions = r.positions // the store could not be read: what this process saved
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"direction":      r.cfg.direction,
		"relayed":        r.relayed,
		"deliveredAgain": r.deliveredAgain,
		"lastIn":         clone(r.lastIn),
		"lastOut":        clone(lastOut),
		"positions":      clone(positions),
		"lag":            lag,
		"reconnects":     r.reconnects,
		"skipped":        r.skipped,
	})
}

func clone(m map[int32]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[strconv.Itoa(int(k))] = v
	}
	return out
}

// failed is a Runner that fails at once with err (a source that could not
// be built: bad arguments, which retrying cannot cure).
type failed struct{ err error }

func (f failed) Run(context.Context) error { return f.err }

// sourceOffset returns the relay headers of rec: its source partition and
// offset.
func sourceOffset(hs []log.Header) (int32, int64, bool) {
	var p, o int64 = -1, -1
	for _, h := range hs {
		switch h.Key {
		case headerPartition:
			p, _ = strconv.ParseInt(string(h.Value), 10, 32)
		case headerOffset:
			o, _ = strconv.ParseInt(string(h.Value), 10, 64)
		}
	}
	return int32(p), o, p >= 0 && o >= 0
}

// logTail reads the last records of every partition of out and returns
// the highest source offset relayed per source partition.
func logTail(out *log.Topic) map[int32]int64 {
	seen := map[int32]int64{}
	for p := range int32(out.Partitions()) {
		part, err := out.Partition(p)
		if err != nil {
			continue
		}
		from := max(part.StartOffset(), part.HighWatermark()-tailRecords)
		rd := part.Replay(from)
		for {
			recs, err := rd.Next(context.Background(), 0)
			if err != nil || len(recs) == 0 {
				break
			}
			for _, rec := range recs {
				if sp, so, ok := sourceOffset(rec.Headers); ok {
					if cur, had := seen[sp]; !had || so > cur {
						seen[sp] = so
					}
				}
			}
		}
	}
	return seen
}

// kafkaTail reads the last records of every partition of the Kafka topic
// that a read_committed reader sees (the same records as any reader's
// when no transaction wrote them) and returns the highest source offset
// relayed per source partition. A topic that cannot be read yet (it does
// not exist) gives an empty map.
func kafkaTail(ctx context.Context, cl *kgo.Client, topic string) map[int32]int64 {
	seen := map[int32]int64{}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, found, err := kafkaread.List(ctx, cl, topic)
	if err != nil || !found {
		return seen
	}
	for _, p := range t.Partitions {
		from := max(p.Start, p.End-tailRecords)
		_ = kafkaread.Read(ctx, cl, t, p.ID, from, p.End, func(rec *kgo.Record) error {
			hs := make([]log.Header, len(rec.Headers))
			for i, h := range rec.Headers {
				hs[i] = log.Header{Key: h.Key, Value: h.Value}
			}
			if sp, so, ok := sourceOffset(hs); ok {
				if cur, had := seen[sp]; !had || so > cur {
					seen[sp] = so
				}
			}
			return nil
		})
	}
	return seen
}

// admin returns a Kafka admin client over brokers.
func admin(brokers []string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}
