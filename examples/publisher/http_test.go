package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
)

// TestHTTPListensOnLoopbackAndOnlyStopWrites ensures the publisher binds 127.0.0.1 unless
// --addr says otherwise, its read endpoints answer only GET (405 with Allow for the rest),
// POST /stop only stops it, and a body over the limit is 413, on a real server.
func TestHTTPListensOnLoopbackAndOnlyStopWrites(t *testing.T) {
	t.Setenv("STROM_ADDR", "")
	cfg, err := parseFlags([]string{"--dir", "d"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7070", cfg.addr)
	cfg, err = parseFlags([]string{"--dir", "d", "--addr", "127.0.0.1:0"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", cfg.addr)

	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	topic, err := lg.CreateTopic("events", 1)
	require.NoError(t, err)
	pub := newPublisher(topic)
	sent := make(chan error, 1)
	go func() { sent <- pub.sendSynthetic(context.Background(), 1000, 0) }()
	base := testutil.ServeHTTP(t, pub.routes(http.NotFoundHandler()))

	testutil.RequireReadOnly(t, base, "/stats", "/health")
	testutil.RequireBodyLimit(t, http.MethodPost, base+"/stop")
	testutil.RequireBodyLimit(t, http.MethodGet, base+"/stats")
	status, allow, _ := testutil.Do(t, http.MethodGet, base+"/stop", "", false)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, "POST", allow)
	assert.False(t, pub.stats().Stopped, "refused requests stopped nothing")

	status, _, body := testutil.Do(t, http.MethodPost, base+"/stop", "", false)
	assert.Equal(t, http.StatusOK, status, body)
	require.NoError(t, <-sent)
	assert.True(t, pub.stats().Stopped)
}
