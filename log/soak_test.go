package log_test

import (
	"os"
	"testing"
)

// soakEnv is the environment variable that gives the long loops of this
// package (the follow wake-up race, the kill loop) their full strength:
// STROM_SOAK=1, as `make soak` sets it. Unset, `make test` runs them with
// smaller counts that can still fail, so that it stays under 3 minutes on
// 2 cores.
const soakEnv = "STROM_SOAK"

// soak reports whether STROM_SOAK asks for the full-strength loops: any
// value but "" and "0".
func soak() bool {
	v := os.Getenv(soakEnv)
	return v != "" && v != "0"
}

// strength returns the iteration count of a long loop: full under
// STROM_SOAK=1, short with -short, normal otherwise (make test).
func strength(short, normal, full int) int {
	switch {
	case soak():
		return full
	case testing.Short():
		return short
	default:
		return normal
	}
}
