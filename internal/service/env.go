package service

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Env gives flag defaults from environment variables. The first variable that does not
// parse is kept in Err, and the service stops at startup with it (see [Env.Check]).
type Env struct {
	// Err is the first bad environment variable met, nil when all parsed.
	Err error
}

// String returns the value of the environment variable name, or def when it is unset or empty.
func (e *Env) String(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Int returns the environment variable name parsed as a base-10 integer, or def when it is
// unset or empty. A value that does not parse records an error in e.Err and returns def.
func (e *Env) Int(name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.fail(fmt.Errorf("environment %s=%q: not an integer", name, v))
		return def
	}
	return n
}

// Float returns the environment variable name parsed as a float, or def when it is unset or
// empty. A value that does not parse records an error in e.Err and returns def.
func (e *Env) Float(name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.fail(fmt.Errorf("environment %s=%q: not a number", name, v))
		return def
	}
	return f
}

// Duration returns the environment variable name parsed by [time.ParseDuration] ("2ms",
// "1.5s"), or def when it is unset or empty. A value that does not parse records an error in
// e.Err and returns def.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(fmt.Errorf("environment %s=%q: not a duration (e.g. 2ms, 1s)", name, v))
		return def
	}
	return d
}

// Bool returns the environment variable name parsed by [strconv.ParseBool] ("1", "true",
// "0", "false", ...), or def when it is unset or empty. A value that does not parse records
// an error in e.Err and returns def.
func (e *Env) Bool(name string, def bool) bool {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(fmt.Errorf("environment %s=%q: not a boolean (true, false, 1, 0)", name, v))
		return def
	}
	return b
}

func (e *Env) fail(err error) {
	if e.Err == nil {
		e.Err = err
	}
}
