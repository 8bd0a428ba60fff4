package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Snippet is one ```go block of a Markdown file.
type Snippet struct {
	// File is the Markdown file's path, as given to Extract.
	File string
	// FenceLine is the 1-based line of the opening fence; Line is the line
	// of the block's first line of code (FenceLine+1), and EndLine the line
	// of the closing fence (or one past the last line when the file ends
	// inside the block).
	FenceLine, Line, EndLine int
	// Code is the block's text, without the fences, its lines stripped of
	// the opening fence's indentation.
	Code string
	// Prelude holds the lines of the snippet comment right before the
	// fence, without "<!-- snippet", an optional ":" and "-->"; nil
	// without one. Prelude[i] is Markdown line PreludeLine+i.
	Prelude     []string
	PreludeLine int
}

// Where is the snippet's position for messages: "FILE:LINE" of its first
// line of code.
func (s Snippet) Where() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

// fence is an open code fence.
type fence struct {
	char   byte // '`' or '~'
	n      int  // its length, 3 or more
	indent int  // spaces before it
}

// openFence reports whether line opens a code fence (CommonMark: up to three
// spaces, then three or more backticks or tildes, then an info string; a
// backtick fence's info string holds no backtick), and returns it and the
// info string's first word.
func openFence(line string) (fence, string, bool) {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	rest := line[indent:]
	if indent > 3 || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return fence{}, "", false
	}
	c := rest[0]
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if n < 3 {
		return fence{}, "", false
	}
	info := strings.TrimSpace(rest[n:])
	if c == '`' && strings.ContainsRune(info, '`') {
		return fence{}, "", false
	}
	lang, _, _ := strings.Cut(info, " ")
	return fence{char: c, n: n, indent: indent}, lang, true
}

// closes reports whether line closes f: the same character, at least as
// many, nothing after them but spaces.
func (f fence) closes(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	if len(t) < f.n {
		return false
	}
	for i := range len(t) {
		if t[i] != f.char {
			return false
		}
	}
	return true
}

// snippetComment is the start of a snippet comment.
const snippetComment = "<!-- snippet"

// Extract returns the ```go blocks of the Markdown file at path, in order,
// each with the snippet comment right before it. It fails when the file
// cannot be read, and when a snippet comment is not closed or is not
// followed by a ```go fence on the next line.
func Extract(path string) ([]Snippet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("doccheck: read %s: %w", path, err)
	}

	var out []Snippet
	var prelude []string // a snippet comment waiting for its fence
	preludeLine := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if prelude == nil && strings.HasPrefix(strings.TrimSpace(line), snippetComment) {
			start := i
			text, ok := commentLines(lines, &i)
			if !ok {
				return nil, fmt.Errorf("doccheck: %s:%d: snippet comment without -->", path, start+1)
			}
			prelude, preludeLine = text, start+1
			if i+1 >= len(lines) {
				return nil, fmt.Errorf("doccheck: %s:%d: snippet comment at the end of the file, not before a ```go block", path, preludeLine)
			}
			if _, lang, ok := openFence(lines[i+1]); !ok || lang != "go" {
				return nil, fmt.Errorf("doccheck: %s:%d: snippet comment not followed by a ```go fence on the next line", path, preludeLine)
			}
			continue
		}
		f, lang, ok := openFence(line)
		if !ok {
			continue
		}
		s := Snippet{File: path, FenceLine: i + 1, Line: i + 2, Prelude: prelude, PreludeLine: preludeLine}
		prelude, preludeLine = nil, 0
		var code strings.Builder
		j := i + 1
		for ; j < len(lines) && !f.closes(lines[j]); j++ {
			l := lines[j]
			k := 0
			for k < f.indent && k < len(l) && l[k] == ' ' {
				k++
			}
			code.WriteString(l[k:])
			code.WriteByte('\n')
		}
		s.EndLine = j + 1
		s.Code = code.String()
		i = j
		if lang == "go" {
			out = append(out, s)
		}
	}
	return out, nil
}

// commentLines returns the text of the HTML comment that starts at
// lines[*i] with "<!-- snippet", one string per line, without the markers
// and an optional ":" after "snippet"; it leaves *i at the comment's last
// line. ok is false when no line ends it with "-->".
func commentLines(lines []string, i *int) (text []string, ok bool) {
	first := strings.TrimSpace(lines[*i])
	first = strings.TrimPrefix(first, snippetComment)
	first = strings.TrimPrefix(first, ":")
	for l := first; ; {
		if before, _, found := strings.Cut(l, "-->"); found {
			return append(text, before), true
		}
		text = append(text, l)
		if *i+1 >= len(lines) {
			return nil, false
		}
		*i++
		l = lines[*i]
	}
}
