package log

// Inspection: what the strom command's topics list, topics describe, dump
// and verify read. Everything here reads; nothing creates a directory, takes
// a lock or changes a file, so it runs beside a writer in another process.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Topics returns the names of the topics in the log directory, sorted: every
// folder named by a valid topic name (see ValidateTopicName) that holds a
// topic.json. Other files and folders are left out. It reads the directory
// at each call, so it also lists topics other processes created. Errors: a
// missing log directory wraps fs.ErrNotExist and names it; other I/O errors
// name the directory.
func (l *Log) Topics() ([]string, error) { return ListTopics(l.dir) }

// ListTopics is Log.Topics for the log directory dir, without opening it.
func ListTopics(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("log: list topics of log directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || ValidateTopicName(e.Name()) != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name(), topicMetaFile))
		if err == nil && fi.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// Write paths as SegmentInfo.WritePath names them.
const (
	WritePathMmap   = "mmap"   // the active segment, pre-sized, written through a mapping
	WritePathFile   = "file"   // the active segment, written with pwrite
	WritePathSealed = "sealed" // a segment with a successor: it takes no more records
)

// SegmentInfo describes one segment file of a partition.
type SegmentInfo struct {
	Path       string // the segment file's path
	BaseOffset int64  // offset of its first record (its name)
	NextOffset int64  // one past its last record
	Records    int64  // NextOffset - BaseOffset
	// Bytes is the size in bytes of its intact frames: the data, not what
	// is reserved. A ModeMmap active segment's file is longer (its zero
	// tail); a sealed segment's file is exactly this long.
	Bytes int64
	// DiskBytes is the space the file takes on disk, in bytes (st_blocks
	// * 512): a pre-sized ModeMmap segment reserves more than its data, a
	// sparse one may take less than its length.
	DiskBytes int64
	// FileBytes is the file's length in bytes (st_size).
	FileBytes int64
	// Sealed reports that the segment has a successor: it was forced to
	// disk and takes no more records.
	Sealed bool
	// SealMarker reports that its seal marker (<base>.sealed) exists, which
	// lets Open trust it without walking it. A sealed segment without one
	// (a failed marker write, or markers removed) is walked at open.
	SealMarker bool
	// WritePath is WritePathMmap or WritePathFile for the active segment,
	// WritePathSealed for a sealed one. Through a partition this process
	// does not write (a ReadOnly log, or a topic not locked yet), the
	// active segment counts as WritePathMmap when its file is longer than
	// its frames (the zero tail of a pre-sized segment).
	WritePath string
	ModTime   time.Time // last write: the file's modification time
}

// Segments describes the partition's segments, oldest first, as the
// partition knows them (on a partition this process does not write, after
// looking for the writer's new records and segments, as NextOffset does).
// Bytes and offsets come from the partition; DiskBytes, FileBytes and
// ModTime from a stat of each file. A segment deleted by retention between
// the two is left out. Errors: ErrClosed; a failed stat, naming the file.
func (p *Partition) Segments() ([]SegmentInfo, error) {
	if p.readOnly() {
		p.refresh()
	}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return nil, fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	infos := make([]SegmentInfo, len(p.segments))
	for i, s := range p.segments {
		infos[i] = SegmentInfo{Path: s.path, BaseOffset: s.base, NextOffset: s.next,
			Records: s.next - s.base, Bytes: s.size, Sealed: i < len(p.segments)-1}
		switch s.w.(type) {
		case *mmapWriter:
			infos[i].WritePath = WritePathMmap
		case *fileWriter:
			infos[i].WritePath = WritePathFile
		}
		if infos[i].Sealed {
			infos[i].WritePath = WritePathSealed
		}
	}
	p.mu.RUnlock()

	out := infos[:0]
	for _, in := range infos {
		fi, err := os.Stat(in.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted by retention since
		}
		if err != nil {
			return nil, fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
		}
		in.FileBytes, in.ModTime = fi.Size(), fi.ModTime()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			in.DiskBytes = st.Blocks * 512
		}
		if in.WritePath == "" {
			in.WritePath = WritePathFile
			if in.FileBytes > in.Bytes {
				in.WritePath = WritePathMmap
			}
		}
		_, err = os.Stat(filepath.Join(filepath.Dir(in.Path), sealedName(in.BaseOffset)))
		in.SealMarker = err == nil
		out = append(out, in)
	}
	return out, nil
}
