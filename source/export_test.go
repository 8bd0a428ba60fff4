package source

import (
	"context"
	"io/fs"
)

// IdentityOf returns the device and inode of info as a FileIdentity, for
// tests.
func IdentityOf(info fs.FileInfo) FileIdentity { return identityOf(info, nil) }

// SetWaitingHook sets the function a following LinesSource calls once its
// wait is about to block, with the directory watched, and returns a func
// that removes it. Tests only; not safe with parallel tests.
func SetWaitingHook(fn func()) (reset func()) {
	waitingHook = fn
	return func() { waitingHook = nil }
}

// LoseForTest runs the source's loss callback for topic-partition, as kgo
// does when the member's session expired.
func (s *KafkaSource) LoseForTest(topic string, partition int32) {
	s.onLost(context.Background(), nil, map[string][]int32{topic: {partition}})
}

// ReadAheadForTest returns the bytes the source holds read ahead of Read
// now, the most it held at once, and how many of its reading goroutines
// are stalled: waiting for room in the budget or for Read to take the
// batch they queued. Once every partition's goroutine is stalled and Read
// is not called, nothing more is read.
func (s *TopicSource) ReadAheadForTest() (held, peak int64, stalled int) {
	held, peak, waiting := s.budget.stats()
	return held, peak, waiting + int(s.sending.Load())
}

// SetCommittedLookHook sets the function a ReadCommitted source calls
// after every look at a topic's transaction file, before it uses the
// ends, and returns a func that removes it. Tests only; not safe with
// parallel tests.
func SetCommittedLookHook(fn func()) (reset func()) {
	committedLookHook.Store(&fn)
	return func() { committedLookHook.Store(nil) }
}

// SetCommittedReadHook sets the function a ReadCommitted source calls
// after every read of a topic's transaction file (not after a look its
// cache answered), and returns a func that removes it. Tests only.
func SetCommittedReadHook(fn func()) (reset func()) {
	committedReadHook.Store(&fn)
	return func() { committedReadHook.Store(nil) }
}
