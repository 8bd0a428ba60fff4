// Command sshwatch counts failed SSH password attempts per source IP in
// one-minute windows of the log lines' own time, and alerts on the windows
// that reach a threshold: stream.Window over a real log file, surviving
// kill -9.
//
// Run it from the repository root with
//
//	go run ./examples/sshwatch --input ../shared/data/loghub/OpenSSH_2k.log --json
//
// It reads the sshd lines "Failed password for [invalid user] NAME from IP
// port N", and "message repeated N times: [ Failed password ... ]" as N
// attempts. A line's time is its syslog timestamp ("Dec 10 07:28:14"), read
// as UTC in the year --year; the windows are [hh:mm:00, hh:mm+1:00) of that
// time, not of the time sshwatch runs.
//
// # What it does
//
//  1. It publishes the file into the topic "ssh" of a strom log in --dir
//     (a temporary directory, removed at exit, when --dir is not given):
//     line i goes to partition i % N at offset i / N (N = --partitions),
//     every append synced to disk. A run killed part-way publishes, when
//     started again on the same --dir, exactly the lines missing from each
//     partition (partition p holding c records goes on from line p + c*N).
//  2. It replays the topic to its end through the pipeline, resuming from
//     the checkpoint in --dir/checkpoints (a checkpoint.FileStore, which
//     also keeps the window's state): the lines of every partition, the failed
//     attempts, stream.Window(KeyBy IP, Tumbling(1m), Sum of attempts,
//     EventTime(the line's timestamp), OutOfOrderness(--out-of-order),
//     LateTo(a warning on stderr)).
//  3. Every window result goes to --dir/windows.jsonl, and those of
//     --threshold attempts or more to stdout.
//
// # Output
//
// Alerts, on stdout, one line each, in the order the windows close (those
// still open at the end of the input come out last, key by key):
//
//	2026-12-10 07:28-07:29 UTC  112.95.230.3     23 failed password attempts
//
// or with --json
//
//	{"window_start":"2026-12-10T07:28:00Z","window_end":"2026-12-10T07:29:00Z","key":"187.141.143.180","count":12}
//
// windows.jsonl holds every window result (count >= 1) in the --json form,
// appended. A summary and any warnings go to stderr.
//
// # Late lines
//
// Lines may be out of order by up to --out-of-order (default 10s): a
// window closes once a line --out-of-order past its end was read. A failed
// attempt that comes after its window closed is late: it is not counted,
// and it is never dropped unseen: each is printed to stderr as
// "sshwatch: late line ...: LINE" and counted in the summary. A file that
// runs from December into January reads January in the same --year, as
// earlier than December: those lines are late (give each year its own run).
//
// # Kill -9 and restarts
//
// A run killed at any point (SIGKILL, a crash) goes on when started again
// with the same --input and --dir: the publishing resumes as above, the
// pipeline from its last checkpoint, the windows from the state saved with
// it. The windows and their counts are those of an uninterrupted run. The
// output is at-least-once: the results written between the last
// checkpoint and the kill are written again, with the same counts, so
// after a kill the set of alerts (and of windows.jsonl lines, once
// duplicates are removed) is the same, but a line may appear twice. A run
// over a --dir that finished prints nothing new. SIGINT or SIGTERM stops a
// run at once (exit 1), keeping what it saved.
//
// # On N processes, over Kafka
//
// With --brokers, sshwatch reads the lines from the Kafka topic --topic
// instead of a file, as a member of the consumer group --group, and runs
// the same pipeline: the only change is the source, source.Kafka instead
// of source.Topic, which is also the checkpoint store. Start it several
// times, on one machine or on several, and the group shares the topic's
// partitions among them; each window's state lives in a changelog topic
// in Kafka and follows its partition when the group moves it (a process
// killed with kill -9, or one that joins), so that together the processes
// print the alerts one process prints over the same lines:
//
//	sshwatch --brokers localhost:9092 --topic ssh --group sshwatch --json
//
// The window is keyed by source IP, so every line of an IP must reach one
// process. Either the topic is keyed by the line's source IP (the
// pipeline declares it: stream.KeyBy(...).FollowsPartitioning()), or
// --repartition sends the attempts through a repartition topic keyed by IP
// first (GROUP-by-ip-repartition, stream.Repartition over
// KafkaSource.Through), whatever the topic's keys. A repartition topic
// interleaves the lines of every process as they arrive, so its windows
// need an --out-of-order that covers how far apart in event time the
// processes may be (make demo-scale gives 24h, more than its input spans).
//
// It runs until SIGTERM or SIGINT, which stops it cleanly (exit 0): the
// records in flight finish, their positions and windows are saved, and the
// member leaves the group. A window closes when a line of its partition
// more than --out-of-order past its end arrives: the windows of a
// partition's last lines wait for later lines. make demo-scale
// (internal/cmd/demoscale) runs it on 3 processes over an in-process
// Kafka, kills one with kill -9, adds a fourth, and checks the alerts
// against one process.
//
// # Flags
//
//	--input FILE        the log file (required without --brokers); read whole into memory
//	--dir DIR           keep the log, checkpoints and windows.jsonl here, to resume
//	                    after a kill; default a temporary directory removed at exit.
//	                    DIR/sshwatch.json records the input (size, SHA-256), the
//	                    partitions and the year: another input is refused
//	--threshold N       alert on windows of N attempts or more, default 5
//	--year Y            the year of the timestamps, default the current year (UTC), or
//	                    the one --dir was made with
//	--json              alerts as JSON lines
//	--partitions N      partitions of the topic, default 1, or what --dir was made with
//	--out-of-order D    how far lines may be out of time order, default 10s
//	--pace D            publish lines D apart (on average, 16 per append) and handle
//	                    them D apart (one line per batch), default 0: for tests and
//	                    demos that kill it mid-way
//	--brokers B1,B2     read the lines from Kafka at these brokers instead of --input
//	--topic T           the Kafka topic of the lines, default ssh
//	--group G           the consumer group, default sshwatch
//	--repartition       count per IP through a repartition topic (a topic not keyed by IP)
//	--session-timeout D the group session timeout (Kafka's session.timeout.ms), default
//	                    the client's (45s): how long a killed member holds its partitions
//	--rebalance-timeout D the group rebalance timeout, default the client's (60s)
//
// With --brokers, --dir is optional and holds windows.jsonl and, in
// DIR/state, a local snapshot cache of the windows' changelogs: the
// positions and the windows' state are in Kafka, and a partition that
// comes back to a process on this --dir restores from the cache and the
// changelog's tail only (source.KafkaStateDir).
//
// Exit status: 0 when the whole input was handled (with --brokers: when a
// signal stopped it), 1 on a failure or (without --brokers) a signal, 2
// for a usage error (-h and --help print the usage and exit 0).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/strom-dev/strom/internal/service"
)

