package testutil

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/service"
)

// ServeHTTP serves h as the services do (service.Listen and service.Serve, with its
// request body limit) on 127.0.0.1 at a free port, until the test ends, and returns the
// base URL, "http://127.0.0.1:PORT".
func ServeHTTP(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := service.Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String()
}

// httpClient bounds every request of these helpers: the services answer locally.
var httpClient = &http.Client{Timeout: 5 * time.Second}

// Do sends one request with body (none when empty; chunked, of unknown length, when
// chunked is true) and returns the status, the Allow header and the body of the answer.
func Do(t testing.TB, method, url, body string, chunked bool) (status int, allow, answer string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: the request goes chunked
		}
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	resp, err := httpClient.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Allow"), string(b)
}

// RequireReadOnly checks that each path under base answers GET with 200 and every method
// that could write (POST, PUT, PATCH, DELETE) with 405 Method Not Allowed and an Allow
// header offering GET and no writing method.
func RequireReadOnly(t testing.TB, base string, paths ...string) {
	t.Helper()
	for _, path := range paths {
		status, _, body := Do(t, http.MethodGet, base+path, "", false)
		assert.Equal(t, http.StatusOK, status, "GET %s: %s", path, body)
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			status, allow, body := Do(t, m, base+path, "x", false)
			assert.Equal(t, http.StatusMethodNotAllowed, status, "%s %s: %s", m, path, body)
			assert.Contains(t, allow, http.MethodGet, "%s %s: Allow header", m, path)
			for _, w := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				assert.NotContains(t, allow, w, "%s %s: Allow header", m, path)
			}
		}
	}
}

// RequireBodyLimit checks that method on base+path with a body one byte over
// service.MaxRequestBodyBytes is answered 413 naming the limit, with the length declared
// and chunked.
func RequireBodyLimit(t testing.TB, method, url string) {
	t.Helper()
	big := strings.Repeat("x", service.MaxRequestBodyBytes+1)
	for _, chunked := range []bool{false, true} {
		status, _, body := Do(t, method, url, big, chunked)
		assert.Equal(t, http.StatusRequestEntityTooLarge, status, "%s %s (chunked %v): %s", method, url, chunked, body)
		assert.Contains(t, body, "request body too large", "%s %s", method, url)
		assert.Contains(t, body, "at most 4096 bytes", "%s %s", method, url)
	}
}
