package web

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/strom-dev/strom/log"
)

// streamWriteTimeout bounds each write of an event stream: a client that
// does not read is dropped.
const streamWriteTimeout = 10 * time.Second

// pageCSP keeps a page to its own script, style and event stream: no
// inline script, nothing from elsewhere, no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// maxMessage bounds a refusal's message, in bytes: whatever a request
// carries that a message names (a path, a method, a topic parameter) is
// cut well before, and this catches what an error text repeats.
const maxMessage = 400

// pageServer is what both pages serve alike: their embedded files, a
// snapshot as JSON (/snapshot.json) and as Server-Sent Events (/events),
// the one query parameter topic, and a short plain-text refusal of
// anything else.
type pageServer struct {
	assets embed.FS
	files  map[string][2]string // path -> embedded file, content type
	done   <-chan struct{}      // closed when the page is closed
	closed error                // what a closed page answers
	// interval is the page's sample interval: a browser's EventSource
	// waits about that long before reconnecting to a dropped stream.
	interval time.Duration
	// topicKnown, when set, says why a valid topic name is not served
	// (status and message), or 0 when it is.
	topicKnown func(topic string) (int, string)
	// snapshot returns a snapshot taken now, kept to topic when not "".
	snapshot func(topic string) any
	// current returns the last sample encoded (kept to topic when not
	// ""), its version and a channel closed at the next sample.
	current func(topic string) ([]byte, uint64, <-chan struct{})
}

func (ps *pageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	select {
	case <-ps.done:
		refuse(w, http.StatusServiceUnavailable, "%v", ps.closed)
		return
	default:
	}
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	file, static := ps.files[path]
	if !static && path != "/snapshot.json" && path != "/events" {
		refuse(w, http.StatusNotFound, "no page at %s; this page serves /, /snapshot.json and /events", quote(path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, "method %s not allowed: the page is read-only (GET, HEAD)", quote(r.Method))
		return
	}
	topic, ok := ps.topicParam(w, r)
	if !ok {
		return
	}
	switch path {
	case "/snapshot.json":
		b, err := json.Marshal(ps.snapshot(topic)) // one line, as each event's: a sparkline of 300 values indented would run 300 lines
		if err != nil {                            // cannot happen: plain data
			refuse(w, http.StatusInternalServerError, "encode the snapshot: %v", err)
			return
		}
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	case "/events":
		ps.serveEvents(w, r, topic)
	default:
		b, err := ps.assets.ReadFile(file[0])
		if err != nil { // cannot happen: the files are embedded
			refuse(w, http.StatusInternalServerError, "page file %s missing from the binary", file[0])
			return
		}
		h.Set("Content-Type", file[1])
		h.Set("Content-Security-Policy", pageCSP)
		_, _ = w.Write(b)
	}
}

// topicParam checks the query: topic=NAME at most once, a name that keeps
// Kafka's rule (and that topicKnown accepts), and nothing else. It returns
// the topic ("" for none), or answers 400 (404 from topicKnown) and
// returns false.
func (ps *pageServer) topicParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		refuse(w, http.StatusBadRequest, "bad query: %v", err)
		return "", false
	}
	for k, v := range q {
		switch {
		case k != "topic":
			refuse(w, http.StatusBadRequest, "unknown parameter %s: the page takes only topic", quote(k))
			return "", false
		case len(v) > 1:
			refuse(w, http.StatusBadRequest, "parameter topic given %d times: give it once", len(v))
			return "", false
		}
	}
	if !q.Has("topic") {
		return "", true
	}
	topic := q.Get("topic")
	if err := log.ValidateTopicName(topic); err != nil {
		refuse(w, http.StatusBadRequest, "bad parameter topic %s: %v", quote(topic), err)
		return "", false
	}
	if ps.topicKnown != nil {
		if status, msg := ps.topicKnown(topic); status != 0 {
			refuse(w, status, "parameter topic: %s", msg)
			return "", false
		}
	}
	return topic, true
}

// serveEvents streams the last sample at once and then each new one, as
// Server-Sent Events ("event: snapshot", the JSON on one data line), until
// the client goes, a write fails or takes over streamWriteTimeout, or the
// page is closed.
func (ps *pageServer) serveEvents(w http.ResponseWriter, r *http.Request, topic string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", max(ps.interval.Milliseconds(), 500)); err != nil {
		return
	}
	var sent uint64
	for {
		b, version, changed := ps.current(topic)
		if version != sent {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // not every ResponseWriter can
			if _, err := fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			sent = version
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-ps.done:
			return
		}
	}
}

// refuse answers status with a one-line plain-text message of at most
// maxMessage bytes.
func refuse(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	http.Error(w, "strom: "+msg, status)
}

// quote quotes s, cut to 100 bytes: a hostile path or parameter is echoed
// short and with its control characters escaped.
func quote(s string) string {
	if len(s) > 100 {
		return fmt.Sprintf("%q...", s[:100])
	}
	return fmt.Sprintf("%q", s)
}
