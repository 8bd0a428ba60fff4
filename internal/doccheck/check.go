package doccheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// importTable maps the package names a snippet may use without importing
// them to their import paths. log is strom's log, as everywhere in the docs.
var importTable = map[string]string{
	"bytes":      "bytes",
	"context":    "context",
	"errors":     "errors",
	"filepath":   "path/filepath",
	"fmt":        "fmt",
	"http":       "net/http",
	"io":         "io",
	"json":       "encoding/json",
	"os":         "os",
	"signal":     "os/signal",
	"slices":     "slices",
	"strconv":    "strconv",
	"strings":    "strings",
	"sync":       "sync",
	"syscall":    "syscall",
	"testing":    "testing",
	"time":       "time",
	"checkpoint": "github.com/strom-dev/strom/checkpoint",
	"kafkatest":  "github.com/strom-dev/strom/kafkatest",
	"log":        "github.com/strom-dev/strom/log",
	"metrics":    "github.com/strom-dev/strom/metrics",
	"sink":       "github.com/strom-dev/strom/sink",
	"source":     "github.com/strom-dev/strom/source",
	"stream":     "github.com/strom-dev/strom/stream",
	"streamtest": "github.com/strom-dev/strom/stream/streamtest",
	"flow":       "github.com/reugn/go-streams/flow",
	"streams":    "github.com/reugn/go-streams",
	"kgo":        "github.com/twmb/franz-go/pkg/kgo",
	"otel":       "go.opentelemetry.io/otel",
	"require":    "github.com/stretchr/testify/require",
}

// snippetDir is where, in the module, the packages of the snippets exist
// during the build: only in the overlay, never on disk.
const snippetDir = "internal/doccheck/snippets"

// Check extracts the ```go blocks of the Markdown files (paths relative to
// root, or absolute) and compiles all of them with one go build run in
// root, the module's directory. It returns nil when every block compiles,
// and otherwise an error listing every failure at its Markdown file and
// line: a block that cannot be turned into a package (a misplaced snippet
// comment, a package name not in the import table) and the compiler's
// errors. A file without ```go blocks is no error.
func Check(ctx context.Context, root string, files []string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("doccheck: %w", err)
	}
	var snippets []Snippet
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(root, f)
		}
		s, err := Extract(f)
		if err != nil {
			return err
		}
		snippets = append(snippets, s...)
	}
	if len(snippets) == 0 {
		return nil
	}

	tmp, err := os.MkdirTemp("", "doccheck-")
	if err != nil {
		return fmt.Errorf("doccheck: %w", err)
	}
	defer os.RemoveAll(tmp)

	var problems []error
	overlay := map[string]string{}
	var pkgs []string
	for i, s := range snippets {
		src, err := Generate(s)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		rel, _ := filepath.Rel(root, s.File)
		dir := filepath.Join(snippetDir, fmt.Sprintf("%s_%d", packageName(rel), s.Line))
		gen := filepath.Join(tmp, fmt.Sprintf("%d.go", i))
		if err := os.WriteFile(gen, src, 0o600); err != nil {
			return fmt.Errorf("doccheck: %w", err)
		}
		overlay[filepath.Join(root, dir, "snippet.go")] = gen
		pkgs = append(pkgs, "./"+filepath.ToSlash(dir))
	}
	if len(pkgs) > 0 {
		if err := build(ctx, root, tmp, overlay, pkgs); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// build runs one go build of pkgs in root with the overlay.
func build(ctx context.Context, root, tmp string, overlay map[string]string, pkgs []string) error {
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		return fmt.Errorf("doccheck: %w", err)
	}
	ovPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o600); err != nil {
		return fmt.Errorf("doccheck: %w", err)
	}
	// go test puts GOROOT/bin first in a test's PATH, so this is the go
	// that runs the test.
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-overlay", ovPath}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("doccheck: go build of %d snippets: %w\n%s", len(pkgs), err, compilerErrors(out))
	}
	return nil
}

// compilerErrors returns go build's output without the "# package" lines
// that name the generated packages: every error line names its Markdown
// file and line already.
func compilerErrors(out []byte) string {
	var keep []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "# ") && strings.Contains(l, snippetDir) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// packageName turns a path into a name usable as a package directory:
