package service

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExitCodeFollowsTheServicesConvention proves the exit statuses the
// services document: 0 for help and success, 2 for a usage error, 1 for a
// failed run, errors printed with the service's name.
func TestExitCodeFollowsTheServicesConvention(t *testing.T) {
	parse := func(args []string) (string, error) {
		switch args[0] {
		case "-h":
			return "", flag.ErrHelp
		case "bad":
			return "", fmt.Errorf("flag provided but not defined: -x")
		}
		return args[0], nil
	}
	run := func(c string) error {
		if c == "fail" {
			return errors.New("disk full")
		}
		return nil
	}
	for _, c := range []struct {
		arg, stderr string
		code        int
	}{
		{"-h", "", 0},
		{"ok", "", 0},
		{"bad", "svc: flag provided but not defined: -x\n", 2},
		{"fail", "svc: disk full\n", 1},
	} {
		var stderr bytes.Buffer
		assert.Equal(t, c.code, exitCode("svc", []string{c.arg}, &stderr, parse, run), c.arg)
		assert.Equal(t, c.stderr, stderr.String(), c.arg)
	}
}
