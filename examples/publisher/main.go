// Command publisher writes keyed records into a topic of a strom log and reports what it
// wrote over HTTP.
//
// Run it with
//
//	go run ./examples/publisher --dir /tmp/strom-log
//
// It opens the log directory read-write, creating it (and missing parents) when it does not
// exist: the publisher is the service that makes the log, while the consumers, the
// projection and the strom command's reading commands fail on a missing directory rather
// than wait on one that a typo made. It creates the topic (--topic, default "events") with
// --partitions partitions (default 3) unless it exists with that count, and holds the topic's
// writer lock while it runs, so it is the one process writing that topic. By default it
// writes synthetic user events at --rate records per second (default 200), keyed by user id
// so that one user's events stay in order in one partition:
//
//	key "user-17"  value {"user":"user-17","event":"click","seq":123,"ts":1764500000000}
//
// With --input FILE --key REGEX it writes the lines of FILE instead (read by source.Lines:
// "\n" and one "\r" before it stripped, the rule of strom produce; --keep-cr keeps the "\r",
// as produce --keep-cr and source.KeepCR do), each keyed by the regular expression's first
// capture group, matched on the line without its ending either way (so a "$"-anchored
// expression keys the same); a line the expression does not match has a nil key and goes
// round-robin. It stops
// sending at the end of the file. --count N stops it after N records in either mode.
//
// # Flags and environment
//
//	--dir         STROM_DIR         log directory (required)
//	--topic       STROM_TOPIC       topic to write, default "events"
//	--partitions  STROM_PARTITIONS  partition count when creating the topic, default 3
//	--addr        STROM_ADDR        HTTP address, default 127.0.0.1:7070
//	--rate        STROM_RATE        records per second, default 200; 0 = as fast as it can
//	--count       STROM_COUNT       stop sending after N records, default 0 = never
//	--mode        STROM_MODE        write mode: file or mmap; default: the log's default
//	--input       STROM_INPUT       a file whose lines to write instead of synthetic events
//	--key         STROM_KEY         regular expression whose first group is a line's key
//	--keep-cr     STROM_KEEP_CR     keep the "\r" of a CRLF line ending in an --input value
//
// # HTTP
//
//	GET  /stats   {"topic":"events","sent":N,"perPartition":[n0,n1,n2],
//	               "lastOffset":[o0,o1,o2],"nextOffset":[h0,h1,h2],"stopped":false}
//	GET  /metrics the process's OpenTelemetry metrics in Prometheus's text format (see the
//	              metrics package for the series): the log's appends, bytes and syncs per
//	              partition, and the Go runtime's
//	GET  /health  200 "ok"
//	POST /stop    stops sending; the process keeps serving /stats until it is signalled
//
// perPartition counts the records this process wrote to each partition and lastOffset gives
// the offset of the last one (-1 for none); nextOffset is each partition's high watermark.
// The demo (scripts/demo.sh) and the check command compare consumers against these numbers.
//
// It prints one line to stderr when it starts, one when it stops sending (with --key, how
// many records the expression keyed and how many went without a key, and a warning naming
// the expression when it keyed none), and exits 0 on SIGINT or SIGTERM. A busy port is a startup error: "publisher: listen on 127.0.0.1:7070:
// address already in use".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/metrics"
)

// config is the publisher's parsed command line.
type config struct {
	dir        string
	topic      string
	partitions int
	addr       string
	rate       float64
	count      int64
	mode       log.Mode
	input      string
	key        *regexp.Regexp
	keepCR     bool
}

func main() { service.Main("publisher", parseFlags, run) }

