package stream

// The waits below let stream_test wait on the progress ticker's state, a
// condition, instead of sleeping for the wall time it takes.

// WaitSplitTicks blocks until the gen of every running pipeline has moved
// splitAfter times since the call: a sequential stage working on a batch
// then hands on what it finished before its next record.
func WaitSplitTicks() {
	start := map[*runtime]uint64{}
	ticker.mu.Lock()
	for rt := range ticker.rts {
		start[rt] = rt.gen.Load()
	}
	ticker.mu.Unlock()
	waitFor(func() bool {
		for rt, g0 := range start {
			if rt.gen.Load()-g0 < splitAfter {
				return false
			}
		}
		return true
	})
}

// WaitHalted blocks until every running pipeline's stages have been told to
// halt (the context.AfterFunc of a cancel has run).
func WaitHalted() {
	waitFor(func() bool {
		for rt := range ticker.rts {
			if !rt.halted() {
				return false
			}
		}
		return true
	})
}

// waitFor waits, holding ticker.mu between checks, until cond (called with
// it held) is true: the ticker broadcasts after every tick and halt.
func waitFor(cond func() bool) {
	ticker.mu.Lock()
	defer ticker.mu.Unlock()
	for !cond() {
		ticker.changedLocked().Wait()
	}
}

// MarkRevoked does the first step of a revocation on the hooks Run gave
// an Assignable source: it marks the partitions revoked (no record of
// them starts in a stage from then on) without waiting or saving, so a
// test can tell the records that started before it from those after.
func MarkRevoked(h RebalanceHooks, parts ...TopicPartition) {
	h.(*runtime).revoke(parts)
}

// TableLocked reports whether a writer holds t's lock or waits for it (a
// read lock could not be taken now).
func TableLocked[K comparable, V any](t *Table[K, V]) bool {
	if t.mu.TryRLock() {
		t.mu.RUnlock()
		return false
	}
	return true
}

// JoinHeld returns how many records the windowed joins of s's pipeline
// hold while it runs (both inputs together), -1 when it is not running.
// It takes the joins' lock: call it from a stage before the join (a Tap on
// an input), never after it, which runs under that lock.
func JoinHeld[T any](s *Stream[T]) int {
	rt := s.p.running.Load()
	if rt == nil {
		return -1
	}
	n := 0
	for _, st := range rt.stateful {
		if h, ok := st.(interface{ held() int }); ok {
			n += h.held()
		}
	}
	return n
}
