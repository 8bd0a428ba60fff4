package log

// SetBeforeSegmentRead installs f to run in every Partition.Read after the
// segment holding the offset has been acquired and the partition lock
// released, just before the segment is read (beforeSegmentReadHook). It
// returns a function that removes f. Tests use it to pause a read inside a
// segment that retention deletes.
func SetBeforeSegmentRead(f func(p *Partition, base, offset int64)) (restore func()) {
	beforeSegmentReadHook.Store(&f)
	return func() { beforeSegmentReadHook.Store(nil) }
}
