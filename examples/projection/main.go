// Command projection keeps a read model of a strom topic, each user's number of events and
// latest event in the demo publisher's topic, in a stream.Table, and serves it over HTTP.
//
// Run it beside the publisher (or on a log it left behind) with
//
//	go run ./examples/projection --dir /tmp/strom-log --state /tmp/strom-projection
//	curl -s http://127.0.0.1:7075/users/user-17
//
// The publisher keys every event by its user id ("user-17"); the model maps each key to the
// number of records with that key in the topic and the value of the latest. A record without a
// key is read (counted in /stats) but belongs to no user.
//
// # A table, saved with its positions
//
// One pipeline reads every partition of the topic (source.Topic), drops keyless records, folds
// each user's records into its row (stream.Aggregate) and keeps the rows in a stream.Table, which
// the HTTP handlers read while the pipeline runs (Table.Get, Table.All).
//
// With --state DIR the pipeline checkpoints to a checkpoint.FileStore in DIR: every 200 ms the
// positions, and with them a snapshot of the table and of the aggregate (the state is saved
// before the positions it reflects, see the stream package's "State"). After a crash or kill -9
// the next start restores the table from the snapshot and reads only what the topic got after
// the last checkpoint; a record read again whose effect is already in the table is recognised and
// not counted twice. Without --state nothing is saved and each start rebuilds the table by
// reading the topic from its log start offset.
//
// Until the table has caught up with the topic (Table.Ready: every partition read up to the high
// watermark it had when the pipeline started), GET /users/ID answers 503 ("replaying"), so a
// reader never mistakes a partial count for the truth.
//
// # Flags and environment
//
//	--dir    STROM_DIR    log directory (required); opened read-only, so the publisher may
//	                      hold the topic's writer lock meanwhile
//	--topic  STROM_TOPIC  topic to project, default "events"
//	--state  STROM_STATE  directory of the checkpoint store (positions and the table's
//	                      snapshot), created if missing; default none: rebuilt at each start
//	--addr   STROM_ADDR   HTTP address, default 127.0.0.1:7075
//
// If the topic does not exist yet the service waits for it, checking every 100 ms; a --dir
// that does not exist is a startup error (the publisher creates the log, the projection
// never does), so a mistyped path exits at once instead of waiting forever.
//
// # HTTP
//
//	GET /users/ID  200 {"user":"user-17","events":42,"last":"..."}; 404 {"error":...} for a
//	               user with no events; 503 {"error":"replaying"} before the table is ready
//	GET /users     200 {"user-17":{"user","events","last"},...}: every row; 503 before ready
//	GET /stats     {"topic","ready","read","applied","users","events",
//	               "partitions":[{"partition","checkpointed"}]}
//	GET /metrics   the process's OpenTelemetry metrics in Prometheus's text format (see the
//	               metrics package for the series): the pipeline's, named "projection", and
//	               the Go runtime's
//	GET /health    200 "ok"
//
// read counts the records read from the topic since this process started (after a restore,
// only those past the checkpoint), applied those that reached the table (keyed ones, replays of
// records the snapshot held included), users the table's rows, events the sum of their counts
// (the keyed records in the topic, once caught up), and checkpointed the position last saved of
// each partition (null before the first save, and without --state).
//
// It prints one line to stderr when it starts (with the address it listens on) and one when
// the table is ready, and exits 0 on SIGINT or SIGTERM.
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

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/metrics"
	"github.com/strom-dev/strom/web"
)

// config is the projection's parsed command line.
type config struct {
	dir   string
	topic string
	state string
	addr  string
}

func main() { service.Main("projection", parseFlags, run) }

// parseFlags reads the command line, with environment variables as defaults.
func parseFlags(args []string) (config, error) {
	var env service.Env
	fs := flag.NewFlagSet("projection", flag.ContinueOnError)
	dir := fs.String("dir", env.String("STROM_DIR", ""), "log directory (env STROM_DIR)")
	topic := fs.String("topic", env.String("STROM_TOPIC", "events"), "topic to project (env STROM_TOPIC)")
	state := fs.String("state", env.String("STROM_STATE", ""), "checkpoint store directory: positions and the table's snapshot (env STROM_STATE; default: none, rebuilt at each start)")
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
	return config{dir: *dir, topic: *topic, state: *state, addr: *addr}, nil
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

	var store *savedPositions
	if cfg.state != "" {
		fs, err := checkpoint.NewFileStore(cfg.state)
		if err != nil {
			return fmt.Errorf("--state: %w", err)
		}
		store = newSavedPositions(fs)
	}
	p := newProjection(cfg.topic, store)
	p.page = web.Pipeline(&p.mon)
	defer p.page.Close()
	mux := p.routes(metricsHandler)
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux) }()

	fmt.Fprintf(os.Stderr, "projection: projecting %s from %s; users on http://%[3]s/users/ID, stats on http://%[3]s/stats, live page on http://%[3]s/ui/\n",
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
