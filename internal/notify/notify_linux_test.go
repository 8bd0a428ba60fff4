package notify

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// waitFor bounds every wait for an event: generous, since a loaded CI
// machine may take a while to schedule the notifier's goroutine.
const waitFor = 10 * time.Second

// recorder collects a subscriber's events.
type recorder struct {
	mu  sync.Mutex
	evs []Event
}

// fn is the subscriber's callback: it copies the batch (only valid during
// the call) and never blocks.
func (r *recorder) fn(evs []Event) {
	r.mu.Lock()
	r.evs = append(r.evs, evs...)
	r.mu.Unlock()
}

// events returns a copy of what r got so far.
func (r *recorder) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.evs...)
}

// has reports whether r got an event with any of mask's bits about name.
func (r *recorder) has(mask uint32, name string) bool {
	for _, ev := range r.events() {
		if ev.Mask&mask != 0 && ev.Name == name {
			return true
		}
	}
	return false
}

// waitEvent waits until r got an event with any of mask's bits about name.
func (r *recorder) waitEvent(t *testing.T, mask uint32, name string) {
	t.Helper()
	require.Eventually(t, func() bool { return r.has(mask, name) }, waitFor, time.Millisecond,
		"no event %#x for %q; got %+v", mask, name, r.events())
}

// watch subscribes r to path for mask, cancelled at the end of the test.
func (r *recorder) watch(t *testing.T, path string, mask uint32) (cancel func()) {
	t.Helper()
	cancel, err := Watch(path, mask, r.fn)
	require.NoError(t, err)
	t.Cleanup(cancel)
	return cancel
}

// touch creates the file name in dir.
func touch(t *testing.T, dir, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
}

// appendTo writes one byte at the end of the file name in dir.
func appendTo(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{'x'})
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// kernelMask returns the event bits the kernel has for the notifier's
// watch of path (from /proc/self/fdinfo), and false when it has none.
func kernelMask(t *testing.T, path string) (uint32, bool) {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	n, err := theNotifier()
	require.NoError(t, err)
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", n.fd))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// inotify wd:1 ino:8c3 sdev:800001 mask:302 ignored_mask:0 ...
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "inotify" {
			continue
		}
		kv := make(map[string]uint64)
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			x, err := strconv.ParseUint(v, 16, 64)
			if err == nil {
				kv[k] = x
			}
		}
		if kv["ino"] == st.Ino {
			return uint32(kv["mask"]) & eventBits, true
		}
	}
	require.NoError(t, sc.Err())
	return 0, false
}

// TestWatchDeliversEvent ensures an event on a watched directory reaches
// its subscriber, with the name of the file it is about.
func TestWatchDeliversEvent(t *testing.T) {
	dir := t.TempDir()
	var r recorder
	r.watch(t, dir, unix.IN_CREATE|unix.IN_ONLYDIR)
	touch(t, dir, "a")
	r.waitEvent(t, unix.IN_CREATE, "a")
}

// TestWatchSameDirectoryDifferentMasks ensures two subscribers of one
// directory with different masks each get only their events, and that
// cancelling one neither stops the other nor leaves the kernel's mask
// wider than the other asks for. inotify has one watch per inode and
// instance and replaces its mask on every add without IN_MASK_ADD, so a
// naive shared instance loses the first subscriber's events at the second
// Watch, or the second's at the first's cancel.
func TestWatchSameDirectoryDifferentMasks(t *testing.T) {
	dir := t.TempDir()
	var creates, writes recorder
	cancelCreates := creates.watch(t, dir, unix.IN_CREATE|unix.IN_ONLYDIR)
	writes.watch(t, dir, unix.IN_MODIFY)
	m, ok := kernelMask(t, dir)
	require.True(t, ok)
	assert.Equal(t, uint32(unix.IN_CREATE|unix.IN_MODIFY), m, "the kernel's mask is the union")

	touch(t, dir, "a")
	appendTo(t, dir, "a")
	writes.waitEvent(t, unix.IN_MODIFY, "a")
	// Events are handed out in order: once creates has the later "z", it
	// has been handed all it will get of the earlier ones.
	touch(t, dir, "z")
	creates.waitEvent(t, unix.IN_CREATE, "z")

	for _, ev := range creates.events() {
		assert.Equal(t, uint32(unix.IN_CREATE), ev.Mask, "creates got %+v", ev)
	}
	for _, ev := range writes.events() {
		assert.Equal(t, uint32(unix.IN_MODIFY), ev.Mask, "writes got %+v", ev)
	}

	cancelCreates()
	m, ok = kernelMask(t, dir)
	require.True(t, ok)
	assert.Equal(t, uint32(unix.IN_MODIFY), m, "the kernel's mask narrowed to the remaining subscriber's")
	appendTo(t, dir, "z")
	writes.waitEvent(t, unix.IN_MODIFY, "z")
}

// TestCancelStopsDelivery ensures a cancelled subscriber gets no event
// that happens after its cancel returned, that cancel may be called again,
// and that the last cancel removes the kernel's watch.
func TestCancelStopsDelivery(t *testing.T) {
	dir := t.TempDir()
	var gone, sentinel recorder
	cancelGone := gone.watch(t, dir, unix.IN_CREATE)
	cancelSentinel := sentinel.watch(t, dir, unix.IN_CREATE)
	cancelGone()
	cancelGone()
	touch(t, dir, "a")
	sentinel.waitEvent(t, unix.IN_CREATE, "a")
	assert.Empty(t, gone.events())

	cancelSentinel()
	_, ok := kernelMask(t, dir)
	assert.False(t, ok, "the watch outlived its last subscriber")
}

