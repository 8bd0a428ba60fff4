package service

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeRefusesBodiesOverTheLimitWith413 ensures a request body over MaxRequestBodyBytes,
// declared or chunked, is answered 413 naming the limit without reaching the handler, and one
// at the limit reaches it whole.
func TestServeRefusesBodiesOverTheLimitWith413(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var got []int
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		got = append(got, len(b))
	})
	go func() { done <- Serve(ctx, ln, mux) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	url := "http://" + ln.Addr().String() + "/echo"

	for _, c := range []struct {
		n       int
		chunked bool
		status  int
	}{
		{MaxRequestBodyBytes, false, http.StatusOK},
		{MaxRequestBodyBytes, true, http.StatusOK},
		{MaxRequestBodyBytes + 1, false, http.StatusRequestEntityTooLarge},
		{MaxRequestBodyBytes + 1, true, http.StatusRequestEntityTooLarge},
		{64 << 20, false, http.StatusRequestEntityTooLarge},
	} {
		var body io.Reader = strings.NewReader(strings.Repeat("x", c.n))
		if c.chunked {
			body = io.MultiReader(body)
		}
		resp, err := http.Post(url, "text/plain", body)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, "%d bytes, chunked %v: %s", c.n, c.chunked, b)
		if c.status != http.StatusOK {
			assert.Contains(t, string(b), "request body too large")
			assert.Contains(t, string(b), "at most 4096 bytes are accepted")
		}
	}
	assert.Equal(t, []int{MaxRequestBodyBytes, MaxRequestBodyBytes}, got, "only the bodies within the limit reach the handler, whole")
}

// TestServeAnswersOtherMethods405WithAllow ensures a method pattern's other methods get 405
// and an Allow header through Serve (the services rely on http.ServeMux for it).
func TestServeAnswersOtherMethods405WithAllow(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", Health)
	go func() { done <- Serve(ctx, ln, mux) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	resp, err := http.Post("http://"+ln.Addr().String()+"/health", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}
