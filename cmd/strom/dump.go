package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/samber/lo"
	"github.com/spf13/cobra"

	"github.com/strom-dev/strom/log"
)

func newDumpCmd(a *app) *cobra.Command {
	var asJSON bool
	var previewBytes int
	cmd := &cobra.Command{
		Use:   "dump SEGMENT_FILE",
		Short: "Print every frame of a segment file",
		Long: `Print every frame of one segment file (a partition's NNNNNNNNNNNNNNNNNNNN.log),
as kafka-dump-log does: its byte position, offset, body length, stored CRC32C
and whether it matches, epoch, timestamp (milliseconds), key and value sizes
(-1: nil), header keys, the key and a printable preview of the value
(printable ASCII as is, other bytes escaped as \n, \xe9, ...; cut after
--preview-bytes with "...").

It reads until the end of the data (end of file, or the zero tail of a
pre-sized segment) or the first frame that is not intact, which it prints
with the reason, and then looks behind it for an intact frame, as recovery
and verify do. A bad frame with nothing intact behind it, in the last segment
of its folder, is a torn tail (what a crash during a write leaves; the
writer's next open cuts it): exit 0. A bad frame or a zero length with an
intact frame behind it, or a bad frame in a segment a later one follows, is
corruption: exit 3. A file not named like a segment whose first frame is not
intact is not a segment file: exit 1. It needs no --dir and takes no lock:
it reads a segment a writer is appending to.

--json prints one JSON object per frame and line, with the fields position,
offset, length, crc, crcOK, epoch, timestamp, keySize, valueSize, key (and
keyEncoding "base64" when the key is not UTF-8; null for nil), headerKeys,
valuePreview and, for a bad frame, error.`,
		Example: `  strom dump /var/lib/app/log/events/0/00000000000000000000.log
  strom dump --json events/0/00000000000000004096.log | jq .offset`,
		Args: exactArgs(1, "SEGMENT_FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if previewBytes < 0 {
				return usageErrorf("--preview-bytes %d is negative", previewBytes)
			}
			return a.dump(args[0], asJSON, previewBytes)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per frame")
	cmd.Flags().IntVar(&previewBytes, "preview-bytes", 64, "bytes of each value to preview")
	// dump needs no log directory: a hidden local --dir shadows the global
	// one in its help, and is still accepted (and ignored) when given.
	cmd.Flags().String("dir", "", "unused")
	_ = cmd.Flags().MarkHidden("dir")
	return cmd
}

// frameJSON is one frame of `dump --json`.
type frameJSON struct {
	Position     int64    `json:"position"`
	Offset       int64    `json:"offset"`
	Length       uint32   `json:"length"`
	CRC          string   `json:"crc"`
	CRCOK        bool     `json:"crcOK"`
	Epoch        int32    `json:"epoch"`
	Timestamp    int64    `json:"timestamp"`
	KeySize      int      `json:"keySize"`
	ValueSize    int      `json:"valueSize"`
	Key          *string  `json:"key"`
	KeyEncoding  string   `json:"keyEncoding,omitempty"`
	HeaderKeys   []string `json:"headerKeys"`
	ValuePreview string   `json:"valuePreview"`
	Error        string   `json:"error,omitempty"`
}

// size is a key's or value's length, -1 for nil, as kafka-dump-log shows it.
func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// segmentFileName matches a segment file's name: its base offset in 20
// digits, then ".log".
var segmentFileName = regexp.MustCompile(`^\d{20}\.log$`)

func (a *app) dump(path string, asJSON bool, previewBytes int) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory: give a segment file (NNNNNNNNNNNNNNNNNNNN.log) of a partition folder", path)
	case !fi.Mode().IsRegular():
		// A FIFO's open would wait for a writer, a device's read may never end.
		return fmt.Errorf("%s is not a regular file (%s): give a segment file (NNNNNNNNNNNNNNNNNNNN.log) of a partition folder", path, fi.Mode().Type())
	}
	named := segmentFileName.MatchString(filepath.Base(path))
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	printed := false // the "Dumping" line: only once the file reads as a segment
	header := func() {
		if !printed && !asJSON {
			fmt.Fprintf(a.stdout, "Dumping %s\n", path)
		}
		printed = true
	}
	var frames, end int64
	var bad *log.FrameError
	var werr error
	err = log.ScanSegment(path, func(f log.Frame) bool {
		r := &f.Record
		offset := r.Offset
		if f.Err != nil {
			if !errors.As(f.Err, &bad) {
				bad = &log.FrameError{Position: f.Position, Reason: f.Err.Error()}
			}
			offset = bad.Offset
			if frames == 0 && !named {
				return false // not a segment file: say so, print nothing
			}
		} else {
			frames++
			end = f.Position + int64(frameBytes(f.Length))
		}
		header()
		headerKeys := lo.Map(r.Headers, func(h log.Header, _ int) string { return h.Key })
		if asJSON {
			j := frameJSON{Position: f.Position, Offset: offset, Length: f.Length, CRC: fmt.Sprintf("0x%08x", f.CRC),
				CRCOK: f.CRCOK, Epoch: r.Epoch, Timestamp: r.Timestamp, KeySize: size(r.Key), ValueSize: size(r.Value),
				HeaderKeys: headerKeys, ValuePreview: preview(r.Value, previewBytes)}
			if j.HeaderKeys == nil {
				j.HeaderKeys = []string{}
			}
			j.Key, j.KeyEncoding = encodeBytes(r.Key)
			if f.Err != nil {
				j.Error = f.Err.Error()
			}
			werr = enc.Encode(j)
			return werr == nil
		}
		if f.Err != nil {
			fmt.Fprintf(a.stdout, "BAD FRAME position: %d offset: %d length: %d crc: 0x%08x crcOK: %t: %s\n",
				f.Position, offset, f.Length, f.CRC, f.CRCOK, bad.Reason)
			return false
		}
		key := "null"
		if r.Key != nil {
			key = `"` + preview(r.Key, previewBytes) + `"`
		}
		_, werr = fmt.Fprintf(a.stdout, "offset: %d position: %d length: %d crc: 0x%08x crcOK: %t epoch: %d timestamp: %d keySize: %d valueSize: %d headerKeys: %q key: %s value: \"%s\"\n",
			offset, f.Position, f.Length, f.CRC, f.CRCOK, r.Epoch, r.Timestamp, size(r.Key), size(r.Value), headerKeys, key, preview(r.Value, previewBytes))
		return werr == nil
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("writing stdout: %w", werr)
	}
	if bad != nil && frames == 0 && !named {
		return fmt.Errorf("%s is not a strom segment file: its name is not NNNNNNNNNNNNNNNNNNNN.log and its first frame is not intact (%s)", path, bad.Reason)
	}
	header()
	if bad == nil {
		if !asJSON {
			fmt.Fprintf(a.stdout, "%d frames, end of data at byte %d\n", frames, end)
		}
		return nil
	}
	var why string
	switch next := laterSegment(path, named); {
	case bad.IntactAt > 0:
		why = fmt.Sprintf("an intact frame of offset %d follows at byte %d", bad.IntactOffset, bad.IntactAt)
	case next != "":
		why = fmt.Sprintf("the segment is sealed: %s follows it", next)
	}
	if !asJSON {
		fmt.Fprintf(a.stdout, "%d intact frames, then a bad frame at byte %d (offset %d)", frames, bad.Position, bad.Offset)
		if why == "" {
			fmt.Fprintf(a.stdout, ": a torn tail, the remains of a write a crash cut short, with nothing intact behind it\n")
		} else {
			fmt.Fprintf(a.stdout, ": corruption: %s\n", why)
		}
	}
	if why != "" {
		return fmt.Errorf("%w: %w; %s", errCorruptFound, bad, why)
	}
	return nil
}

// laterSegment returns the name of a segment file in the folder of the
// segment file path (named: its name is a segment's) with a greater base
// offset, "" if none: path is then the last segment of its partition.
func laterSegment(path string, named bool) string {
	if !named {
		return ""
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return ""
	}
	name := filepath.Base(path)
	for _, e := range entries { // sorted by name: by base offset
		if segmentFileName.MatchString(e.Name()) && e.Name() > name && !e.IsDir() {
			return e.Name()
		}
	}
	return ""
}

// frameBytes is the size of a frame on disk: the 8-byte length and CRC, the
// body, padded to 8 bytes (see the log package's frame format).
func frameBytes(length uint32) int64 {
	return (8 + int64(length) + 7) &^ 7
}