// parseFlags reads the command line, with environment variables as defaults.
func parseFlags(args []string) (config, error) {
	var env service.Env
	fs := flag.NewFlagSet("publisher", flag.ContinueOnError)
	dir := fs.String("dir", env.String("STROM_DIR", ""), "log directory (env STROM_DIR)")
	topic := fs.String("topic", env.String("STROM_TOPIC", "events"), "topic to write (env STROM_TOPIC)")
	partitions := fs.Int("partitions", int(env.Int("STROM_PARTITIONS", 3)), "partition count when creating the topic (env STROM_PARTITIONS)")
	addr := fs.String("addr", env.String("STROM_ADDR", "127.0.0.1:7070"), "HTTP address (env STROM_ADDR)")
	rate := fs.Float64("rate", env.Float("STROM_RATE", 200), "records per second; 0 = unlimited (env STROM_RATE)")
	count := fs.Int64("count", env.Int("STROM_COUNT", 0), "stop sending after N records; 0 = never (env STROM_COUNT)")
	mode := fs.String("mode", env.String("STROM_MODE", ""), "write mode: file or mmap; empty = the log's default (env STROM_MODE)")
	input := fs.String("input", env.String("STROM_INPUT", ""), "write the lines of this file instead of synthetic events (env STROM_INPUT)")
	key := fs.String("key", env.String("STROM_KEY", ""), "regular expression whose first group keys each --input line (env STROM_KEY)")
	keepCR := fs.Bool("keep-cr", env.Bool("STROM_KEEP_CR", false), "keep the '\\r' of a CRLF line ending in an --input line's value (env STROM_KEEP_CR)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if env.Err != nil {
		return config{}, env.Err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := config{
		dir:        *dir,
		topic:      *topic,
		partitions: *partitions,
		addr:       *addr,
		rate:       *rate,
		count:      *count,
		input:      *input,
		keepCR:     *keepCR,
	}
	switch {
	case cfg.dir == "":
		return config{}, errors.New("--dir (or STROM_DIR) is required")
	case cfg.partitions < 1:
		return config{}, fmt.Errorf("--partitions %d: must be at least 1", cfg.partitions)
	case cfg.rate < 0:
		return config{}, fmt.Errorf("--rate %g: must not be negative", cfg.rate)
	case cfg.count < 0:
		return config{}, fmt.Errorf("--count %d: must not be negative", cfg.count)
	case *key != "" && cfg.input == "":
		return config{}, errors.New("--key needs --input")
	}
	if *mode != "" {
		m, err := log.ParseMode(*mode)
		if err != nil {
			return config{}, fmt.Errorf("--mode: %w", err)
		}
		cfg.mode = m
	}
	if *key != "" {
		re, err := regexp.Compile(*key)
		if err != nil {
			return config{}, fmt.Errorf("--key: %w", err)
		}
		if re.NumSubexp() < 1 {
			return config{}, fmt.Errorf("--key %q: needs a capture group, e.g. 'from ([0-9.]+)'", *key)
		}
		cfg.key = re
	}
	if cfg.input != "" {
		// Checked before anything is created: a typo must not leave a new,
		// empty topic behind.
		f, err := os.Open(cfg.input)
		if err != nil {
			return config{}, fmt.Errorf("--input: %w", err)
		}
		f.Close()
	}
	return cfg, nil
}

// routes are the publisher's endpoints: GET /stats, /metrics and /health read, and POST
// /stop, the only one that changes anything, stops the sending (nothing else). Any other
// method is 405 with an Allow header (http.ServeMux's method patterns).
func (p *publisher) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", p.handleStats)
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /health", service.Health)
	mux.HandleFunc("POST /stop", p.handleStop)
	return mux
}

// run serves HTTP and sends until SIGINT or SIGTERM.
func run(cfg config) error {
	ln, err := service.Listen(cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()

	metricsHandler, err := metrics.Handler("publisher")
	if err != nil {
		return err
	}
	opts := []log.Option{log.CreateIfMissing()} // the publisher makes the log its consumers read
	if cfg.mode != 0 {
		opts = append(opts, log.WithMode(cfg.mode))
	}
	lg, err := log.Open(cfg.dir, opts...)
	if err != nil {
		return err
	}
	defer lg.Close()
	topic, err := lg.CreateTopic(cfg.topic, cfg.partitions)
	if err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	pub := newPublisher(topic)
	mux := pub.routes(metricsHandler)

	what := "synthetic events"
	if cfg.input != "" {
		what = "the lines of " + cfg.input
	}
	pace := fmt.Sprintf("at %g records/s", cfg.rate)
	if cfg.rate == 0 {
		pace = "as fast as it can"
	}
	fmt.Fprintf(os.Stderr, "publisher: writing %s %s to topic %q (%d partitions) in %s; stats on http://%s/stats\n",
		what, pace, cfg.topic, topic.Partitions(), cfg.dir, ln.Addr())

	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux) }()
	sent := make(chan error, 1)
	go func() {
		if cfg.input != "" {
			sent <- pub.sendLines(ctx, cfg.input, cfg.key, cfg.keepCR, cfg.rate, cfg.count)
		} else {
			sent <- pub.sendSynthetic(ctx, cfg.rate, cfg.count)
		}
	}()

	select {
	case err := <-sent:
		// Sending ended: stopped, --count reached, end of --input, a signal, or a failure.
		if err != nil && ctx.Err() == nil {
			cancel()
			<-served
			return err
		}
		// Keep serving /stats until signalled.
		if err := <-served; err != nil {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	case err := <-served:
		cancel()
		sendErr := <-sent
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		if sendErr != nil && ctx.Err() == nil {
			return sendErr
		}
		return nil
	}
}
