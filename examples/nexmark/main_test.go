package main

import (
	"fmt"
	"os"
	"testing"
)

// tmpRoot holds the package's shared fixture, removed after the tests.
var tmpRoot string

func TestMain(m *testing.M) {
	var err error
	tmpRoot, err = os.MkdirTemp("", "nexmark-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}
