package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/toolhost/toolhost/internal/protocol"
)

// toolhostModule is the module path the generated module requires and
// replaces with a local checkout.
const toolhostModule = "github.com/toolhost/toolhost"

//go:embed templates/module/*.tmpl
var moduleTemplates embed.FS

// newUsage is `toolhost new`.
var newUsage = &usage{
	name:    "new",
	summary: "write a new module's skeleton",
	example: "toolhost new module greeter",
	subs:    []*usage{newModuleUsage},
}

// newModuleUsage is `toolhost new module`.
var newModuleUsage = &usage{
	name:    "new module",
	args:    "NAME",
	min:     1,
	max:     1,
	summary: "write a module that builds against this toolhost checkout",
	details: `It writes main.go, main_test.go, go.mod and go.sum into the directory, and prints the next
steps. NAME is the group's id and the binary's name. It builds and tests offline.`,
	example: "toolhost new module greeter -dir ~/src/greeter",
}

// newModuleCmd is `toolhost new module NAME [-dir D] [-toolhost DIR]`: it
// writes a module skeleton (main.go, main_test.go, go.mod, go.sum) that
// builds and tests offline against the toolhost checkout this binary came
// from, and prints the next steps.
func newModuleCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(newModuleUsage, stdout, stderr)
	dir := fs.String("dir", "", "the `directory` to write (default ./NAME); it must be empty or absent")
	src := fs.String("toolhost", "", "the toolhost checkout to build against (default: the one holding this binary)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	name := fs.Arg(0)
	mod, err := newModule(name, *dir, *src)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: new module: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, `wrote %s: main.go main_test.go go.mod go.sum

next steps (nothing to download):
  cd %s && go test ./... && go build -o %s .

then add this block to config.hcl:

plugin %s {
  path = %s
  sandbox {} # the system read-only, no network, no file of the host's: loosen it here
}
`, mod.Dir, shellQuote(mod.Dir), mod.Name, hclQuote(mod.Name), hclQuote(filepath.Join(mod.Dir, mod.Name)))
	return 0
}

// moduleFiles are the files newModule writes.
var moduleFiles = []string{"go.mod", "go.sum", "main.go", "main_test.go"}

// generated is a module newModule wrote.
type generated struct {
	Name      string // group id, binary name
	Dir       string // absolute
	Toolhost  string // absolute path of the toolhost checkout
	GoVersion string // the checkout's go directive
}

// newModule checks name, finds the toolhost checkout (src, or the one holding
// this executable) and writes the module into dir (default ./name).
func newModule(name, dir, src string) (*generated, error) {
	if !protocol.ValidGroupID(name) {
		return nil, fmt.Errorf("NAME %q is not a valid group id (^[a-z][a-z0-9_-]{0,63}$)", name)
	}
	if protocol.IsReserved(name) {
		return nil, fmt.Errorf("NAME %q is a reserved group id: only a builtin block may provide it", name)
	}
	root, goVersion, err := findToolhost(src)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = name
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	g := &generated{Name: name, Dir: dir, Toolhost: root, GoVersion: goVersion}
	files := map[string][]byte{"go.mod": g.goMod()}
	for _, f := range []string{"main.go", "main_test.go"} {
		if files[f], err = g.render(f + ".tmpl"); err != nil {
			return nil, err
		}
	}
	// toolhost's go.sum covers every module its sdk needs, so the new
	// module finds the checksums it needs without asking anyone.
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		files["go.sum"] = sum
	} else if errors.Is(err, os.ErrNotExist) {
		files["go.sum"] = nil
	} else {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range moduleFiles {
		if err := writeNew(filepath.Join(dir, f), files[f]); err != nil {
			return nil, err
		}
	}
	if err := g.require(); err != nil {
		for _, f := range moduleFiles {
			_ = os.Remove(filepath.Join(dir, f)) // so that the same command can be run again
		}
		return nil, err
	}
	return g, nil
}

// require adds to go.mod the modules that the new module's packages and
// tests import through toolhost's sdk, at the checkout's versions (a go
// directive of 1.17 or later needs each listed, and go test refuses to
// start until they are), so that the module builds and tests without
// `go mod tidy`, which loads every dependency as if every build tag were
// set and may download modules the build never uses. They come from the
// module cache that building the checkout filled: go list with
// GOFLAGS=-mod=mod may write go.mod, and with GOPROXY=off it downloads
// nothing.
func (g *generated) require() error {
	cmd := exec.Command("go", "list", "-deps", "-test", "./...")
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("listing the modules it needs from the module cache (build the checkout first: scripts/build): %v\n%s", err, out)
	}
	return nil
}

func (g *generated) goMod() []byte {
	return fmt.Appendf(nil, `module example.com/%s

go %s

require %s v0.0.0-00010101000000-000000000000

// The toolhost checkout this module builds against; toolhost is not
// published as a module version.
replace %s => %s
`, g.Name, g.GoVersion, toolhostModule, toolhostModule, modQuote(g.Toolhost))
}

func (g *generated) render(name string) ([]byte, error) {
	t, err := template.ParseFS(moduleTemplates, "templates/module/"+name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, g); err != nil {
		return nil, err
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return out, nil
}

// findToolhost returns the toolhost checkout src (when given) or the first
// directory holding this executable, or above it, whose go.mod declares the
// toolhost module; and that go.mod's go directive.
func findToolhost(src string) (root, goVersion string, err error) {
	if src != "" {
		root, err := filepath.Abs(src)
		if err != nil {
			return "", "", err
		}
		goVersion, err := toolhostGoMod(root)
		if err != nil {
			return "", "", fmt.Errorf("-toolhost %s: %w", src, err)
		}
		return root, goVersion, nil
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err == nil {
		if root, goVersion, ok := walkUpToolhost(filepath.Dir(exe)); ok {
			return root, goVersion, nil
		}
	}
	return "", "", fmt.Errorf("cannot find the toolhost checkout this binary was built from "+
		"(no go.mod of module %s at or above %s); pass -toolhost DIR, the checkout's root", toolhostModule, filepath.Dir(exe))
}

// walkUpToolhost looks for the toolhost checkout at dir and its parents.
func walkUpToolhost(dir string) (root, goVersion string, ok bool) {
	for {
		if v, err := toolhostGoMod(dir); err == nil {
			return dir, v, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", false
		}
		dir = parent
	}
}

// toolhostGoMod reads dir/go.mod and returns its go directive if it is the
// toolhost module's.
func toolhostGoMod(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	var module, goVersion string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "module":
			module = f[1]
			if u, err := strconv.Unquote(module); err == nil {
				module = u
			}
		case "go":
			goVersion = f[1]
		}
	}
	if module != toolhostModule {
		return "", fmt.Errorf("%s is not the go.mod of module %s", filepath.Join(dir, "go.mod"), toolhostModule)
	}
	if goVersion == "" {
		return "", fmt.Errorf("%s has no go directive", filepath.Join(dir, "go.mod"))
	}
	return goVersion, nil
}

// emptyDir fails unless dir is absent or an empty directory.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s exists and is not empty", dir)
	}
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// modQuote quotes a path for go.mod when it needs it.
func modQuote(s string) string {
	if strings.ContainsAny(s, " \t\"'`\\") {
		return strconv.Quote(s)
	}
	return s
}

// hclQuote quotes s as an HCL string literal with no interpolation.
func hclQuote(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
