package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
	"github.com/strom-dev/strom/web"
)

// TestPipelineEventsShowRecordsInFlightAndWatermarks ensures the event
// stream carries each stage's records in flight and an event-time
// Window's watermark, for the stage and per partition: a map blocked on
// record 5 of a batch of 5 holds 5 records while the window after it is at
// the event time of record 4; once released the map holds none and the
// window is at record 9's.
func TestPipelineEventsShowRecordsInFlightAndWatermarks(t *testing.T) {
	src := newPLSource()
	release := make(chan struct{})
	m := stream.From[int](src).Map(func(ctx context.Context, v int) (int, error) {
		if v == 5 {
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return v, nil
	}, stream.Name("gate"))
	eventTime := stream.EventTime(func(v int) time.Time { return time.UnixMilli(int64(v) * 1000) })
	p := stream.Window(stream.KeyBy(m, func(int) string { return "all" }), stream.Tumbling(time.Hour), stream.Count[int](),
		eventTime, stream.Name("hourly")).
		Tap(func(context.Context, stream.WindowResult[string, int64]) error { return nil })
	page := web.Pipeline(p)
	srv := httptest.NewServer(page)
	t.Cleanup(func() {
		srv.Close()
		_ = page.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	events := openEvents[web.PipelineSnapshot](t, srv.URL+"/events")
	src.append(0, 5)
	src.append(5, 5) // the gate holds them
	snap := waitEvent(t, events, time.Now().Add(10*time.Second), "5 records in flight at the gate, the window at record 4", func(s web.PipelineSnapshot) bool {
		ps, ok := plPartition(s, "orders", 0)
		return ok && len(s.Stages) == 3 && s.Stages[0].InFlight == 5 && s.Stages[1].Watermark == 4000 && len(ps.Watermarks) == 1
	})
	gate, win := snap.Stages[0], snap.Stages[1]
	assert.Equal(t, "gate", gate.Name)
	assert.False(t, gate.EventTime)
	assert.Equal(t, int64(10), gate.In)
	assert.Equal(t, "hourly", win.Name)
	assert.True(t, win.EventTime)
	assert.True(t, win.HasWatermark)
	assert.Equal(t, int64(0), win.InFlight)
	ps, _ := plPartition(snap, "orders", 0)
	assert.Equal(t, []stream.PartitionWatermark{{Stage: "hourly", Index: 1, Watermark: 4000, HasWatermark: true}}, ps.Watermarks)

	close(release)
	snap = waitEvent(t, events, time.Now().Add(10*time.Second), "nothing in flight, the window at record 9", func(s web.PipelineSnapshot) bool {
		ps, ok := plPartition(s, "orders", 0)
		return ok && s.Stages[0].InFlight == 0 && len(ps.Watermarks) == 1 && ps.Watermarks[0].Watermark == 9000
	})
	assert.Equal(t, int64(9000), snap.Stages[1].Watermark)
}

// TestPipelineSnapshotJSONIsCamelCaseAsThePageReadsIt ensures
// /snapshot.json names every field in camelCase, the stage counters and
// checkpoint positions included, and that the page's script reads those
// names and carries the hooks of the new figures (records in flight, a
// watermark per stage and partition, idle partitions).
func TestPipelineSnapshotJSONIsCamelCaseAsThePageReadsIt(t *testing.T) {
	p := stream.From[int](streamtest.Slice(ints(20), streamtest.BatchSize(5))).
		Map(func(_ context.Context, v int) (int, error) { return v, nil }, stream.Name("copy")).
		Checkpointing(&checkpoint.MemoryStore{})
	page := web.Pipeline(p)
	t.Cleanup(func() { _ = page.Close() })
	require.NoError(t, p.Run(context.Background()))
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}

	raw := get("/snapshot.json")
	var v any
	require.NoError(t, json.Unmarshal([]byte(raw), &v))
	plNoCapitalKeys(t, v)
	var m struct {
		Stages      []map[string]any `json:"stages"`
		Partitions  []map[string]any `json:"partitions"`
		Checkpoints []struct {
			Positions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Position  struct {
					Offset int64 `json:"offset"`
				} `json:"position"`
			} `json:"positions"`
		} `json:"checkpoints"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	require.Len(t, m.Stages, 1)
	assert.Equal(t, "copy", m.Stages[0]["name"])
	assert.EqualValues(t, 20, m.Stages[0]["in"])
	assert.EqualValues(t, 0, m.Stages[0]["inFlight"])
	assert.Equal(t, false, m.Stages[0]["eventTime"])
	require.Len(t, m.Partitions, 1)
	assert.Equal(t, []any{}, m.Partitions[0]["watermarks"])
	require.NotEmpty(t, m.Checkpoints)
	last := m.Checkpoints[len(m.Checkpoints)-1].Positions
	require.Len(t, last, 1)
	assert.Equal(t, streamtest.Topic, last[0].Topic)
	assert.Equal(t, int64(20), last[0].Position.Offset)

	js := get("/pipeline.js")
	for _, s := range []string{`st.name`, `p.position.offset`, `["inFlight", "in flight"]`, `"data-field": "watermark"`,
		`"data-watermark-stage"`, `"data-ms"`, `"data-idle"`, `"data-field": "idle"`, `w.watermarkMs`, `st.watermarkMs`} {
		assert.Contains(t, js, s)
	}
	for _, s := range []string{`st.Name`, `st.In`, `p.Topic`, `p.Position.Offset`} {
		assert.NotContains(t, js, s, "the JSON's names are camelCase")
	}
}

// plNoCapitalKeys fails for every object key in v (decoded JSON) that
// starts with a capital letter.
func plNoCapitalKeys(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k != "" && k[0] >= 'A' && k[0] <= 'Z' {
				t.Errorf("JSON key %q is not camelCase", k)
			}
			plNoCapitalKeys(t, e)
		}
	case []any:
		for _, e := range x {
			plNoCapitalKeys(t, e)
		}
	}
}
