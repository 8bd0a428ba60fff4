package service

import (
	"bytes"
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

// MaxRequestBodyBytes is the largest request body a service accepts, in bytes (4 KiB). No
// endpoint of the services reads a body (POST /stop of the publisher takes none), so a
// larger one is a mistake or an attack: [Serve] answers it with 413 Request Entity Too
// Large before any handler runs, and reads no more of it than this.
const MaxRequestBodyBytes = 4 << 10

// Serve serves h on ln until ctx is cancelled, then shuts the server down, waiting at most
// one second for requests in flight. It returns nil after a shutdown caused by ctx, and the
// server's error otherwise. It closes ln.
//
// A request whose body is larger than [MaxRequestBodyBytes] is answered 413 without reaching
// h. h is expected to be an [http.ServeMux] of method patterns ("GET /stats"), which answers
// any other method with 405 Method Not Allowed and an Allow header; the services register
// only GET endpoints, and the publisher's POST /stop, which only stops it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: limitBodies(h), ReadHeaderTimeout: 5 * time.Second}
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

// limitBodies answers 413 to a request whose body is larger than MaxRequestBodyBytes and
// otherwise passes it to h. A declared length is judged before anything is read; a body of
// unknown length (chunked) is read up to the limit first, so h sees only a whole body.
func limitBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxRequestBodyBytes {
			tooLarge(w, r.ContentLength)
			return
		}
		body := http.MaxBytesReader(w, r.Body, MaxRequestBodyBytes)
		if r.ContentLength < 0 {
			b, err := io.ReadAll(body)
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				tooLarge(w, -1)
				return
			case err != nil:
				http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusBadRequest)
				return
			}
			body = io.NopCloser(bytes.NewReader(b))
		}
		r.Body = body
		h.ServeHTTP(w, r)
	})
}

// tooLarge answers 413, naming the limit and the declared length n (-1: unknown), and
// closes the connection rather than read the rest of the body.
func tooLarge(w http.ResponseWriter, n int64) {
	w.Header().Set("Connection", "close")
	size := "a body of unknown length over the limit"
	if n >= 0 {
		size = fmt.Sprintf("a body of %d bytes", n)
	}
	http.Error(w, fmt.Sprintf("request body too large: %s; at most %d bytes are accepted", size, MaxRequestBodyBytes),
		http.StatusRequestEntityTooLarge)
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
