//go:build !linux

package source

// notifyMask is unused outside Linux, where notify.Watch always fails and
// a following source looks at its file every FollowInterval.
const notifyMask = 0

// committedNotifyMask is unused outside Linux: a ReadCommitted source
// looks at the transaction file every CommittedPollInterval.
const committedNotifyMask = 0
