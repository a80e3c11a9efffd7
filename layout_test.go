package toolhost_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// listedPackage is what the layout checks read of go list -json.
type listedPackage struct {
	ImportPath, Name, Dir                              string
	GoFiles, IgnoredGoFiles, TestGoFiles, XTestGoFiles []string
}

// sourceFiles returns the package's files that build it on some platform,
// and with tests also its test files, as paths from the module root.
func (p *listedPackage) sourceFiles(root string, tests bool) []string {
	names := append(append([]string(nil), p.GoFiles...), p.IgnoredGoFiles...)
	if tests {
		names = append(append(names, p.TestGoFiles...), p.XTestGoFiles...)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".go") {
			rel, _ := filepath.Rel(root, filepath.Join(p.Dir, n))
			out = append(out, rel)
		}
	}
	return out
}

// goList runs go list in the module root (this package's directory).
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// modulePackages lists the module's packages.
func modulePackages(t *testing.T) []*listedPackage {
	t.Helper()
	var pkgs []*listedPackage
	dec := json.NewDecoder(bytes.NewReader(goList(t, "-json", "./...")))
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

// TestModuleLayout holds the module to rules no compiler checks: a line in
// docs/layout.md for every package, no package named like a standard
// library package (an importer of both must
// rename one), no exported package variable but error values (any importer
// could change it for everyone), and no comment that cites an issue number
// (the reason belongs in the comment, where a reader finds it).
func TestModuleLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t)

	t.Run("docs/layout.md names every package", func(t *testing.T) {
		layout, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			rel, _ := filepath.Rel(root, p.Dir)
			if rel != "." && !bytes.Contains(layout, []byte("`"+filepath.ToSlash(rel)+"`")) && !bytes.Contains(layout, []byte("`"+filepath.ToSlash(rel)+"/`")) {
				t.Errorf("docs/layout.md has no line for %s", rel)
			}
		}
	})

	t.Run("no standard library package names", func(t *testing.T) {
		std := map[string]string{}
		for _, p := range strings.Fields(string(goList(t, "std"))) {
			if !slices.Contains(strings.Split(p, "/"), "internal") && !strings.HasPrefix(p, "vendor/") {
				std[path.Base(p)] = p
			}
		}
		for _, p := range pkgs {
			if s, ok := std[p.Name]; ok {
				t.Errorf("%s: package %s has the name of the standard library's %s: name it for what it holds", p.ImportPath, p.Name, s)
			}
		}
	})

	t.Run("no exported package variables but errors", func(t *testing.T) {
		for _, p := range pkgs {
			if p.Name == "main" {
				continue
			}
			files := parseFiles(t, root, p.sourceFiles(root, false))
			errorTypes := errorTypes(files)
			for _, f := range files {
				if ast.IsGenerated(f.ast) {
					continue // protoc's output is not ours to shape
				}
				for _, spec := range packageVars(f.ast) {
					for i, name := range spec.Names {
						if name.IsExported() && !(strings.HasPrefix(name.Name, "Err") && isErrorValue(spec, i, errorTypes)) {
							t.Errorf("%s: exported package variable %s: any importer can change it; make it a function, a constant or unexported (only Err... error values may stay)",
								f.position(name.Pos()), name.Name)
						}
					}
				}
			}
		}
	})

	t.Run("the MCP protocol version is written once", func(t *testing.T) {
		var at []string
		for _, p := range pkgs {
			for _, name := range p.sourceFiles(root, false) {
				b, err := os.ReadFile(filepath.Join(root, name))
				if err != nil {
					t.Fatal(err)
				}
				for range bytes.Count(b, []byte(mcpversion.Stateless)) {
					at = append(at, name)
				}
			}
		}
		if len(at) != 1 {
			t.Errorf("the MCP protocol version %s is written %d times outside tests, in %v: name internal/mcp/mcpversion's constant instead", mcpversion.Stateless, len(at), at)
		}
	})

	t.Run("no comment cites an issue number", func(t *testing.T) {
		for _, p := range pkgs {
			for _, f := range parseFiles(t, root, p.sourceFiles(root, true)) {
				if ast.IsGenerated(f.ast) {
					continue
				}
				for _, cg := range f.ast.Comments {
					for _, c := range cg.List {
						for _, loc := range issueCite.FindAllStringIndex(c.Text, -1) {
							cite := strings.TrimLeft(c.Text[loc[0]:loc[1]], " \t(")
							t.Errorf("%s: a comment cites %q: say the reason itself, or point at code or docs in the repository",
								f.position(c.Pos()+token.Pos(loc[0])), cite)
						}
					}
				}
			}
		}
	})
}

// issueCite matches an issue number: the word issue (or issues) and a
// number, or a number right after a hash sign.
var issueCite = regexp.MustCompile(`(?i)\bissues?\s+#?\d+|(?:^|[\s(])#\d+\b`)

// parsedFile is a parsed Go file and its path from the module root.
type parsedFile struct {
	name string
	fset *token.FileSet
	ast  *ast.File
}

// position is pos as file:line, the file named from the module root.
func (f *parsedFile) position(pos token.Pos) string {
	return fmt.Sprintf("%s:%d", f.name, f.fset.Position(pos).Line)
}

// parseFiles parses the files, named from root, with their comments.
func parseFiles(t *testing.T, root string, names []string) []*parsedFile {
	t.Helper()
	var out []*parsedFile
	fset := token.NewFileSet()
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(root, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &parsedFile{name: filepath.ToSlash(n), fset: fset, ast: f})
	}
	return out
}

// packageVars returns the specs of the file's package-level variables.
func packageVars(f *ast.File) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				out = append(out, s.(*ast.ValueSpec))
			}
		}
	}
	return out
}

// errorTypes returns the names of the files' types with an Error() string
// method.
func errorTypes(files []*parsedFile) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "Error" || fd.Type.Params.NumFields() != 0 || fd.Type.Results.NumFields() != 1 {
				continue
			}
			if res, ok := fd.Type.Results.List[0].Type.(*ast.Ident); !ok || res.Name != "string" {
				continue
			}
			recv := fd.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				out[id.Name] = true
			}
		}
	}
	return out
}

// isErrorValue reports whether the spec's i-th variable is an error: of
// type error or of an error type, or made by errors.New, fmt.Errorf or a
// literal of an error type.
func isErrorValue(spec *ast.ValueSpec, i int, errorTypes map[string]bool) bool {
	isErrorType := func(e ast.Expr) bool {
		if star, ok := e.(*ast.StarExpr); ok {
			e = star.X
		}
		id, ok := e.(*ast.Ident)
		return ok && (id.Name == "error" || errorTypes[id.Name])
	}
	if spec.Type != nil {
		return isErrorType(spec.Type)
	}
	if i >= len(spec.Values) {
		return false
	}
	switch v := spec.Values[i].(type) {
	case *ast.CallExpr:
		sel, ok := v.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf")
	case *ast.UnaryExpr:
		lit, ok := v.X.(*ast.CompositeLit)
		return ok && v.Op == token.AND && isErrorType(lit.Type)
	case *ast.CompositeLit:
		return isErrorType(v.Type)
	}
	return false
}
