package service

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenNamesBusyPort ensures a second service on a taken port fails with the address and
// "address already in use", nothing more.
func TestListenNamesBusyPort(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	_, err = Listen(addr)
	require.Error(t, err)
	assert.Equal(t, "listen on "+addr+": address already in use", err.Error())
}

// TestServeStopsWithContext ensures Serve answers until its context is cancelled and then
// returns nil.
func TestServeStopsWithContext(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", Health)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, mux) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok\n", string(body))

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

// TestEnvRejectsBadNumbers ensures a malformed variable is reported, not ignored.
func TestEnvRejectsBadNumbers(t *testing.T) {
	t.Setenv("STROM_TEST_INT", "12")
	t.Setenv("STROM_TEST_BAD", "twelve")
	t.Setenv("STROM_TEST_DUR", "5ms")
	var env Env
	assert.Equal(t, int64(12), env.Int("STROM_TEST_INT", 1))
	assert.Equal(t, 5*time.Millisecond, env.Duration("STROM_TEST_DUR", time.Second))
	assert.Equal(t, "x", env.String("STROM_TEST_UNSET", "x"))
	assert.NoError(t, env.Err)
	assert.Equal(t, int64(1), env.Int("STROM_TEST_BAD", 1))
	assert.Equal(t, 2.5, env.Float("STROM_TEST_BAD", 2.5))
	require.Error(t, env.Err)
	assert.Contains(t, env.Err.Error(), `STROM_TEST_BAD="twelve"`)
}