// lower case letters, digits and underscores.
func packageName(path string) string {
	b := []byte(strings.ToLower(path))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

var (
	packageClause = regexp.MustCompile(`^package\s+(\w+)`)
	mainClause    = regexp.MustCompile(`(?m)^package\s+main\b`)
)

// Generate returns the Go file a snippet compiles as (see the package doc
// for the three shapes), with //line directives that put its lines at the
// snippet's Markdown lines. It fails, naming the snippet, when a whole-file
// block has a snippet comment and when the snippet uses a package name the
// import table does not have.
func Generate(s Snippet) ([]byte, error) {
	abs, err := filepath.Abs(s.File)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	lineDir := func(line int) string { return fmt.Sprintf("//line %s:%d:1\n", abs, line) }

	if packageClause.MatchString(firstCodeLine(s.Code)) {
		if s.Prelude != nil {
			return nil, fmt.Errorf("doccheck: %s: a block that starts with package is a whole file: it takes no snippet comment (line %d)", s.Where(), s.PreludeLine)
		}
		// package main is compiled as a library, so go build does not link it.
		code := mainClause.ReplaceAllString(s.Code, "package main_snippet")
		return []byte(lineDir(s.Line) + code), nil
	}

	params, decls := splitPrelude(s)
	var preludeSrc strings.Builder
	if len(decls) > 0 {
		preludeSrc.WriteString(lineDir(s.PreludeLine))
		for _, l := range decls {
			preludeSrc.WriteString(l)
			preludeSrc.WriteByte('\n')
		}
	}

	// A block without parameters that parses as a file is declarations;
	// anything else is a body.
	declFile := preludeSrc.String() + lineDir(s.Line) + s.Code
	var body string
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package snippet\n"+declFile, parser.SkipObjectResolution); err == nil && params == "" {
		body = declFile
	} else {
		if params == "" {
			params = "()"
		}
		body = preludeSrc.String() + lineDir(s.FenceLine) + "func _" + params + " {\n" + lineDir(s.Line) + s.Code
		uses := ""
		if names := topLevelVars("package snippet\n" + body + "}\n"); len(names) > 0 {
			uses = lineDir(s.EndLine)
			for _, n := range names {
				uses += "_ = " + n + "\n"
			}
		}
		body += uses + "}\n"
	}

	imports, err := neededImports(s, "package snippet\n"+body)
	if err != nil {
		return nil, err
	}
	var src strings.Builder
	src.WriteString("package snippet\n\n")
	// An import that fails (a package missing from the module) is blamed
	// on the fence.
	src.WriteString(lineDir(s.FenceLine))
	for _, p := range imports {
		fmt.Fprintf(&src, "import %q\n", p)
	}
	src.WriteString(body)
	return []byte(src.String()), nil
}

// firstCodeLine returns the first line of code that is neither blank nor a
// // comment.
func firstCodeLine(code string) string {
	for l := range strings.SplitSeq(code, "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "//") {
			return t
		}
	}
	return ""
}

// splitPrelude returns the snippet comment's parameter list ("(...)" of its
// func(...) line, "" without one) and its other lines, the func line blanked
// so that the others keep their line numbers.
func splitPrelude(s Snippet) (params string, decls []string) {
	nonBlank := false
	for _, l := range s.Prelude {
		t := strings.TrimSpace(l)
		if params == "" && strings.HasPrefix(t, "func(") {
			params = strings.TrimPrefix(t, "func")
			decls = append(decls, "")
			continue
		}
		nonBlank = nonBlank || t != ""
		decls = append(decls, l)
	}
	if !nonBlank {
		decls = nil
	}
	return params, decls
}

// topLevelVars returns the names a function body declares at its top level
// with := or var, for "_ = name" lines; nil when src does not parse (the
// compiler then reports the syntax error at its line).
func topLevelVars(src string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "_" || fn.Body == nil {
			continue
		}
		for _, st := range fn.Body.List {
			switch st := st.(type) {
			case *ast.AssignStmt:
				if st.Tok == token.DEFINE {
					for _, e := range st.Lhs {
						if id, ok := e.(*ast.Ident); ok {
							add(id)
						}
					}
				}
			case *ast.DeclStmt:
				if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, sp := range g.Specs {
						for _, id := range sp.(*ast.ValueSpec).Names {
							add(id)
						}
					}
				}
			}
		}
	}
	return names
}

// neededImports returns the import paths of the package names src uses as
// X.Sel without declaring X, sorted; an error names the Markdown line of a
// name the import table does not have. A src that does not parse needs no
// imports: the compiler reports its syntax error.
func neededImports(s Snippet, src string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return nil, nil
	}
	unresolved := map[*ast.Ident]bool{}
	for _, id := range f.Unresolved {
		unresolved[id] = true
	}
	var paths []string
	var problem error
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || !unresolved[id] {
			return true
		}
		p, ok := importTable[id.Name]
		if !ok {
			if problem == nil {
				pos := fset.Position(id.Pos())
				problem = fmt.Errorf("doccheck: %s:%d: package %s is not in doccheck's import table (internal/doccheck/check.go): add it there, or write the block as a whole file with its imports",
					s.File, pos.Line, id.Name)
			}
			return true
		}
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
		return true
	})
	slices.Sort(paths)
	return paths, problem
}
