package service

import (
	"flag"
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

// Given names where the value of the flag name of fs came from, for an error message about
// that value, after fs.Parse: `environment STROM_X="value" (--name)` when the environment
// variable env gave it (the command line did not set the flag and the variable is not
// empty), the way [Env] reports a variable that does not parse, else `--name value` (a
// string value quoted: `--name "value"`). env may be "" for a flag without a variable.
func Given(fs *flag.FlagSet, name, env string) string {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if v := os.Getenv(env); !set && env != "" && v != "" {
		return fmt.Sprintf("environment %s=%q (--%s)", env, v, name)
	}
	f := fs.Lookup(name)
	if f == nil {
		return "--" + name
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if s, ok := g.Get().(string); ok {
			return fmt.Sprintf("--%s %q", name, s)
		}
	}
	return fmt.Sprintf("--%s %s", name, f.Value)
}
