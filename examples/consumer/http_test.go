package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/web"
)

// TestHTTPListensOnLoopbackAndIsReadOnly ensures the consumer binds 127.0.0.1 unless --addr
// says otherwise, every endpoint answers only GET (405 with Allow for the rest), and a
// body over the limit is 413, on a real server.
func TestHTTPListensOnLoopbackAndIsReadOnly(t *testing.T) {
	t.Setenv("STROM_ADDR", "")
	cfg, err := parseFlags([]string{"--dir", "d", "--state", "s"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7071", cfg.addr)
	cfg, err = parseFlags([]string{"--dir", "d", "--state", "s", "--addr", "127.0.0.1:0"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", cfg.addr)

	ro, err := log.Open(t.TempDir(), log.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	c := &consumer{cfg: config{name: "c", topic: "events"}, lg: ro}
	c.page = web.Pipeline(&c.mon)
	t.Cleanup(func() { _ = c.page.Close() })
	base := testutil.ServeHTTP(t, c.routes(http.NotFoundHandler()))
	testutil.RequireReadOnly(t, base, "/stats", "/health", "/ui/", "/ui/snapshot.json")
	testutil.RequireBodyLimit(t, http.MethodGet, base+"/stats")
}
