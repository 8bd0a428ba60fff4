package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// metaFile names, inside --dir, what the directory was made for.
const metaFile = "sshwatch.json"

// tmpPrefix starts the name of writeMeta's temporary file.
const tmpPrefix = "." + metaFile + ".tmp-"

// dirMeta is what a --dir was made for, written before anything else goes
// in: a restart must publish the same input into the same partitions and
// read its timestamps in the same year, or the log and the saved windows
// would not match what it reads.
type dirMeta struct {
	Version    int    `json:"version"` // 1
	Input      string `json:"input"`   // the --input path of the first run, for messages
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"` // of the whole input, hex
	Lines      int    `json:"lines"`
	Partitions int    `json:"partitions"`
	Year       int    `json:"year"`
}

// prepareDir creates cfg.dir if needed and returns what it is for: the
// dirMeta of an earlier run, checked against the input (data) and against
// --partitions and --year when given, or a new one written there when the
// directory is new (or empty). A directory that holds other things, or was
// made for another input, is an error: use a fresh --dir.
func prepareDir(cfg config, data []byte) (dirMeta, error) {
	sum := sha256.Sum256(data)
	want := dirMeta{Version: 1, Input: cfg.input, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		Lines: len(splitLines(data)), Partitions: cfg.partitions, Year: cfg.year}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return dirMeta{}, err
	}
	path := filepath.Join(cfg.dir, metaFile)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		entries, err := os.ReadDir(cfg.dir)
		if err != nil {
			return dirMeta{}, err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				continue // a kill inside writeMeta: nothing else went in yet
			}
			return dirMeta{}, fmt.Errorf("--dir %s is not empty and has no %s: not an sshwatch directory; use a fresh or empty one", cfg.dir, metaFile)
		}
		return want, writeMeta(cfg.dir, want)
	case err != nil:
		return dirMeta{}, err
	}
	var got dirMeta
	if err := json.Unmarshal(raw, &got); err != nil || got.Version != 1 || got.Partitions < 1 {
		return dirMeta{}, fmt.Errorf("%s: not a version 1 sshwatch file (%v)", path, err)
	}
	switch {
	case got.SHA256 != want.SHA256 || got.Bytes != want.Bytes:
		return dirMeta{}, fmt.Errorf("--dir %s was made for another input (%s, %d bytes, sha256 %.12s...), --input %s is %d bytes, sha256 %.12s...: use a fresh --dir",
			cfg.dir, got.Input, got.Bytes, got.SHA256, cfg.input, want.Bytes, want.SHA256)
	case cfg.partitionsSet && cfg.partitions != got.Partitions:
		return dirMeta{}, fmt.Errorf("--partitions %d: --dir %s was made with %d", cfg.partitions, cfg.dir, got.Partitions)
	case cfg.yearSet && cfg.year != got.Year:
		return dirMeta{}, fmt.Errorf("--year %d: --dir %s was made with %d", cfg.year, cfg.dir, got.Year)
	}
	return got, nil
}

// writeMeta writes m to dir/sshwatch.json: a temporary file, fsynced,
// renamed into place, and the directory fsynced, so a kill leaves either no
// file or the whole one.
func writeMeta(dir string, m dirMeta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, metaFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, metaFile), err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
