package doccheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// inlineLink is a Markdown inline link, [text](target); the target has
	// no spaces in these docs.
	inlineLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// CheckLinks checks the relative links of the Markdown files (paths
// relative to root, or absolute): every [text](path) outside code names a
// file or directory that exists, and every #anchor, in the same file or in
// another Markdown file, names one of its headings as GitHub makes anchors
// of them. Links with a scheme (https:, mailto:) are not checked. It returns
// every broken link, each as FILE:LINE (the file as given) and the target.
func CheckLinks(root string, files []string) error {
	var problems []error
	anchors := map[string]map[string]bool{} // by absolute path
	for _, name := range files {
		f := name
		if !filepath.IsAbs(f) {
			f = filepath.Join(root, f)
		}
		lines, err := readLines(f)
		if err != nil {
			return err
		}
		inFence := false
		var open fence
		for i, line := range lines {
			if inFence {
				inFence = !open.closes(line)
				continue
			}
			if fc, _, ok := openFence(line); ok {
				inFence, open = true, fc
				continue
			}
			for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, ":") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						problems = append(problems, fmt.Errorf("%s:%d: link to %s: %w", name, i+1, target, err))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if anchors[dest] == nil {
					a, err := headingAnchors(dest)
					if err != nil {
						return err
					}
					anchors[dest] = a
				}
				if !anchors[dest][anchor] {
					problems = append(problems, fmt.Errorf("%s:%d: link to %s: no heading of %s has the anchor #%s", name, i+1, target, filepath.Base(dest), anchor))
				}
			}
		}
	}
	return errors.Join(problems...)
}

// readLines returns the lines of a file, without their line ends.
func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	return strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n"), nil
}

// headingAnchors returns the anchors GitHub gives the ATX headings (# ...)
// of a Markdown file outside code fences.
func headingAnchors(path string) (map[string]bool, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	var open fence
	for _, line := range lines {
		if inFence {
			inFence = !open.closes(line)
			continue
		}
		if fc, _, ok := openFence(line); ok {
			inFence, open = true, fc
			continue
		}
		t := strings.TrimLeft(line, "#")
		if len(t) == len(line) || len(line)-len(t) > 6 || (t != "" && t[0] != ' ') {
			continue
		}
		a := Anchor(t)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out, nil
}

// Anchor returns the anchor GitHub gives a heading's text: lower case,
// spaces as hyphens, and every character but letters, digits, hyphens and
// underscores left out (so "Keys, windows and state" is
// keys-windows-and-state and "The `strom` command" the-strom-command).
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
