package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tmpfsDirEnv names, in the child process RunInTmpfs starts, the directory
// to mount the tmpfs on; tmpfsSizeEnv its size.
const (
	tmpfsDirEnv  = "STROM_TEST_TMPFS_DIR"
	tmpfsSizeEnv = "STROM_TEST_TMPFS_SIZE"
)

// skipMount is what a child prints when it may not mount, so its parent
// skips.
const skipMount = "SKIP-MOUNT:"

// RunInTmpfs runs body on a fresh tmpfs of sizeBytes mounted on dir, in a
// child process: the test binary run again for this test only
// (-test.run), in a user and mount namespace of its own, so no privilege
// is needed and nothing outlives it. A full disk (ENOSPC) is then a real
// one, and RemountReadOnly a real read-only file system, even for root.
//
// In the parent it starts the child and reports its output; in the child
// (the same test calling RunInTmpfs again) it mounts and runs body. Where
// namespaces or mounting are not allowed the test is skipped, saying why,
// unless CI=true, where it fails: a CI machine must run it.
func RunInTmpfs(t *testing.T, sizeBytes int64, body func(t *testing.T, dir string)) {
	t.Helper()
	if dir := os.Getenv(tmpfsDirEnv); dir != "" {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", sizeBytes)); err != nil {
			fmt.Println(skipMount, err)
			return
		}
		// No unmount: the mount lives in the child's namespace and goes
		// with it, after the test's cleanups (which may still close files).
		body(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), tmpfsDirEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exitErr):
		skipOrFail(t, fmt.Sprintf("no private user and mount namespace here: %v", err))
	case strings.Contains(string(out), skipMount):
		skipOrFail(t, fmt.Sprintf("mounting a tmpfs is not allowed here: %s", out))
	}
	require.NoError(t, err, "child:\n%s", out)
	t.Logf("child:\n%s", out)
}

// skipOrFail skips the test saying why, or fails it under CI=true.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true: this test must run)")
	}
	t.Skip(why)
}

// runPattern is the -test.run pattern that selects exactly the test or
// subtest named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// RemountReadOnly makes the tmpfs RunInTmpfs mounted on dir read-only:
// every write on it then fails with EROFS, for root too. Call it from
// body only.
func RemountReadOnly(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
}

// FillDisk writes a file named path until the file system holding it is
// full (ENOSPC), and returns a function that deletes it, freeing the
// space. Call it from body only.
func FillDisk(t *testing.T, path string) (free func()) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for {
		_, err := f.Write(buf)
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	for { // the last page or so a 64 KiB write could not take
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	require.NoError(t, f.Close())
	return func() { require.NoError(t, os.Remove(path)) }
}
