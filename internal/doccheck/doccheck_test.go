package doccheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/doccheck"
)

// root is the module's directory, seen from this package's.
const root = "../.."

// guides are the guides the README links to; each must exist and hold Go.
var guides = []string{"pipelines.md", "state-and-time.md", "kafka.md", "operating.md"}

// TestEveryGoSnippetOfTheREADMEAndTheGuidesCompiles ensures no snippet in
// README.md or docs/*.md has rotted: all of them are compiled by one go
// build, and a failure names the Markdown file and line.
func TestEveryGoSnippetOfTheREADMEAndTheGuidesCompiles(t *testing.T) {
	files := docFiles(t)
	for _, g := range guidesOf("docs") {
		require.Contains(t, files, g, "the README links to it")
	}
	for _, f := range append([]string{"README.md"}, guidesOf("docs")...) {
		s, err := doccheck.Extract(filepath.Join(root, f))
		require.NoError(t, err)
		require.NotEmpty(t, s, "%s has no ```go block: the check would prove nothing", f)
	}
	require.NoError(t, doccheck.Check(t.Context(), root, files))
}

// docFiles returns README.md and docs/*.md, relative to root, as Check
// and CheckLinks take them.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

// guidesOf returns the paths of the guides under dir.
func guidesOf(dir string) []string {
	var p []string
	for _, g := range guides {
		p = append(p, filepath.Join(dir, g))
	}
	return p
}

// TestSnippetsOfEveryShapeCompile ensures the conventions of the package
// doc hold: a whole file (package main too), declarations, fragments with
// and without a snippet comment, an unused err, a block in a list item;
// and that other fence languages are left alone.
func TestSnippetsOfEveryShapeCompile(t *testing.T) {
	s, err := doccheck.Extract("testdata/good.md")
	require.NoError(t, err)
	require.Len(t, s, 7, "seven ```go blocks; the sh, text and markdown fences (and the go block inside the markdown one) are not Go to compile")
	require.NoError(t, doccheck.Check(t.Context(), root, []string{"internal/doccheck/testdata/good.md"}))
}

// TestBrokenSnippetsFailNamingTheirMarkdownLine ensures a snippet that does
// not compile fails the check, and that the failure names the Markdown file
// and the line of the error, for every broken snippet of the file (one
// go build reports them all).
func TestBrokenSnippetsFailNamingTheirMarkdownLine(t *testing.T) {
	err := doccheck.Check(t.Context(), root, []string{"internal/doccheck/testdata/broken.md"})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		"internal/doccheck/testdata/broken.md:6:",  // type error in a fragment
		"internal/doccheck/testdata/broken.md:15:", // undefined in a whole file
		"internal/doccheck/testdata/broken.md:22:", // syntax error in a fragment
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "broken.md:29:", "the block that compiles is not blamed")
	assert.NotContains(t, msg, "snippets/", "errors are reported at the Markdown, not at the generated files")
}

// writeMD writes a Markdown file for a test and returns its path.
func writeMD(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "doc.md")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestExtractGivesEachBlockItsLinesAndComment ensures the lines a failure
// names are right: the fence, the first line of code, the closing fence
// and the snippet comment's lines.
func TestExtractGivesEachBlockItsLinesAndComment(t *testing.T) {
	p := writeMD(t, strings.Join([]string{
		"# t",                       // 1
		"",                          // 2
		"<!-- snippet: func(n int)", // 3
		"type T int -->",            // 4
		"```go",                     // 5
		"_ = T(n)",                  // 6
		"```",                       // 7
		"~~~go",                     // 8
		"x := 1",                    // 9
		"~~~",                       // 10
		"```console",                // 11
		"$ go test",                 // 12
		"```",                       // 13
		"- item",                    // 14
		"  ```go",                   // 15
		"  y := 2",                  // 16
		"  ```",                     // 17
	}, "\n"))
	s, err := doccheck.Extract(p)
	require.NoError(t, err)
	require.Len(t, s, 3)
	assert.Equal(t, []int{5, 6, 7}, []int{s[0].FenceLine, s[0].Line, s[0].EndLine})
	assert.Equal(t, "_ = T(n)\n", s[0].Code)
	assert.Equal(t, 3, s[0].PreludeLine)
	assert.Equal(t, []string{" func(n int)", "type T int "}, s[0].Prelude)
	assert.Equal(t, []int{8, 9, 10}, []int{s[1].FenceLine, s[1].Line, s[1].EndLine})
	assert.Nil(t, s[1].Prelude, "a comment belongs to the next block only")
	assert.Equal(t, "y := 2\n", s[2].Code, "the fence's indentation is stripped")
	assert.Equal(t, 16, s[2].Line)
}

