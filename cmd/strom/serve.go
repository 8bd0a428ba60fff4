package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/web"
)

// defaultServeAddr is where `strom serve` listens unless --addr says
// otherwise: the loopback interface only, since the page has no
// authentication.
const defaultServeAddr = "127.0.0.1:7080"

func newServeCmd(a *app) *cobra.Command {
	var states []string
	var addr string
	cmd := &cobra.Command{
		Use:   "serve [--state DIR]... [--addr HOST:PORT]",
		Short: "Serve a live, read-only page of the log directory",
		Long: `Serve a web page that shows the log directory live: each topic's
partitions with their log start offset, next offset (high watermark),
segments and bytes, and their append rate in records per second as a
sparkline of the last five minutes; and every position saved in the
checkpoint folders named by --state (FileStore folders, as for "strom
positions"; give --state once per folder) with its lag, the next offset
minus the position. The page updates itself every second from a stream of
Server-Sent Events; it needs no outside asset.

  /               the page
  /snapshot.json  the same figures as one JSON document
  /events         a JSON snapshot each second (text/event-stream)

Each takes ?topic=NAME to show one topic. The log is opened read-only: no
lock is taken and nothing is written, in the log directory or the
checkpoint folders, so it runs beside the process that writes the log.

It listens on 127.0.0.1:7080 unless --addr says otherwise, prints
"serving on http://ADDR/" once it listens (port 0 picks a free one), and
stops on SIGINT (Ctrl-C) or SIGTERM, with exit status 0. The page has no
authentication: anyone who can reach --addr can read topic names,
offsets and folder paths. An --addr on another interface than loopback
(0.0.0.0, a public address) is allowed, with a warning on stderr; put it
behind a proxy that authenticates, or an SSH tunnel, instead.`,
		Example: `  strom serve --dir /var/lib/app/log --state /var/lib/app/state
  strom serve --state state-0 --state state-1 --addr 127.0.0.1:8080
  ssh -L 7080:127.0.0.1:7080 host   # then open http://127.0.0.1:7080/ here`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.serve(states, addr)
		},
	}
	cmd.Flags().StringArrayVar(&states, "state", nil, "a consumer's checkpoint folder (repeat for more)")
	cmd.Flags().StringVar(&addr, "addr", defaultServeAddr, "address to listen on, HOST:PORT (the page has no authentication)")
	return cmd
}

// serve runs `strom serve` until a signal.
func (a *app) serve(states []string, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("--addr %q is not HOST:PORT (%v); run 'strom serve --help'", addr, err)
	}
	dir, err := a.logDir()
	if err != nil {
		return err
	}
	for _, s := range states {
		if err := checkDir("checkpoint folder", s); err != nil {
			return err
		}
	}
	page, err := web.NewLogPage(dir, web.WithStateDirs(states...))
	if err != nil {
		return err
	}
	defer page.Close()
	ln, err := service.Listen(addr)
	if err != nil {
		return err
	}
	if !loopback(host) {
		fmt.Fprintf(a.stderr, "strom: warning: --addr %s is not a loopback address: anyone who can reach it can read the page, which has no authentication\n", addr)
	}
	fmt.Fprintf(a.stdout, "serving on http://%s/ (log directory %s, read-only; Ctrl-C stops)\n", ln.Addr(), dir)
	if err := a.stdout.Flush(); err != nil {
		ln.Close()
		return fmt.Errorf("writing stdout: %w", err)
	}

	sig, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The event streams never end by themselves, so the page is closed
	// first (which ends them) and the server shut down after.
	serving, cancel := context.WithCancel(context.Background())
	go func() {
		<-sig.Done()
		page.Close()
		cancel()
	}()
	return service.Serve(serving, ln, page)
}

// loopback reports whether host names the loopback interface only:
// "localhost" or a loopback IP. An empty host (":7080") listens on every
// interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
