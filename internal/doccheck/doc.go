// Package doccheck compiles the Go snippets of the README and the guides
// under docs/, so that none can rot: its test (part of make test) fails when
// a ```go block in README.md or docs/*.md does not compile, naming the
// Markdown file and line, or when a relative link of theirs leads nowhere.
//
// # Which blocks
//
// Every fenced block whose info string starts with the word go (```go,
// ~~~go) is compiled; nothing can opt out. Blocks that are not Go, or not
// meant to compile (output, shell sessions, diagrams), use another fence
// language: ```sh, ```console, ```text, or none.
//
// # Three shapes
//
//   - A block whose first line of code starts with "package" is a whole
//     file and is compiled as it stands, in a package of its own. A
//     "package main" is compiled under another name, so that the check is
//     not slowed by linking (a main package without func main therefore
//     passes too).
//   - A block that parses as Go declarations (func, type, var, const) and
//     has no func(...) line in its snippet comment (below) is compiled as a
//     file of its own package.
//   - Any other block is a fragment of a function body, compiled as the
//     body of a function.
//
// Declarations and fragments get their imports like goimports would, from
// a fixed table of the package names the docs use (context, time, fmt, ...,
// log for strom's log, checkpoint, stream, source, sink, metrics, kgo, flow;
// see importTable): a name X used as X.Sel that nothing declares is
// imported. A name outside the table is an error naming the block: write
// the block as a whole file instead, or add the name to the table.
//
// A fragment's top-level := and var declarations are each followed by
// "_ = name", so a snippet may end in err := ...Run(ctx) without handling
// err; a variable declared deeper and never used is still an error.
//
// # What a fragment may assume
//
// A fragment usually uses names the surrounding prose introduced (lg,
// store, ctx, handle). It declares them in an HTML comment right before the
// fence, which Markdown does not show:
//
//	<!-- snippet: func(ctx context.Context, lg *log.Log, store checkpoint.Store) -->
//	```go
//	err := stream.From(source.Partition(lg, "events", 0, source.FromStore(store))).
//	...
//	```
//
// The comment starts with "<!-- snippet" and ends with "-->" on the line
// just before the fence (it may span several lines). A line of it that
// starts with "func(" is the parameter list of the function the fragment
// becomes the body of; every other line is Go declarations at package
// level beside it (type Order struct{...}, func parseOrder(...) ...). A
// snippet comment not followed by a ```go fence is an error, so that a
// misplaced one is never silently ignored; so is one before a whole-file
// block.
//
// # How it is compiled
//
// Every block becomes one file of a package of its own under
// internal/doccheck/snippets/ in the module, which exists only in a
// go build -overlay (nothing is written into the module tree), so the
// module's go.mod and go.sum apply. All of them are built by one go build
// (about a second with a warm build cache; a package main is not linked),
// and //line directives in the generated files make the compiler report
// errors at the Markdown file and line of the snippet (an import of a
// package the module lacks at the line of the fence).
//
// # Links
//
// [CheckLinks] checks the relative links of the same files: every linked
// file exists, and every #anchor names a heading of its file as GitHub
// makes anchors of them ([Anchor]), so that text moved between the README
// and the guides leaves no dead link.
package doccheck