// config is sshwatch's parsed command line.
type config struct {
	input         string
	dir           string // "" until run makes a temporary one
	threshold     int64
	year          int
	yearSet       bool // --year was given
	json          bool
	partitions    int
	partitionsSet bool // --partitions was given
	outOfOrder    time.Duration
	pace          time.Duration

	// Kafka mode (kafka.go): brokers set.
	brokers          string // comma-separated; "" reads --input through the log
	topic            string
	group            string
	repartition      bool
	sessionTimeout   time.Duration // 0: the client's default
	rebalanceTimeout time.Duration // 0: the client's default
}

func main() { service.Main("sshwatch", parseFlags, run) }

const usage = `Usage: sshwatch --input FILE [--dir DIR] [--threshold N] [--year Y] [--json]
                [--partitions N] [--out-of-order D] [--pace D]
       sshwatch --brokers B1,B2 [--topic T] [--group G] [--repartition] [--dir DIR]
                [--threshold N] [--year Y] [--json] [--out-of-order D]
                [--session-timeout D] [--rebalance-timeout D]

Counts failed SSH password attempts per source IP in one-minute windows of the
lines' own timestamps (read as UTC in --year) and prints the windows with
--threshold attempts or more.

Late lines: a failed attempt read after its window closed (more than
--out-of-order behind the newest line) is not counted; each one is printed to
stderr as a warning and counted in the summary, never dropped silently.

Kill -9: run again with the same --input and --dir to go on. Alerts are
at-least-once: after a kill the set of alerts is the same as without one, but
some may be printed twice. Every window (not only alerts) is appended to
DIR/windows.jsonl.

With --brokers it reads the lines from a Kafka topic as a member of a consumer
group, and runs until SIGTERM or SIGINT (exit 0): start it N times to share
the topic's partitions; the windows follow their partitions between the
processes. The topic must be keyed by source IP, or give --repartition.

Exit status: 0 done (or, with --brokers, stopped by a signal), 1 failure or
signal, 2 usage error.

Flags:
`

