package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// ExampleOnFileChange checkpoints the lines of a file, then finds the file
// replaced: with FileChangeFail the run stops with a *FileChangedError, and
// with the default policy the new file is read from its first line.
func ExampleOnFileChange() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o600); err != nil {
		panic(err)
	}
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "checkpoints"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	run := func(opts ...source.LinesOption) error {
		src := source.Lines(path, opts...)
		if err := src.Resume(ctx, store); err != nil {
			return err
		}
		return stream.From(src).
			Tap(func(_ context.Context, line string) error { fmt.Println("handled", line); return nil }).
			Checkpointing(store).
			Run(ctx)
	}
	if err := run(); err != nil {
		panic(err)
	}

	// A new file takes the old one's name, as an editor's save or a
	// rotation does.
	if err := os.WriteFile(path+".new", []byte("three\n"), 0o600); err != nil {
		panic(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		panic(err)
	}
	err = run(source.OnFileChange(source.FileChangeFail))
	var changed *source.FileChangedError
	if errors.As(err, &changed) {
		fmt.Println(errors.Is(err, source.ErrFileChanged), changed.Change, "at position", changed.Position)
	}
	if err := run(); err != nil {
		panic(err)
	}
	// Output:
	// handled one
	// handled two
	// true replaced at position 2
	// handled three
}

// ExampleFollow tails a file a logger appends to: a line is handed out once
// its '\n' has been written.
func ExampleFollow() {
	dir, err := os.MkdirTemp("", "strom-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.log")
	if err := os.WriteFile(path, []byte("started\n"), 0o600); err != nil {
		panic(err)
	}
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			panic(err)
		}
	}

	src := source.Lines(path, source.Follow())
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	show := func() {
		batch, err := src.Read(ctx) // waits until there is a whole line
		if err != nil {
			panic(err)
		}
		for _, e := range batch {
			fmt.Println(e.Offset, e.Value)
		}
	}
	show()
	write("request 1\nrequest 2") // the second line is not finished yet
	show()
	write(" done\n")
	show()
	// Output:
	// 0 started
	// 1 request 1
	// 2 request 2 done
}
