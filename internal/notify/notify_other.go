//go:build !linux

package notify

import "errors"

// Event is one inotify event (see notify_linux.go); outside Linux none
// happens.
type Event struct {
	// Mask is the event's inotify bits.
	Mask uint32
	// Name is the file within a watched directory the event is about.
	Name string
}

// errUnsupported is Watch's error outside Linux.
var errUnsupported = errors.New("notify: inotify is only available on Linux")

// Watch watches nothing outside Linux: it returns a cancel that does
// nothing and an error, so callers look on an interval instead.
func Watch(path string, mask uint32, fn func(evs []Event)) (cancel func(), err error) {
	return func() {}, errUnsupported
}
