// Package loghub finds the Loghub samples (../shared/data/loghub beside the
// repository) that tests publish and consume as real input.
package loghub

import (
	"os"
	"path/filepath"
	"testing"
)

// Files are the five 2,000-line samples.
var Files = []string{"Apache_2k.log", "HDFS_2k.log", "Linux_2k.log", "OpenSSH_2k.log", "Zookeeper_2k.log"}

// Dir returns the folder holding the samples: $STROM_LOGHUB, else
// ../shared/data/loghub beside the repository root (found by walking up to
// go.mod). When the samples are missing the test fails under CI (CI set, as
// .ci/run runs: the real-input tests are required there) and is skipped,
// with a message saying where to put them, on a user's fresh clone, which
// has no ../shared.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("STROM_LOGHUB")
	if dir == "" {
		root, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatal("loghub: no go.mod above the working directory")
			}
			root = parent
		}
		dir = filepath.Join(root, "..", "shared", "data", "loghub")
	}
	for _, f := range Files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("loghub: the real-input tests need the Loghub samples in %s (set STROM_LOGHUB to their folder): %v", dir, err)
			}
			t.Skipf("loghub: samples not found in %s (a clone without ../shared); set STROM_LOGHUB to their folder to run this test; CI fails instead of skipping", dir)
		}
	}
	return dir
}
