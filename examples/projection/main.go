// Command projection keeps a read model of a strom topic, the number of events per user of
// the demo publisher's topic, and serves it over HTTP.
//
// Run it beside the publisher (or on a log it left behind) with
//
//	go run ./examples/projection --dir /tmp/strom-log
//	curl -s http://127.0.0.1:7075/users/user-17
//
// The publisher keys every event by its user id ("user-17"); the model maps each key to the
// number of records with that key in the topic. A record without a key is applied (counted in
// /stats) but belongs to no user.
//
// # Rebuilt at every start, then kept current
//
// The model lives in memory only and nothing is checkpointed: each start rebuilds it from the
// log, so after a crash or kill -9 it is right again as soon as the replay is done, and there
// is no saved state that could disagree with the log.
//
// For each partition one goroutine runs two pipelines in turn, each over its own
// source.Partition:
//
//  1. a replay, source.Earliest with source.Replay(): it reads from the log start offset and
//     ends with io.EOF at the high watermark the partition had when the source opened;
//  2. a follow from source.At(end), where end is the replay source's Position() after it
//     ended: the next offset it would have read, which is exactly that high watermark.
//
// The follow starts at the first offset the replay did not return, so no record is missed and
// none is applied twice, whatever the publisher appends meanwhile. This is the simplest correct
// way with the existing sources: noting the high watermark before opening the replay would not
// do, because a replay source takes its own high watermark when it opens (lazily, at the first
// Read), which may be later; asking the replay where it ended leaves no window between the two.
// A single following reader would be as correct, but would not say when the rebuild is done.
//
// Until every partition's replay has ended the model is incomplete: GET /users/ID answers 503
// ("replaying") then, so a reader never mistakes a partial count for the truth.
//
// # Flags and environment
//
//	--dir    STROM_DIR    log directory (required); opened read-only, so the publisher may
//	                      hold the topic's writer lock meanwhile
//	--topic  STROM_TOPIC  topic to project, default "events"
//	--addr   STROM_ADDR   HTTP address, default 127.0.0.1:7075
//
// If the topic does not exist yet the service waits for it, checking every 100 ms; a --dir
// that does not exist is a startup error (the publisher creates the log, the projection
// never does), so a mistyped path exits at once instead of waiting forever.
//
// # HTTP
//
//	GET /users/ID  200 {"user":"user-17","events":42}; 404 {"error":...} for a user with no
//	               events; 503 {"error":"replaying"} before the rebuild is done
//	GET /stats     {"topic","ready","applied","users","partitions":[{"partition","replayEnd",
//	               "position","following"}]}
//	GET /metrics   the process's OpenTelemetry metrics in Prometheus's text format (see the
//	               metrics package for the series): the pipelines', named
//	               "projection-replay-<p>" and "projection-follow-<p>", and the Go runtime's
//	GET /health    200 "ok"
//
// applied counts the records applied since start, replay included; replayEnd is the offset
// where partition p's replay ended (null while it runs), position the next offset it will
// apply (null before its first record) and following whether it has passed to the follow.
//
// It prints one line to stderr when it starts (with the address it listens on) and one when
// the rebuild is done, and exits 0 on SIGINT or SIGTERM.
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
	"github.com/strom-dev/strom/metrics"
)

// config is the projection's parsed command line.
type config struct {
	dir   string
	topic string
	addr  string
}

func main() { service.Main("projection", parseFlags, run) }

// parseFlags reads the command line, with environment variables as defaults.
func parseFlags(args []string) (config, error) {
	var env service.Env
	fs := flag.NewFlagSet("projection", flag.ContinueOnError)
	dir := fs.String("dir", env.String("STROM_DIR", ""), "log directory (env STROM_DIR)")
	topic := fs.String("topic", env.String("STROM_TOPIC", "events"), "topic to project (env STROM_TOPIC)")
	addr := fs.String("addr", env.String("STROM_ADDR", "127.0.0.1:7075"), "HTTP address (env STROM_ADDR)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if env.Err != nil {
		return config{}, env.Err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *dir == "" {
		return config{}, errors.New("--dir (or STROM_DIR) is required")
	}
	return config{dir: *dir, topic: *topic, addr: *addr}, nil
}

// run projects and serves HTTP until SIGINT or SIGTERM.
func run(cfg config) error {
	ln, err := service.Listen(cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	metricsHandler, err := metrics.Handler("projection")
	if err != nil {
		return err
	}
	lg, err := service.OpenReadOnly(cfg.dir, "publisher")
	if err != nil {
		return err
	}
	defer lg.Close()

	p := newProjection(cfg.topic)
	mux := p.routes(metricsHandler)
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux) }()

	fmt.Fprintf(os.Stderr, "projection: projecting %s from %s; users on http://%[3]s/users/ID, stats on http://%[3]s/stats\n",
		cfg.topic, cfg.dir, ln.Addr())

	projected := make(chan error, 1)
	go func() { projected <- p.run(ctx, lg, 100*time.Millisecond) }()

	var projectErr, serveErr error
	select {
	case projectErr = <-projected:
		cancel()
		serveErr = <-served
	case serveErr = <-served:
		cancel()
		projectErr = <-projected
	}
	if projectErr != nil && !errors.Is(projectErr, context.Canceled) {
		return projectErr
	}
	if serveErr != nil {
		return fmt.Errorf("http: %w", serveErr)
	}
	return nil
}
