//go:build !linux

package source

import "errors"

// watchDir is not available outside Linux: a following source looks at its
// file every FollowInterval.
func watchDir(string, chan struct{}) (stop func(), err error) {
	return func() {}, errors.New("source: no inotify on this platform")
}
