package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strom-dev/strom/checkpoint"
)

// A FileStore keeps one JSON file per topic-partition; a damaged file is an
// error, never "not found".
func ExampleFileStore() {
	dir, err := os.MkdirTemp("", "strom-checkpoint")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "positions"))
	if err != nil {
		panic(err)
	}

	// Offsets 0..40 of events/0 are handled: the next offset to read is 41,
	// and record 40 was written in the log's epoch 2.
	if err := store.Save(ctx, "events", 0, checkpoint.Position{Offset: 41, Epoch: 2}); err != nil {
		panic(err)
	}
	pos, found, err := store.Load(ctx, "events", 0)
	fmt.Println(pos, found, err)

	_, found, err = store.Load(ctx, "events", 1)
	fmt.Println("partition 1 found:", found, err)

	path, _ := store.Path("events", 0)
	data, _ := os.ReadFile(path)
	fmt.Print(filepath.Base(path), ": ", string(data))

	// A crash that zeroes the file is reported, not mistaken for "start over".
	_ = os.WriteFile(path, make([]byte, 16), 0o600)
	_, _, err = store.Load(ctx, "events", 0)
	fmt.Println("corrupt:", errors.Is(err, checkpoint.ErrCorrupt))
	// Output:
	// offset 41 (epoch 2) true <nil>
	// partition 1 found: false <nil>
	// events-0.position: {"version":1,"topic":"events","partition":0,"position":41,"epoch":2}
	// corrupt: true
}

// NewMemoryStore makes a MemoryStore as NewFileStore makes a FileStore (the
// zero MemoryStore is ready to use as well).
func ExampleNewMemoryStore() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore()

	_, found, _ := store.Load(ctx, "events", 0)
	fmt.Println("found before save:", found)

	_ = store.Save(ctx, "events", 0, checkpoint.At(100))
	pos, found, _ := store.Load(ctx, "events", 0)
	fmt.Println(pos, found)
	// Output:
	// found before save: false
	// offset 100 true
}

// A FileStore keeps a stage's state snapshot in <name>.state next to the
// positions; a snapshot never saved is not found, and a damaged one is an
// error.
func ExampleFileStore_SaveState() {
	dir, err := os.MkdirTemp("", "strom-checkpoint")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	store, err := checkpoint.NewFileStore(dir)
	if err != nil {
		panic(err)
	}

	_, found, err := store.LoadState(ctx, "counts")
	fmt.Println("found before save:", found, err)

	// Save the state first, then the positions it reflects.
	if err := store.SaveState(ctx, "counts", []byte(`{"a":3,"b":1}`)); err != nil {
		panic(err)
	}
	if err := store.Save(ctx, "events", 0, checkpoint.At(4)); err != nil {
		panic(err)
	}
	state, found, err := store.LoadState(ctx, "counts")
	fmt.Println(string(state), found, err)

	path, _ := store.StatePath("counts")
	info, _ := os.Stat(path)
	fmt.Println(filepath.Base(path), info.Size(), "bytes: a 24-byte header and the 13-byte state")

	_ = os.WriteFile(path, []byte("STROMST"), 0o600) // cut short by hand
	_, _, err = store.LoadState(ctx, "counts")
	fmt.Println("corrupt:", errors.Is(err, checkpoint.ErrCorrupt))
	// Output:
	// found before save: false <nil>
	// {"a":3,"b":1} true <nil>
	// counts.state 37 bytes: a 24-byte header and the 13-byte state
	// corrupt: true
}
