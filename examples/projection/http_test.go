package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
	"github.com/strom-dev/strom/web"
)

// TestHTTPListensOnLoopbackAndIsReadOnly ensures the projection binds 127.0.0.1 unless
// --addr says otherwise, every endpoint answers only GET (405 with Allow for the rest), and
// a body over the limit is 413, on a real server.
func TestHTTPListensOnLoopbackAndIsReadOnly(t *testing.T) {
	t.Setenv("STROM_ADDR", "")
	cfg, err := parseFlags([]string{"--dir", "d", "--addr", "127.0.0.1:0"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", cfg.addr)

	p := newProjection("events", nil)
	rows := streamtest.Slice([]stream.KV[string, userStats]{{Key: "u1", Value: userStats{Events: 1, Last: "{}"}}})
	p.table = stream.ToTable(stream.KeyBy(stream.From(rows), func(kv stream.KV[string, userStats]) string { return kv.Key }))
	require.NoError(t, p.table.Run(t.Context())) // ready to answer
	p.parts = 1
	p.page = web.Pipeline(&p.mon)
	t.Cleanup(func() { _ = p.page.Close() })
	base := testutil.ServeHTTP(t, p.routes(http.NotFoundHandler()))
	testutil.RequireReadOnly(t, base, "/stats", "/health", "/users/u1", "/users", "/ui/", "/ui/snapshot.json")
	testutil.RequireBodyLimit(t, http.MethodGet, base+"/users/u1")
}