// TestCancelFromCallback ensures fn may cancel its own subscription, as
// the log's partitions do when a new waiters file appears, without
// wedging the notifier: a later event on another watch still arrives.
func TestCancelFromCallback(t *testing.T) {
	dir := t.TempDir()
	var calls int
	var mu sync.Mutex
	var cancel func()
	mu.Lock() // cancel is set before fn can use it
	cancel, err := Watch(dir, unix.IN_CREATE, func([]Event) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		cancel()
	})
	require.NoError(t, err)
	mu.Unlock()
	var other recorder
	other.watch(t, dir, unix.IN_CREATE)

	touch(t, dir, "a")
	other.waitEvent(t, unix.IN_CREATE, "a")
	touch(t, dir, "b")
	other.waitEvent(t, unix.IN_CREATE, "b")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, calls)
}

// TestDeletedDirectoryEndsItsWatch ensures a watched directory's deletion
// hands its subscribers IN_IGNORED and ends their subscriptions (cancel
// then does nothing), and that the notifier goes on serving other watches
// and a new watch of a directory made again at the same path.
func TestDeletedDirectoryEndsItsWatch(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "d")
	require.NoError(t, os.Mkdir(dir, 0o755))
	var r, other recorder
	cancel := r.watch(t, dir, unix.IN_CREATE|unix.IN_DELETE_SELF)
	other.watch(t, parent, unix.IN_CREATE)

	require.NoError(t, os.Remove(dir))
	r.waitEvent(t, unix.IN_IGNORED, "")
	assert.True(t, r.has(unix.IN_DELETE_SELF, ""), "got %+v", r.events())
	cancel()

	touch(t, parent, "a")
	other.waitEvent(t, unix.IN_CREATE, "a")

	require.NoError(t, os.Mkdir(dir, 0o755))
	var again recorder
	again.watch(t, dir, unix.IN_CREATE)
	touch(t, dir, "b")
	again.waitEvent(t, unix.IN_CREATE, "b")
	assert.False(t, r.has(unix.IN_CREATE, "b"), "the ended subscription got an event of the new directory")
}

// TestOverflowReachesEverySubscriber ensures a queue overflow is handed to
// every subscriber, of every watch, whatever its mask: events were lost,
// and each must look at what it watches. The test holds the notifier's
// goroutine in one subscriber's callback (which real callbacks must not
// do) while more events than the queue holds happen.
func TestOverflowReachesEverySubscriber(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	require.NoError(t, err)
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	if limit > 1<<17 {
		t.Skipf("max_queued_events %d: too many events to overflow quickly", limit)
	}
	busy, quiet := t.TempDir(), t.TempDir()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var holder recorder
	cancelHolder, err := Watch(busy, unix.IN_MODIFY, func(evs []Event) {
		once.Do(func() {
			close(held)
			<-release
		})
		holder.fn(evs)
	})
	require.NoError(t, err)
	t.Cleanup(cancelHolder)
	// Whatever fails, the goroutine is let go at the end of the test.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	var bystander recorder
	bystander.watch(t, quiet, unix.IN_CREATE)

	touch(t, busy, "a")
	touch(t, busy, "b")
	appendTo(t, busy, "a")
	select {
	case <-held:
	case <-time.After(waitFor):
		t.Fatal("the first event never reached the subscriber")
	}
	// Alternate between two files: the kernel merges an event identical to
	// the last one queued.
	fa, err := os.OpenFile(filepath.Join(busy, "a"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.OpenFile(filepath.Join(busy, "b"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer fb.Close()
	for range limit/2 + 1 {
		_, err := fa.WriteAt([]byte{'x'}, 0)
		require.NoError(t, err)
		_, err = fb.WriteAt([]byte{'x'}, 0)
		require.NoError(t, err)
	}
	releaseOnce()

	bystander.waitEvent(t, unix.IN_Q_OVERFLOW, "")
	holder.waitEvent(t, unix.IN_Q_OVERFLOW, "")
	for _, ev := range bystander.events() {
		assert.Equal(t, uint32(unix.IN_Q_OVERFLOW), ev.Mask, "the bystander's mask asks for none of the writes")
	}
}

// TestWatchErrors ensures Watch refuses what it cannot watch, with a
// cancel that does nothing: a missing path (an *os.PathError), a mask
// that asks for no event, and flags that would act on other subscribers'
// watch of the inode.
func TestWatchErrors(t *testing.T) {
	dir := t.TempDir()
	cancel, err := Watch(filepath.Join(dir, "missing"), unix.IN_CREATE, func([]Event) {})
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	cancel()
	for _, mask := range []uint32{0, unix.IN_ONLYDIR, unix.IN_CREATE | unix.IN_ONESHOT, unix.IN_CREATE | unix.IN_MASK_ADD, unix.IN_CREATE | unix.IN_MASK_CREATE} {
		cancel, err := Watch(dir, mask, func([]Event) {})
		assert.Error(t, err, "mask %#x", mask)
		cancel()
	}
	_, ok := kernelMask(t, dir)
	assert.False(t, ok, "a refused watch left a kernel watch")
}
