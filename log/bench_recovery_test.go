package log_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/strom-dev/strom/log"
)

// recoveryGiB is the size of the recovery benchmark's fixture per value
// size, in GiB of frames: STROM_BENCH_RECOVERY_GIB, 1 by default (CI may
// shrink it, e.g. 0.05).
func recoveryGiB(b *testing.B) float64 {
	s := os.Getenv("STROM_BENCH_RECOVERY_GIB")
	if s == "" {
		return 1
	}
	g, err := strconv.ParseFloat(s, 64)
	if err != nil || g <= 0 {
		b.Fatalf("STROM_BENCH_RECOVERY_GIB=%q: want a positive number of GiB", s)
	}
	return g
}

// BenchmarkRecovery measures opening a partition of STROM_BENCH_RECOVERY_GIB
// GiB (default 1) of 64 B and of 1 KiB records, in 64 MiB segments, against
// a baseline in the same run: a bare sequential read of the same files in
// 1 MiB chunks verifying the CRC32C of every frame. Sub-benchmarks:
//
//   - baseline: that read;
//   - walk: Open with the seal markers moved aside, so every segment is
//     walked (CRC, body check, index), as a log without markers opens;
//   - sealed: Open trusting the seal markers; only the last segment is
//     walked.
//
// Each reports s/GiB; walk and sealed also run the baseline (untimed) in
// every iteration and report its baseline-s/GiB and their ratio to it,
// x-baseline (the target for walk is at most 1.2), so the ratio compares
// the two under the same load. The fixture is written once per run (big
// Append batches) and read from the page cache by all.
func BenchmarkRecovery(b *testing.B) {
	gib := recoveryGiB(b)
	for _, size := range benchSizes {
		b.Run("value="+sizeName(size), func(b *testing.B) {
			dir := b.TempDir()
			files := writeRecoveryFixture(b, dir, size, int64(gib*(1<<30)))
			var total int64
			for _, f := range files {
				fi, err := os.Stat(f)
				if err != nil {
					b.Fatal(err)
				}
				total += fi.Size()
			}
			fixtureGiB := float64(total) / (1 << 30)
			settle()
			b.Run("baseline", func(b *testing.B) {
				buf := make([]byte, 1<<20)
				b.SetBytes(total)
				for range b.N {
					for _, f := range files {
						if err := readVerifyCRC(f, buf); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/fixtureGiB, "s/GiB")
			})
			// open times Open (and Topic) alone; each iteration also runs the
			// baseline, untimed, so x-baseline compares the two at the same
			// moment of a noisy shared machine.
			open := func(b *testing.B) {
				buf := make([]byte, 1<<20)
				var base time.Duration
				b.SetBytes(total)
				for range b.N {
					b.StopTimer()
					t0 := time.Now()
					for _, f := range files {
						if err := readVerifyCRC(f, buf); err != nil {
							b.Fatal(err)
						}
					}
					base += time.Since(t0)
					b.StartTimer()
					lg, err := log.Open(dir)
					if err != nil {
						b.Fatal(err)
					}
					tp, err := lg.Topic("bench")
					if err != nil {
						b.Fatal(err)
					}
					p, _ := tp.Partition(0)
					if p.HighWatermark() == 0 {
						b.Fatal("empty partition")
					}
					b.StopTimer()
					if err := lg.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				sPerGiB := b.Elapsed().Seconds() / float64(b.N) / fixtureGiB
				b.ReportMetric(sPerGiB, "s/GiB")
				b.ReportMetric(base.Seconds()/float64(b.N)/fixtureGiB, "baseline-s/GiB")
				b.ReportMetric(b.Elapsed().Seconds()/base.Seconds(), "x-baseline")
			}
			b.Run("walk", func(b *testing.B) {
				markers, _ := filepath.Glob(filepath.Join(dir, "bench", "0", "*.sealed"))
				for _, m := range markers {
					if err := os.Rename(m, m+".aside"); err != nil {
						b.Fatal(err)
					}
				}
				defer func() {
					for _, m := range markers {
						os.Rename(m+".aside", m)
					}
				}()
				open(b)
			})
			b.Run("sealed", open)
		})
	}
}

// writeRecoveryFixture appends records of size-byte values to topic bench
// partition 0 in dir until the frames reach totalBytes, and returns the
// segment files.
func writeRecoveryFixture(b *testing.B, dir string, size int, totalBytes int64) []string {
	b.Helper()
	lg, err := log.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	tp, err := lg.CreateTopic("bench", 1)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := tp.Partition(0)
	frame := int64(8+32+size+7) &^ 7
	batch := make([]log.Record, max(1, (4<<20)/int(frame)))
	for i := range batch {
		batch[i] = log.Record{Value: make([]byte, size), Timestamp: 1}
	}
	ctx := context.Background()
	for n := totalBytes / frame; n > 0; n -= int64(len(batch)) {
		if _, err := p.Append(ctx, batch[:min(int64(len(batch)), n)]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := lg.Close(); err != nil {
		b.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "bench", "0", "*.log"))
	if err != nil || len(files) == 0 {
		b.Fatal("no segments", err)
	}
	return files
}

// readVerifyCRC is the recovery baseline: read path sequentially in
// len(buf) chunks and check each frame's CRC32C (layout of log/doc.go),
// nothing else.
func readVerifyCRC(path string, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var pos int64
	for {
		n, err := f.ReadAt(buf, pos)
		if err != nil && err != io.EOF {
			return err
		}
		chunk := buf[:n]
		for len(chunk) >= 8 {
			l := binary.LittleEndian.Uint32(chunk)
			need := (8 + int(l) + 7) &^ 7
			if l == 0 || need > len(chunk) {
				break
			}
			if crc32.Checksum(chunk[8:8+l], castagnoliTable) != binary.LittleEndian.Uint32(chunk[4:]) {
				return &os.PathError{Op: "crc", Path: path, Err: os.ErrInvalid}
			}
			chunk = chunk[need:]
			pos += int64(need)
		}
		if n < len(buf) {
			return nil
		}
	}
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)
