package service

import (
	"context"
	"flag"
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

// TestGivenNamesTheEnvironmentVariableThatSetAFlag ensures a value an environment variable
// gave is reported as that variable, as Env reports one that does not parse, and a value of
// the command line (which wins over the variable) or the default as the flag.
func TestGivenNamesTheEnvironmentVariableThatSetAFlag(t *testing.T) {
	t.Setenv("STROM_TEST_MODE", "bogus")
	t.Setenv("STROM_TEST_N", "")
	parse := func(args ...string) *flag.FlagSet {
		var env Env
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("mode", env.String("STROM_TEST_MODE", "fail"), "")
		fs.Int("n", int(env.Int("STROM_TEST_N", 3)), "")
		require.NoError(t, fs.Parse(args))
		return fs
	}
	fs := parse()
	assert.Equal(t, `environment STROM_TEST_MODE="bogus" (--mode)`, Given(fs, "mode", "STROM_TEST_MODE"))
	assert.Equal(t, `--n 3`, Given(fs, "n", "STROM_TEST_N"), "the default")
	fs = parse("--mode", "drop", "--n", "-1")
	assert.Equal(t, `--mode "drop"`, Given(fs, "mode", "STROM_TEST_MODE"), "the command line wins")
	assert.Equal(t, `--n -1`, Given(fs, "n", "STROM_TEST_N"))
	assert.Equal(t, `--mode "drop"`, Given(fs, "mode", ""))
}
