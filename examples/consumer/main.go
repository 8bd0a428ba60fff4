// Command consumer handles one partition of a topic of a strom log, checkpointing its
// position in its own state folder, and reports its progress over HTTP.
//
// Run it with
//
//	go run ./examples/consumer --dir /tmp/strom-log --partition 0 --state /tmp/state-0
//
// It opens the log read-only (the publisher, another process, writes it), loads its position
// from a checkpoint.FileStore in --state, and runs stream.ConsumeForever over
// source.Partition(log, topic, partition, source.FromStore(store)): it reads from the saved
// position (the log start when nothing is saved), handles each record, saves the position
// only after every record below it was handled, and follows the partition forever. When the
// source fails (the topic does not exist yet, a read error) it backs off and resumes from
// the last saved position, counting a reconnect. A --dir that does not exist is a startup
// error, not a source failure: a consumer never creates the log (the publisher does), so a
// mistyped path exits at once instead of retrying an unknown topic forever. Handling a
// record means waiting --delay (default 2ms, so the demo can watch it work) and, with --out,
// appending the record to a file. After kill -9 a restart on the same --state resumes from the last saved position: a
// few records may be handled again (at-least-once), none is skipped.
//
// # Flags and environment
//
//	--dir          STROM_DIR          log directory (required)
//	--topic        STROM_TOPIC        topic to read, default "events"
//	--partition    STROM_PARTITION    partition to read, default 0
//	--state        STROM_STATE        checkpoint folder (required), one per consumer
//	--addr         STROM_ADDR         HTTP address, default 127.0.0.1:7071
//	--name         STROM_NAME         name in stats and messages, default "consumer-<partition>"
//	--delay        STROM_DELAY        handling time per record, default 2ms
//	--batch-bytes  STROM_BATCH_BYTES  largest batch read at once, default 16384 bytes; a
//	                                  position is saved about once per batch, so this bounds
//	                                  what a crash replays
//	--out          STROM_OUT          append each handled record to this file as one JSON line
//
// The --out file gets one line per handled record, {"partition":0,"offset":12,
// "key":"user-17","value":"..."} (key null for a nil key), written with one write system call
// before the handler returns: what a test reads there was handled, replays included.
//
// # HTTP
//
//	GET /stats   {"name","topic","partition","handled","position","lag","resumedFrom",
//	              "reconnects","lastRecord":{"offset","key","value"}}
//	GET /metrics the process's OpenTelemetry metrics in Prometheus's text format (see the
//	             metrics package for the series): the pipeline's, named --name
//	             (messaging_consumer_group_name), and the Go runtime's
//	GET /health  200 "ok"
//
// handled counts records handled by this process; position is the last position it saved
// (or the one it resumed from), null before either; lag is the partition's high watermark
// minus position; resumedFrom is the offset it resumed reading at, null on a first run: the
// position loaded at startup, or where the source moved it when that position was no longer
// there (below the log start, or saved against a topic since deleted and created again, which
// the source reads from its start: source.OnReset), with a line on stderr saying so.
//
// It prints one line to stderr when it starts, one per source failure, and exits 0 on
// SIGINT or SIGTERM after draining (records in flight finish or are abandoned unsaved; what
// completed is saved). A busy port is a startup error: "consumer: listen on
// 127.0.0.1:7071: address already in use"; an unreadable checkpoint is a startup error too,
// never a silent start from the beginning.
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
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/web"
)

// Backoff after a source failure, from the first retry to the longest wait: short, so a
// consumer started before its topic exists begins soon after the publisher creates it.
const (
	backoffMin = 20 * time.Millisecond
	backoffMax = 500 * time.Millisecond
)

// config is the consumer's parsed command line.
type config struct {
	dir        string
	topic      string
	partition  int32
	state      string
	addr       string
	name       string
	delay      time.Duration
	batchBytes int
	out        string
}

func main() { service.Main("consumer", parseFlags, run) }

