package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/strom-dev/strom/internal/service"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// users is the number of distinct synthetic users; their ids key the synthetic events.
const users = 50

// events are the synthetic event kinds.
var events = [...]string{"click", "view", "purchase", "login", "logout"}

// errStopped ends a send loop after POST /stop; it is not a failure.
var errStopped = errors.New("publisher: stopped")

// publisher appends records to a topic and counts what it appended.
type publisher struct {
	topic  *log.Topic
	stop   chan struct{} // closed by POST /stop
	once   sync.Once     // closes stop once
	stderr io.Writer     // where finish reports; os.Stderr

	// sendLines' with --key, read by finish on the same goroutine: the
	// expression, and how many records it keyed and did not.
	key            *regexp.Regexp
	keyed, unkeyed int64

	mu           sync.Mutex
	sent         int64
	perPartition []int64
	lastOffset   []int64
	stopped      bool
}

func newPublisher(t *log.Topic) *publisher {
	n := t.Partitions()
	p := &publisher{
		topic:        t,
		stop:         make(chan struct{}),
		stderr:       os.Stderr,
		perPartition: make([]int64, n),
		lastOffset:   make([]int64, n),
	}
	for i := range p.lastOffset {
		p.lastOffset[i] = -1
	}
	return p
}

// stats returns a snapshot of what was written, with the partitions' high watermarks.
func (p *publisher) stats() service.PublisherStats {
	p.mu.Lock()
	st := service.PublisherStats{
		Topic:        p.topic.Name(),
		Sent:         p.sent,
		PerPartition: append([]int64(nil), p.perPartition...),
		LastOffset:   append([]int64(nil), p.lastOffset...),
		Stopped:      p.stopped,
	}
	p.mu.Unlock()
	st.NextOffset = make([]int64, p.topic.Partitions())
	for i := range st.NextOffset {
		part, err := p.topic.Partition(int32(i))
		if err != nil {
			st.NextOffset[i] = -1
			continue
		}
		st.NextOffset[i] = part.HighWatermark()
	}
	return st
}

func (p *publisher) handleStats(w http.ResponseWriter, _ *http.Request) {
	service.WriteJSON(w, http.StatusOK, p.stats())
}

// handleStop stops sending; it answers once the send loop has stopped, so the stats read
// right after it are final.
func (p *publisher) handleStop(w http.ResponseWriter, r *http.Request) {
	p.once.Do(func() { close(p.stop) })
	for {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			break
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	service.WriteJSON(w, http.StatusOK, p.stats())
}

// append writes one record and counts it.
func (p *publisher) append(ctx context.Context, key, value []byte) error {
	part, off, err := p.topic.Append(ctx, log.Record{Key: key, Value: value})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.sent++
	p.perPartition[part]++
	p.lastOffset[part] = off
	p.mu.Unlock()
	return nil
}

// finish marks the publisher stopped, forces what it wrote to disk and reports: the records
// sent, and with --key how many of them it keyed and did not, with a warning naming the
// expression when it keyed none (a typo must not pass unseen while every record silently
// goes round-robin). err is why sending ended (nil: the input or --count ran out;
// errStopped: POST /stop).
func (p *publisher) finish(err error) error {
	if errors.Is(err, errStopped) {
		err = nil
	}
	for i := range p.topic.Partitions() {
		part, perr := p.topic.Partition(int32(i))
		if perr == nil {
			perr = part.Sync()
		}
		if perr != nil && err == nil {
			err = perr
		}
	}
	p.mu.Lock()
	p.stopped = true
	sent, per := p.sent, append([]int64(nil), p.perPartition...)
	p.mu.Unlock()
	keys := ""
	if p.key != nil {
		keys = fmt.Sprintf(", %d keyed by --key, %d without a key (round-robin)", p.keyed, p.unkeyed)
	}
	fmt.Fprintf(p.stderr, "publisher: stopped sending after %d records, per partition %v%s\n", sent, per, keys)
	if p.key != nil && p.keyed == 0 && p.unkeyed > 0 {
		fmt.Fprintf(p.stderr, "publisher: warning: --key %q matched no line of %d: no record has a key, all went round-robin\n", p.key.String(), p.unkeyed)
	}
	return err
}

// sendSynthetic appends synthetic user events at rate records per second until ctx is done,
// POST /stop, or count records (0 = no limit).
func (p *publisher) sendSynthetic(ctx context.Context, rate float64, count int64) error {
	pace := newPacer(rate)
	var err error
	for seq := int64(0); count == 0 || seq < count; seq++ {
		if err = pace.wait(ctx, p.stop); err != nil {
			break
		}
		user := fmt.Sprintf("user-%d", rand.IntN(users))
		value := fmt.Sprintf(`{"user":%q,"event":%q,"seq":%d,"ts":%d}`,
			user, events[rand.IntN(len(events))], seq, time.Now().UnixMilli())
		if err = p.append(ctx, []byte(user), []byte(value)); err != nil {
			break
		}
	}
	return p.finish(err)
}

// sendLines appends the lines of the file at path, each keyed by key's first group (nil when
// key is nil or does not match), at rate records per second, until the end of the file,
// ctx is done, POST /stop, or count records (0 = no limit). A value keeps the '\r' of a CRLF
// line ending with keepCR (source.KeepCR); the key is matched on the line without it.
func (p *publisher) sendLines(ctx context.Context, path string, key *regexp.Regexp, keepCR bool, rate float64, count int64) error {
	var opts []source.LinesOption
	if keepCR {
		opts = append(opts, source.KeepCR())
	}
	src := source.Lines(path, opts...)
	p.key = key
	defer src.Close()
	pace := newPacer(rate)
	var n int64
	for {
		batch, err := src.Read(ctx)
		for _, e := range batch {
			if count > 0 && n >= count {
				return p.finish(nil)
			}
			if werr := pace.wait(ctx, p.stop); werr != nil {
				return p.finish(werr)
			}
			text := e.Value
			if keepCR {
				text = strings.TrimSuffix(text, "\r") // the '\r' KeepCR kept
			}
			k := lineKey(key, text)
			if aerr := p.append(ctx, k, []byte(e.Value)); aerr != nil {
				return p.finish(aerr)
			}
			if k != nil {
				p.keyed++
			} else {
				p.unkeyed++
			}
			n++
		}
		if errors.Is(err, io.EOF) {
			return p.finish(nil)
		}
		if err != nil {
			return p.finish(err)
		}
	}
}

// lineKey returns the text of re's first capture group in line, or nil when re is nil, does
// not match, or its first group did not take part in the match.
func lineKey(re *regexp.Regexp, line string) []byte {
	if re == nil {
		return nil
	}
	m := re.FindStringSubmatchIndex(line)
	if m == nil || m[2] < 0 {
		return nil
	}
	return []byte(line[m[2]:m[3]])
}

// pacer spaces records rate per second apart, measured from its start, so a slow append
// is made up for by the next ones instead of lowering the rate.
type pacer struct {
	rate  float64 // records per second; 0 = no pacing
	start time.Time
	n     int64 // records let through so far
}

func newPacer(rate float64) *pacer { return &pacer{rate: rate, start: time.Now()} }

// wait blocks until the next record is due. It returns ctx.Err() when ctx is done and
// errStopped when stop is closed.
func (p *pacer) wait(ctx context.Context, stop <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	default:
	}
	if p.rate > 0 {
		due := p.start.Add(time.Duration(float64(p.n) / p.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-stop:
				return errStopped
			case <-t.C:
			}
		}
	}
	p.n++
	return nil
}
