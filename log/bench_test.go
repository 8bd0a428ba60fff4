package log_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/log"
)

var benchSizes = []int{64, 1024}

func sizeName(n int) string {
	if n >= 1024 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkSegmentAppend measures appends of one record per call to one
// partition, for each write path and value size (64 B, 1 KiB); batch=64
// and batch=1024 pass that many records per Append call (1024 is the shape
// of the baselines' 64 KiB writes). No append waits for a sync (AckWritten),
// and the run ends with one Sync, so it times the records onto the disk,
// as BenchmarkBaselineDurablePwrite does. It reports records/s.
func BenchmarkSegmentAppend(b *testing.B) {
	for _, mode := range modes {
		for _, size := range benchSizes {
			for _, batch := range []int{1, 64, 1024} {
				b.Run(fmt.Sprintf("mode=%s/value=%s/batch=%d", mode, sizeName(size), batch), func(b *testing.B) {
					lg, err := log.Open(b.TempDir(), log.WithMode(mode))
					if err != nil {
						b.Fatal(err)
					}
					defer lg.Close()
					tp, _ := lg.CreateTopic("bench", 1)
					p, _ := tp.Partition(0)
					recs := make([]log.Record, batch)
					for i := range recs {
						recs[i] = log.Record{Value: make([]byte, size), Timestamp: 1}
					}
					ctx := context.Background()
					b.SetBytes(int64(size))
					b.ResetTimer()
					for i := 0; i < b.N; i += batch {
						n := min(batch, b.N-i)
						if _, err := p.Append(ctx, recs[:n]...); err != nil {
							b.Fatal(err)
						}
					}
					if err := p.Sync(); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				})
			}
		}
	}
}

// BenchmarkBaselineFramedPwrite is a bare loop framing records (length,
// CRC32C, body) into a 64 KiB buffer written with pwrite to one file, never
// synced: the page cache's limit. make bench shows the appends' ratio to
// it beside their ratio to BenchmarkBaselineDurablePwrite, which says why
// the latter is the one judged.
func BenchmarkBaselineFramedPwrite(b *testing.B) {
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, size := range benchSizes {
		b.Run("value="+sizeName(size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			body := make([]byte, size+32)
			frame := (8 + len(body) + 7) &^ 7
			buf := make([]byte, 0, 64<<10)
			var pos int64
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if len(buf)+frame > cap(buf) {
					if _, err := f.WriteAt(buf, pos); err != nil {
						b.Fatal(err)
					}
					pos += int64(len(buf))
					buf = buf[:0]
				}
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(body)))
				buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(body, table))
				buf = append(buf, body...)
				buf = buf[:len(buf)+frame-8-len(body)]
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkBaselineDurablePwrite is the machine's limit for writing a log
// durably, which the appends are judged against: BenchmarkBaselineFramedPwrite
// writing files of 64 MiB (the default segment size), each fdatasynced by a
// second goroutine while the loop goes on with the next (as Kafka flushes a
// segment at roll, and the log's sealer does, roll.go), and the run ends
// when every file is synced (BenchmarkSegmentAppend ends with a Sync).
//
// Why not the bare loop: it never reaches the disk within its run. A 1 s
// run writes about 1.6 GB, below the kernel's background writeback
// threshold (10% of memory), and the files are deleted before anything
// writes them back, so it measures page-cache bandwidth. On the 2-core VM
// of 2026-12-01 it framed 64 B records at 42 ns each and this loop at 107,
// the disk's write rate (about 1 GB/s); the log's appends, sealer on, took
// 94 to 110 (with the seal's sync switched off, 60).
func BenchmarkBaselineDurablePwrite(b *testing.B) {
	const fileBytes = 64 << 20
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, size := range benchSizes {
		b.Run("value="+sizeName(size), func(b *testing.B) {
			dir := b.TempDir()
			// Room for every file of a run (1 s writes at most about 2 GB,
			// 32 files): the loop never waits for a sync, as the log's
			// appends never wait for its sealers; the end waits for all.
			sealed := make(chan *os.File, 1024)
			synced := make(chan error, 1)
			go func() {
				var first error
				for f := range sealed {
					if err := f.Sync(); err != nil && first == nil {
						first = err
					}
					f.Close()
				}
				synced <- first
			}()
			files := 0
			create := func() *os.File {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%020d", files)))
				if err != nil {
					b.Fatal(err)
				}
				files++
				return f
			}
			f := create()
			body := make([]byte, size+32)
			frame := (8 + len(body) + 7) &^ 7
			buf := make([]byte, 0, 64<<10)
			var pos int64
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if len(buf)+frame > cap(buf) {
					if pos+int64(len(buf)) > fileBytes {
						sealed <- f
						f, pos = create(), 0
					}
					if _, err := f.WriteAt(buf, pos); err != nil {
						b.Fatal(err)
					}
					pos += int64(len(buf))
					buf = buf[:0]
				}
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(body)))
				buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(body, table))
				buf = append(buf, body...)
				buf = buf[:len(buf)+frame-8-len(body)]
			}
			sealed <- f
			close(sealed)
			if err := <-synced; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkBaselineMappedStore is the machine's limit for the ModeMmap
// append of one record per call: a bare loop framing one record at a time
// (length, CRC32C, body) straight into a shared mapping of a file of
// 64 MiB reserved with fallocate, each full file fdatasynced by a second
// goroutine while the loop goes on with the next, the run ending when all
// are synced, as in BenchmarkBaselineDurablePwrite. It pays the page
// faults a mapped append pays and nothing else: what BenchmarkSegmentAppend
// (mode=mmap, batch=1) takes beyond it is the log's own cost per call.
func BenchmarkBaselineMappedStore(b *testing.B) {
	const fileBytes = 64 << 20
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, size := range benchSizes {
		b.Run("value="+sizeName(size), func(b *testing.B) {
			dir := b.TempDir()
			sealed := make(chan *os.File, 1024) // as in BenchmarkBaselineDurablePwrite
			synced := make(chan error, 1)
			go func() {
				var first error
				for f := range sealed {
					if err := f.Sync(); err != nil && first == nil {
						first = err
					}
					f.Close()
				}
				synced <- first
			}()
			files := 0
			var f *os.File
			var mm []byte
			create := func() {
				var err error
				if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%020d", files))); err != nil {
					b.Fatal(err)
				}
				files++
				if err := unix.Fallocate(int(f.Fd()), 0, 0, fileBytes); err != nil {
					b.Fatal(err)
				}
				if mm, err = unix.Mmap(int(f.Fd()), 0, fileBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
					b.Fatal(err)
				}
			}
			create()
			body := make([]byte, size+32)
			frame := (8 + len(body) + 7) &^ 7
			pos := 0
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if pos+frame > fileBytes {
					if err := unix.Munmap(mm); err != nil {
						b.Fatal(err)
					}
					sealed <- f
					create()
					pos = 0
				}
				binary.LittleEndian.PutUint32(mm[pos+4:], crc32.Checksum(body, table))
				copy(mm[pos+8:], body)
				binary.LittleEndian.PutUint32(mm[pos:], uint32(len(body)))
				pos += frame
			}
			if err := unix.Munmap(mm); err != nil {
				b.Fatal(err)
			}
			sealed <- f
			close(sealed)
			if err := <-synced; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