// parseFlags reads the command line.
func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("sshwatch", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	input := fs.String("input", "", "the log file (required)")
	dir := fs.String("dir", "", "keep the log, checkpoints and windows.jsonl in `DIR`, to resume after a kill (default: a temporary directory, removed at exit)")
	threshold := fs.Int64("threshold", 5, "alert on windows of `N` failed attempts or more")
	year := fs.Int("year", time.Now().UTC().Year(), "the `year` of the timestamps, UTC; an existing --dir keeps its own (another given is refused)")
	asJSON := fs.Bool("json", false, `alerts as JSON lines {"window_start","window_end","key","count"}`)
	partitions := fs.Int("partitions", 1, "partitions of the topic (line i goes to i % N); an existing --dir keeps its own (another given is refused)")
	outOfOrder := fs.Duration("out-of-order", 10*time.Second, "how far lines may be out of time order before they are late")
	pace := fs.Duration("pace", 0, "publish and handle lines this far apart, on average (for tests and demos that kill it mid-way)")
	brokers := fs.String("brokers", "", "read the lines from the Kafka brokers `B1,B2` (host:port) instead of --input")
	topic := fs.String("topic", "ssh", "with --brokers: the Kafka `topic` of the lines")
	group := fs.String("group", "sshwatch", "with --brokers: the consumer `group`")
	repartition := fs.Bool("repartition", false, "with --brokers: count per IP through a repartition topic (for a topic not keyed by source IP)")
	session := fs.Duration("session-timeout", 0, "with --brokers: the group session timeout (default the client's, 45s)")
	rebalance := fs.Duration("rebalance-timeout", 0, "with --brokers: the group rebalance timeout (default the client's, 60s)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := config{input: *input, dir: *dir, threshold: *threshold, year: *year, json: *asJSON,
		partitions: *partitions, outOfOrder: *outOfOrder, pace: *pace,
		brokers: *brokers, topic: *topic, group: *group, repartition: *repartition,
		sessionTimeout: *session, rebalanceTimeout: *rebalance}
	kafkaOnly := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "year":
			cfg.yearSet = true
		case "partitions":
			cfg.partitionsSet = true
		case "topic", "group", "repartition", "session-timeout", "rebalance-timeout":
			kafkaOnly = f.Name
		}
	})
	switch {
	case cfg.brokers != "" && cfg.input != "":
		return config{}, errors.New("--input and --brokers: give one (the lines come from the file or from Kafka)")
	case cfg.brokers != "" && cfg.partitionsSet:
		return config{}, errors.New("--partitions applies to the log of --input; a Kafka topic has its own")
	case cfg.brokers == "" && kafkaOnly != "":
		return config{}, fmt.Errorf("--%s applies with --brokers only", kafkaOnly)
	case cfg.brokers == "" && cfg.input == "":
		return config{}, errors.New("--input is required (or --brokers)")
	case cfg.sessionTimeout < 0 || cfg.rebalanceTimeout < 0:
		return config{}, errors.New("--session-timeout and --rebalance-timeout must not be negative")
	case cfg.threshold < 1:
		return config{}, fmt.Errorf("--threshold %d: must be at least 1", cfg.threshold)
	case cfg.year < 1 || cfg.year > 9999:
		return config{}, fmt.Errorf("--year %d: must be between 1 and 9999", cfg.year)
	case cfg.partitions < 1 || cfg.partitions > 1024:
		return config{}, fmt.Errorf("--partitions %d: must be between 1 and 1024", cfg.partitions)
	case cfg.outOfOrder < 0:
		return config{}, fmt.Errorf("--out-of-order %s: must not be negative", cfg.outOfOrder)
	case cfg.pace < 0:
		return config{}, fmt.Errorf("--pace %s: must not be negative", cfg.pace)
	}
	if cfg.brokers != "" {
		return cfg, nil
	}
	// Checked before anything is created: a typo must not leave a new,
	// empty --dir behind.
	f, err := os.Open(cfg.input)
	if err != nil {
		return config{}, fmt.Errorf("--input: %w", err)
	}
	f.Close()
	return cfg, nil
}

// run publishes and watches cfg.input, in a temporary directory when
// cfg.dir is empty, and prints a summary to stderr.
func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.brokers != "" {
		return runKafka(ctx, cfg)
	}
	where := cfg.dir
	if cfg.dir == "" {
		dir, err := os.MkdirTemp("", "sshwatch-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.dir, where = dir, "a temporary directory, removed"
	}
	sum, err := watch(ctx, cfg, os.Stdout, os.Stderr)
	if sum != nil {
		fmt.Fprintf(os.Stderr, "sshwatch: read %d lines: %d failed password attempts, %d windows, %d alerts (threshold %d), %d late, %d skipped; log, checkpoints and %s in %s\n",
			sum.Lines.Load(), sum.Attempts.Load(), sum.Windows.Load(), sum.Alerts.Load(), cfg.threshold,
			sum.Late.Load(), sum.Skipped.Load(), windowsFile, where)
	}
	if ctx.Err() != nil {
		return errors.New("stopped by a signal before the end of the input; run again with the same --dir to go on")
	}
	return err
}

// runKafka runs Kafka mode until a signal, and prints a summary to stderr.
func runKafka(ctx context.Context, cfg config) error {
	sum, err := watchKafka(ctx, cfg, os.Stdout, os.Stderr)
	if sum != nil {
		fmt.Fprintf(os.Stderr, "sshwatch: read %d lines from %s (group %s): %d failed password attempts, %d windows, %d alerts (threshold %d), %d late, %d skipped\n",
			sum.Lines.Load(), cfg.topic, cfg.group, sum.Attempts.Load(), sum.Windows.Load(), sum.Alerts.Load(), cfg.threshold,
			sum.Late.Load(), sum.Skipped.Load())
	}
	return err
}
