package log

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// prewalk recovers the segments of one partition ahead of recoverLocked, on
// up to GOMAXPROCS goroutines: each segment below the last is trusted from
// its seal marker when one matches (see trustSealed), and every other
// segment is walked, on its own read-only descriptor. recoverLocked then
// takes the results in order (prewalk.take) and still decides every outcome
// itself: a segment that did not come back intact is walked again in order,
// so the rare paths (torn tail, corruption, repair) are the sequential ones.
//
// Why: walking is CPU-bound (a CRC32C per frame), so a partition of 1 GiB
// of 64 B records without markers walked at 1.3x the time of a bare
// sequential CRC read of its files on one core (BenchmarkRecovery, walk,
// 2026-11-30, 2-core machine); walking its 16 segments in parallel brings it
// under the baseline. Partitions of a topic were already recovered in
// parallel (openTopic); the walkers semaphore keeps the walks of all of them
// together to GOMAXPROCS.
type prewalk struct {
	jobs []prewalkJob
	next atomic.Int64 // index of the next job to take
	stop atomic.Bool  // set when recoverLocked returns: take no more jobs
	wg   sync.WaitGroup
}

type prewalkJob struct {
	done chan struct{} // closed when seg and ok are set
	seg  *segment      // the recovered copy: size, next, index (or lazy)
	ok   bool          // trusted from its marker, or walked to a clean end
	// file is the file the prewalk read: the cleaner may rename a
	// compacted copy over the name between the prewalk's open and the
	// recovery's (cleaner.go), and the result holds for that file only.
	file os.FileInfo
}

// walkers bounds the segments being prewalked at once in the process.
var walkers = make(chan struct{}, runtime.GOMAXPROCS(0))

// walkBufs recycles the 1 MiB read buffers of prewalks.
var walkBufs = sync.Pool{New: func() any { return make([]byte, walkBufferBytes) }}

// startPrewalk starts recovering the segments of bases (the partition's, in
// order) in the background. It returns nil for fewer than two segments:
// nothing to overlap. The caller must call finish when done with it.
func (r *recovery) startPrewalk(bases []int64) *prewalk {
	if len(bases) < 2 {
		return nil
	}
	pw := &prewalk{jobs: make([]prewalkJob, len(bases))}
	for i := range pw.jobs {
		pw.jobs[i].done = make(chan struct{})
	}
	for range min(runtime.GOMAXPROCS(0), len(bases)) {
		pw.wg.Go(func() {
			for {
				i := int(pw.next.Add(1) - 1)
				if i >= len(bases) || pw.stop.Load() {
					return
				}
				walkers <- struct{}{}
				r.prewalkOne(&pw.jobs[i], bases[i], i == len(bases)-1)
				<-walkers
				close(pw.jobs[i].done)
			}
		})
	}
	return pw
}

func (r *recovery) prewalkOne(j *prewalkJob, base int64, last bool) {
	s, err := openSegment(r.dir, base, os.O_RDONLY)
	if err != nil {
		return
	}
	defer s.f.Close()
	if j.file, err = s.f.Stat(); err != nil {
		return
	}
	if !last && !r.cfg.repair && s.trustSealed(r.dir, r.cfg.indexInterval) {
		j.seg, j.ok = s, true
		return
	}
	buf := walkBufs.Get().([]byte)
	why, buf, err := s.walk(buf, r.cfg.indexInterval)
	walkBufs.Put(buf)
	if !last {
		s.trimIndex()
	}
	j.seg, j.ok = s, err == nil && why.intact()
}

// take waits for the prewalk of the i-th segment and, when it came
// back intact, gives s its size, next offset and index and reports true;
// false means s must be walked here.
func (pw *prewalk) take(i int, s *segment) bool {
	if pw == nil {
		return false
	}
	j := &pw.jobs[i]
	<-j.done
	if !j.ok {
		return false
	}
	if fi, err := s.f.Stat(); err != nil || !os.SameFile(fi, j.file) {
		return false // another file under the name since: walk the one s holds
	}
	s.size, s.next, s.index, s.indexedAt, s.lazy = j.seg.size, j.seg.next, j.seg.index, j.seg.indexedAt, j.seg.lazy
	s.gaps, s.ends, s.mapped, s.tombAt, s.records = j.seg.gaps, j.seg.ends, j.seg.mapped, j.seg.tombAt, j.seg.records
	s.maxTimestamp, s.hasTimestamp = j.seg.maxTimestamp, j.seg.hasTimestamp
	return true
}

// finish stops handing out jobs and waits for the walks in flight.
func (pw *prewalk) finish() {
	if pw == nil {
		return
	}
	pw.stop.Store(true)
	pw.wg.Wait()
}