// parseFlags reads the command line, with environment variables as defaults.
func parseFlags(args []string) (config, error) {
	var env service.Env
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	dir := fs.String("dir", env.String("STROM_DIR", ""), "log directory (env STROM_DIR)")
	topic := fs.String("topic", env.String("STROM_TOPIC", "events"), "topic to read (env STROM_TOPIC)")
	partition := fs.Int("partition", int(env.Int("STROM_PARTITION", 0)), "partition to read (env STROM_PARTITION)")
	state := fs.String("state", env.String("STROM_STATE", ""), "checkpoint folder, one per consumer (env STROM_STATE)")
	addr := fs.String("addr", env.String("STROM_ADDR", "127.0.0.1:7071"), "HTTP address (env STROM_ADDR)")
	name := fs.String("name", env.String("STROM_NAME", ""), `name in stats and messages; default "consumer-<partition>" (env STROM_NAME)`)
	delay := fs.Duration("delay", env.Duration("STROM_DELAY", 2*time.Millisecond), "handling time per record (env STROM_DELAY)")
	batchBytes := fs.Int("batch-bytes", int(env.Int("STROM_BATCH_BYTES", 16<<10)), "largest batch read at once, in bytes (env STROM_BATCH_BYTES)")
	out := fs.String("out", env.String("STROM_OUT", ""), "append each handled record to this file as a JSON line (env STROM_OUT)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if env.Err != nil {
		return config{}, env.Err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case *dir == "":
		return config{}, errors.New("--dir (or STROM_DIR) is required")
	case *state == "":
		return config{}, errors.New("--state (or STROM_STATE) is required")
	case *partition < 0 || *partition > 1<<31-1:
		return config{}, fmt.Errorf("--partition %d: out of range", *partition)
	case *delay < 0:
		return config{}, fmt.Errorf("--delay %v: must not be negative", *delay)
	case *batchBytes < 1:
		return config{}, fmt.Errorf("--batch-bytes %d: must be at least 1", *batchBytes)
	}
	cfg := config{
		dir:        *dir,
		topic:      *topic,
		partition:  int32(*partition),
		state:      *state,
		addr:       *addr,
		name:       *name,
		delay:      *delay,
		batchBytes: *batchBytes,
		out:        *out,
	}
	if cfg.name == "" {
		cfg.name = fmt.Sprintf("consumer-%d", cfg.partition)
	}
	return cfg, nil
}

// run consumes and serves HTTP until SIGINT or SIGTERM.
func run(cfg config) error {
	ln, err := service.Listen(cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	lg, err := service.OpenReadOnly(cfg.dir, "publisher")
	if err != nil {
		return err
	}
	defer lg.Close()

	store, err := checkpoint.NewFileStore(cfg.state)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	resumed, found, err := store.Load(ctx, cfg.topic, cfg.partition)
	if err != nil {
		return err
	}
	metricsHandler, err := metrics.Handler("consumer")
	if err != nil {
		return err
	}

	c := &consumer{cfg: cfg, lg: lg}
	if found {
		c.resume(resumed.Offset)
	}
	if cfg.out != "" {
		c.out, err = openOut(cfg.out)
		if err != nil {
			return err
		}
		defer c.out.Close()
	}

	c.page = web.Pipeline(&c.mon)
	defer c.page.Close()
	mux := c.routes(metricsHandler)
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux) }()

	from := "no checkpoint, starting at the log start"
	if found {
		from = fmt.Sprintf("at the saved %s", resumed)
	}
	fmt.Fprintf(os.Stderr, "%s: reading %s/%d from %s (%s); stats on http://%s/stats, live page on http://%s/ui/\n",
		cfg.name, cfg.topic, cfg.partition, cfg.dir, from, ln.Addr(), ln.Addr())

	src := c.source(store)
	consumed := make(chan error, 1)
	go func() {
		consumed <- stream.ConsumeForever(ctx, src, store, c.handle,
			stream.WithBackoff(backoffMin, backoffMax),
			stream.OnSourceError(c.sourceError),
			stream.OnCheckpoint(c.checkpointed),
			stream.WithPipeline(stream.WithName(cfg.name), stream.ObservedBy(&c.mon)),
		)
	}()

	var consumeErr, serveErr error
	select {
	case consumeErr = <-consumed:
		cancel()
		serveErr = <-served
	case serveErr = <-served:
		cancel()
		consumeErr = <-consumed
	}
	if consumeErr != nil && !errors.Is(consumeErr, context.Canceled) {
		return consumeErr
	}
	if serveErr != nil {
		return fmt.Errorf("http: %w", serveErr)
	}
	if c.out != nil {
		if err := c.out.Sync(); err != nil {
			return fmt.Errorf("sync --out: %w", err)
		}
	}
	return nil
}
