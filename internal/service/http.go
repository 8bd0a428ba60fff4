package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// shutdownTimeout bounds how long [Serve] waits for in-flight requests once its context is
// cancelled; the services' handlers answer in microseconds, so one second is plenty.
const shutdownTimeout = time.Second

// Listen opens a TCP listener on addr. Its errors read "listen on 127.0.0.1:7071: address
// already in use": the address and the operating system's reason, without Go's
// "listen tcp ... bind:" noise; the services print them after their name
// ("consumer: listen on ...").
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, listenCause(err))
	}
	return ln, nil
}

// listenCause strips a net.Listen error down to the system call error (EADDRINUSE reads
// "address already in use"), or returns err as it is when there is none.
func listenCause(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// Serve serves h on ln until ctx is cancelled, then shuts the server down, waiting at most
// one second for requests in flight. It returns nil after a shutdown caused by ctx, and the
// server's error otherwise. It closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	}
}

// WriteJSON answers with status and v encoded as indented JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Health answers GET /health with 200 "ok".
func Health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// client is used by [GetJSON] and [Post]; the services answer locally, so a request that
// takes longer than two seconds has failed.
var client = &http.Client{Timeout: 2 * time.Second}

// GetJSON fetches url and decodes its JSON body into v. A status other than 200 is an error
// naming the url and the status.
func GetJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", url, err)
	}
	return nil
}

// Post sends an empty POST to url. A status other than 2xx is an error naming the url and
// the status.
func Post(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}
