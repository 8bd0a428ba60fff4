package torture

// The child side of scenario slow: the slow consumer and its
// first-checkpoint probe.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// runSlow is scenario slow's consumer: stream.ConsumeForever with default
// options (no checkpoint policy, no pipeline options) over
// source.Partition with default options (follow, 256 KiB batches) from
// store, with a handler that sleeps c.work per record and journals the
// record before it returns. With c.firstCheckpoint set it is the probe:
// the store is wrapped to time the first Save of a position above 0.
func (c consumer) runSlow(ctx context.Context, lg *log.Log, store *journalStore, j *journal) error {
	var st checkpoint.Store = store
	var probe *firstCheckpointProbe
	if c.firstCheckpoint != "" {
		probe = &firstCheckpointProbe{Store: store, path: c.firstCheckpoint}
		st = probe
	}
	src := source.Partition(lg, Topic, c.partition, source.FromStore(st))
	err := stream.ConsumeForever(ctx, src, st, func(_ context.Context, r log.Record) error {
		if probe != nil {
			probe.handling()
		}
		time.Sleep(c.work)
		return j.add(entry{kind: kindHandled, partition: r.Partition, offset: r.Offset, id: recordID(r)})
	})
	if err != nil {
		return fmt.Errorf("torture: consume %d (slow): %w", c.partition, err)
	}
	return nil
}

// firstCheckpointProbe is a checkpoint.Store that times its first Save of
// a position above 0 from the first handler call, and writes that time
// (nanoseconds) and the position to path once the Save returned: "NANOS
// POSITION", whole (a temporary file renamed over it).
type firstCheckpointProbe struct {
	checkpoint.Store
	path    string
	first   atomic.Int64 // time.Now().UnixNano() of the first handler call; 0 before it
	written atomic.Bool
}

// handling notes the first handler call.
func (p *firstCheckpointProbe) handling() {
	if p.first.Load() == 0 {
		p.first.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Save saves through the wrapped store, timing the first position above 0.
func (p *firstCheckpointProbe) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	now := time.Now().UnixNano()
	if err := p.Store.Save(ctx, topic, partition, pos); err != nil {
		return err
	}
	first := p.first.Load()
	if pos.Offset <= 0 || first == 0 || !p.written.CompareAndSwap(false, true) {
		return nil
	}
	line := strconv.FormatInt(now-first, 10) + " " + strconv.FormatInt(pos.Offset, 10)
	tmp := p.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return fmt.Errorf("torture: probe: %w", err)
	}
	if err := os.Rename(tmp, p.path); err != nil {
		return fmt.Errorf("torture: probe: %w", err)
	}
	return nil
}
