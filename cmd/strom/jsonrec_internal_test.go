package main

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// TestJSONRecordRoundTripsAnyBytes proves the JSON form of a record is
// lossless: keys, values and headers of any bytes (valid and invalid
// UTF-8, surrogates, NUL, nil and empty distinct) come back from
// parseJSONRecord exactly as they went into toJSONRecord. Being an
// internal test, it also links package main and everything it imports
// into the test binary, so go test's cache notices a change to any of
// them (the subprocess tests run a binary built in TestMain).
func TestJSONRecordRoundTripsAnyBytes(t *testing.T) {
	fixed := [][]byte{nil, {}, []byte("plain"), []byte("caf\xe9"), {0xff, 0xfe}, []byte("\xed\xa0\x80"),
		{0}, []byte("-key=x"), []byte("line\r"), []byte("<html> & \u2028")}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		fixed = append(fixed, b)
	}
	for i, v := range fixed {
		in := log.Record{Key: fixed[(i+1)%len(fixed)], Value: v, Timestamp: int64(i),
			Headers: []log.Header{{Key: string(fixed[(i+2)%len(fixed)]), Value: fixed[(i+3)%len(fixed)]}}}
		line, err := json.Marshal(toJSONRecord(&in))
		require.NoError(t, err)
		out, err := parseJSONRecord(line)
		require.NoError(t, err, "line %s", line)
		assert.Equal(t, in.Key, out.Key, "key of %s", line)
		assert.Equal(t, in.Value, out.Value, "value of %s", line)
		assert.Equal(t, in.Timestamp, out.Timestamp)
		require.Len(t, out.Headers, 1)
		assert.Equal(t, in.Headers[0].Key, out.Headers[0].Key)
		assert.Equal(t, in.Headers[0].Value, out.Headers[0].Value)
	}
}