// TestMisplacedSnippetCommentIsAnError ensures a snippet comment that is not
// right before a ```go fence fails instead of being ignored.
func TestMisplacedSnippetCommentIsAnError(t *testing.T) {
	for name, text := range map[string]string{
		"blank line before the fence": "<!-- snippet: func(n int) -->\n\n```go\n_ = n\n```\n",
		"before a sh block":           "<!-- snippet: func(n int) -->\n```sh\nls\n```\n",
		"never closed":                "<!-- snippet: func(n int)\n```go\n_ = n\n```\n",
		"at the end of the file":      "text\n<!-- snippet: func(n int) -->\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := doccheck.Extract(writeMD(t, text))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "doc.md:")
		})
	}
}

// TestGenerateRefusesWhatItCannotCompileFaithfully ensures the mistakes a
// doc writer can make in the conventions are named with their line.
func TestGenerateRefusesWhatItCannotCompileFaithfully(t *testing.T) {
	for name, c := range map[string]struct {
		s    doccheck.Snippet
		want string
	}{
		"a package name outside the table": {
			doccheck.Snippet{File: "doc.md", FenceLine: 1, Line: 2, EndLine: 4, Code: "x := 1\nfoo.Bar(x)\n"},
			"doc.md:3: package foo is not in doccheck's import table",
		},
		"a snippet comment on a whole file": {
			doccheck.Snippet{File: "doc.md", FenceLine: 2, Line: 3, EndLine: 5, Code: "package p\n", Prelude: []string{"func(n int)"}, PreludeLine: 1},
			"doc.md:3: a block that starts with package is a whole file",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := doccheck.Generate(c.s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestEveryLinkOfTheREADMEAndTheGuidesResolves ensures that moving text
// between the README and the guides left no link to a file or heading that
// is not there.
func TestEveryLinkOfTheREADMEAndTheGuidesResolves(t *testing.T) {
	require.NoError(t, doccheck.CheckLinks(root, docFiles(t)))
}

// TestBrokenLinksAreNamedWithTheirLine ensures a link to a missing file or
// heading fails the link check at its line, and that links in code are not
// links.
func TestBrokenLinksAreNamedWithTheirLine(t *testing.T) {
	err := doccheck.CheckLinks(".", []string{"testdata/links.md"})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "links.md:8: link to missing.md")
	assert.Contains(t, msg, "links.md:8: link to #no-such-heading")
	assert.Contains(t, msg, "links.md:9: link to good.md#nowhere")
	assert.Len(t, strings.Split(msg, "\n"), 3, "only the three broken links: %s", msg)
}

// TestAnchorIsGitHubs ensures headings become the anchors GitHub links to.
func TestAnchorIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Keys, windows and state":                           "keys-windows-and-state",
		"The `strom` command":                               "the-strom-command",
		"Cancellation, drain and deadlines":                 "cancellation-drain-and-deadlines",
		"Epochs: positions that cannot skip reused offsets": "epochs-positions-that-cannot-skip-reused-offsets",
		"A worked example: sshwatch":                        "a-worked-example-sshwatch",
		"Scaling out, as it stands today":                   "scaling-out-as-it-stands-today",
		"make_bench 2":                                      "make_bench-2",
	} {
		assert.Equal(t, want, doccheck.Anchor(heading), heading)
	}
}
