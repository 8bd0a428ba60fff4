package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
)

// TestHTTPListensOnLoopbackAndIsReadOnly ensures the relay binds 127.0.0.1 unless --addr
// says otherwise, every endpoint answers only GET (405 with Allow for the rest), and a body
// over the limit is 413, on a real server.
func TestHTTPListensOnLoopbackAndIsReadOnly(t *testing.T) {
	t.Setenv("STROM_ADDR", "")
	args := []string{"--direction", toLog, "--brokers", "b:9092", "--dir", "d", "--from", "a", "--to", "b"}
	cfg, err := parseFlags(args)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7080", cfg.addr)
	cfg, err = parseFlags(append(args, "--addr", "127.0.0.1:0"))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", cfg.addr)

	r := &relay{cfg: cfg}
	base := testutil.ServeHTTP(t, r.routes(http.NotFoundHandler()))
	testutil.RequireReadOnly(t, base, "/stats", "/health")
	testutil.RequireBodyLimit(t, http.MethodGet, base+"/stats")
}
