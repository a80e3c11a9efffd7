package mcpimport

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// testMachine is the machine the samples are imported for: node and npm
// in /usr, a user's tools in ~/.local and ~/.nvm, a node program in
// /opt/brain, a shared directory /srv/ws, and the config in ~/toolhost.
func testMachine() *machine {
	binary := &fstest.MapFile{Mode: 0o755, Data: []byte("\x7fELF")}
	nodeScript := &fstest.MapFile{Mode: 0o755, Data: []byte("#!/usr/bin/env node\nimport './lib.js'\n")}
	link := func(target string) *fstest.MapFile {
		return &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte(target)}
	}
	pkg := &fstest.MapFile{Data: []byte(`{"name": "x"}`)}
	dir := &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	fsys := fstest.MapFS{
		"usr/bin/node":    binary,
		"usr/bin/python3": binary,
		"usr/bin/docker":  binary,
		"usr/bin/npx":     link("../lib/node_modules/npm/bin/npx-cli.js"),
		"usr/bin/npm":     link("../lib/node_modules/npm/bin/npm-cli.js"),
		"usr/lib/node_modules/npm/bin/npx-cli.js":                            nodeScript,
		"usr/lib/node_modules/npm/bin/npm-cli.js":                            nodeScript,
		"usr/lib/node_modules/npm/package.json":                              pkg,
		"usr/share/dict/words":                                               &fstest.MapFile{},
		"home/me/.local/bin/uvx":                                             binary,
		"home/me/.local/bin/search-mcp":                                      link("../lib/node_modules/search-mcp/bin/cli.js"),
		"home/me/.local/lib/node_modules/search-mcp/bin/cli.js":              nodeScript,
		"home/me/.local/lib/node_modules/search-mcp/package.json":            pkg,
		"home/me/.nvm/versions/node/v20/bin/node":                            binary,
		"home/me/.nvm/versions/node/v20/bin/notes-mcp":                       link("../lib/node_modules/notes-mcp/index.js"),
		"home/me/.nvm/versions/node/v20/lib/node_modules/notes-mcp/index.js": {Mode: 0o755, Data: []byte("#!/home/me/.nvm/versions/node/v20/bin/node\n")},
		"home/me/package.json":                                               pkg,
		"home/me/bin/python3":                                                binary,
		"home/me/bin/mytool":                                                 {Mode: 0o755, Data: []byte("#!/home/me/bin/python3\n")},
		"home/me/toolhost/config.hcl":                                        &fstest.MapFile{},
		"home/me/toolhost/data/cache":                                        dir,
		"opt/brain/index.js":                                                 &fstest.MapFile{Data: []byte("console.log('brain')\n")},
		"opt/brain/package.json":                                             pkg,
		"opt/tools/serve.py":                                                 &fstest.MapFile{Data: []byte("print('hi')\n")},
		"srv/ws":                                                             dir,
		"home/me/mcp/node_modules/.bin/mcp-server-memory":                    link("../@modelcontextprotocol/server-memory/dist/index.js"),
		"home/me/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js": nodeScript,
		"home/me/mcp/node_modules/@modelcontextprotocol/server-memory/package.json":  pkg,
		"srv/conf.yaml": &fstest.MapFile{},
	}
	return &machine{
		fsys: fsys, path: "/home/me/.local/bin:/usr/bin:/bin:/home/me/bin", home: "/home/me", exe: "/usr/local/bin/toolhost",
		config: &config.Config{File: "/home/me/toolhost/config.hcl", DataDir: "/home/me/toolhost/data", PluginDir: "/home/me/toolhost/bin/plugins"},
	}
}

// limitsLines end every sandbox block.
const limitsLines = `  }
`

// TestMCPImportSandbox imports one stdio server at a time on testMachine
// and compares the sandbox block written for it.
func TestMCPImportSandbox(t *testing.T) {
	for _, tc := range []struct {
		name, server string // server: a JSON object
		want         string // the sandbox block's lines before limitsLines
	}{
		{"npx fetches, with the network", `{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/ws"]}`, `
    # npx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: npm install --prefix DIR PACKAGE, then command = "DIR/node_modules/.bin/NAME",
    # which starts without the network and runs the code you installed (import it again for its paths).
    read_write = ["/srv/ws"]
    network    = "allowed"
`},
		{"uvx fetches too", `{"command": "uvx", "args": ["mcp-server-git"]}`, `
    # uvx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: uv tool install PACKAGE (or pipx install PACKAGE), then command = the script it installs,
    # which starts without the network and runs the code you installed (import it again for its paths).
    network = "allowed"
`},
		{"npm exec fetches, npm run does not", `{"command": "npm", "args": ["run", "serve"]}`, "\n"},
		{"an installed package: its node_modules", `{"command": "search-mcp"}`, `
    read_only = ["/home/me/.local/lib/node_modules"]
`},
		{"a node program: its package", `{"command": "node", "args": ["--no-warnings", "/opt/brain/index.js"]}`, `
    read_only = ["/opt/brain"]
`},
		{"a script alone", `{"command": "python3", "args": ["/opt/tools/serve.py"]}`, "\n    read_only = [\"/opt/tools/serve.py\"]\n"},
		{"its own node, by #!", `{"command": "/home/me/.nvm/versions/node/v20/bin/notes-mcp"}`, `
    read_only = ["/home/me/.nvm/versions/node/v20"]
`},
		{"never the home directory whole", `{"command": "mytool"}`, `
    read_only = ["/home/me/bin/python3"]
`},
		{"directories read-write, files read-only", `{"command": "node", "args": ["/opt/brain/index.js", "/srv/ws", "--config=/srv/conf.yaml", "/srv/ws/"]}`, `
    read_write = ["/srv/ws"]
    read_only  = ["/opt/brain", "/srv/conf.yaml"]
`},
		{"what the host trusts stays out", `{"command": "npm", "args": ["start", "/home/me", "/srv/ws", "/home/me/toolhost/data/cache"]}`, `
    read_write = [
      "/srv/ws",
      # toolhost would refuse this one: mcp_server "s"'s writable path /home/me holds the config file /home/me/toolhost/config.hcl
      # "/home/me",
      # toolhost would refuse this one: mcp_server "s"'s writable path /home/me/toolhost/data/cache lies inside the data directory /home/me/toolhost/data
      # "/home/me/toolhost/data/cache",
    ]
`},
		{"system directories are there already", `{"command": "node", "args": ["/usr/share/dict", "/usr/share/dict/words"]}`, "\n"},
		{"paths it cannot add", `{"command": "npm", "args": ["start", "/Users/me/Desktop", "./data", "~/notes", "--root=../up"]}`, `
    # args[1] "/Users/me/Desktop" is not on this machine: once it is, add it to read_write (a directory) or read_only (a file)
    # args[2] "./data" is relative to a working directory the client chose: write the absolute path, and add it to read_write (a directory) or read_only (a file)
    # args[3] "~/notes": the server's HOME is the sandbox's own, so write the absolute path, and add it to read_write (a directory) or read_only (a file)
    # args[4] "--root=../up" is relative to a working directory the client chose: write the absolute path, and add it to read_write (a directory) or read_only (a file)
`},
		{"a reference is not a path yet", `{"command": "npm", "args": ["start", "${env:ROOT}", "${HOME}/x"]}`, "\n"},
		{"a command not found", `{"command": "weather-mcp"}`, `
    # "weather-mcp" is not on this machine's PATH: add what it needs to read_only (a script's node_modules or virtualenv)
`},
		{"a path not found", `{"command": "/opt/weather/bin/serve"}`, `
    # "/opt/weather/bin/serve" is not on this machine: add what it needs to read_only (a script's node_modules or virtualenv)
`},
		{"a command the client fills in", `{"command": "${workspaceFolder}/bin/tools", "args": ["${workspaceFolder}/data"]}`, "\n"},
		{"docker", `{"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/x/y"]}`, `
    # docker needs its daemon's socket, which this sandbox leaves out: whoever may write to it is root
    # on this machine. Add read_write = ["/var/run/docker.sock"] only if you accept that.
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {"s": `+tc.server+`}}`), "f.json", testMachine())
			if err != nil {
				t.Fatal(err)
			}
			_, block, ok := strings.Cut(string(out), "\n  sandbox {")
			if want := tc.want + limitsLines; !ok || !strings.HasPrefix(block, want) {
				t.Errorf("want the sandbox block\n  sandbox {%s\ngot\n%s", want, out)
			}
			evalBlocks(t, out, func(string) string { return "" })
			if _, err := config.Parse(out, "/home/me/toolhost/config.hcl", &config.Options{Getenv: func(string) string { return "" }}); err != nil {
				t.Errorf("the config does not load: %v\n%s", err, out)
			}
		})
	}
}

// TestMCPImportHTTPHasNoSandbox: an HTTP server has no process, and no
// sandbox block.
func TestMCPImportHTTPHasNoSandbox(t *testing.T) {
	out, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {"s": {"url": "https://mcp.example.com/mcp"}}}`), "f.json", testMachine())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sandbox") {
		t.Errorf("a sandbox for an HTTP server:\n%s", out)
	}
}

// TestMCPImportKeepsTrustedPathsOut imports a filesystem server given the
// directory of the config file, and one holding its data_dir, with
// ConfigFile: each is written commented out, and the config with the
// blocks added still loads. A config that does not load is a warning, and
// its default paths are kept out instead.
func TestMCPImportKeepsTrustedPathsOut(t *testing.T) {
	dir, shared := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(shared, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config.hcl")
	base := fmt.Sprintf("data_dir = %q\n", filepath.Join(shared, "toolhost"))
	client := clientJSON(t, map[string]any{"mcpServers": map[string]any{"files": map[string]any{
		"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", dir, shared, filepath.Join(shared, "work")}}}})
	for _, tc := range []struct {
		name, config string
		refused      []string // commented out
		warning      string
	}{
		{"no config yet", "", []string{dir}, ""},
		{"its data_dir", base, []string{dir, shared}, ""},
		{"a config that does not load", "data_dir = \n", []string{dir}, file + " does not load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(file)
			if tc.config != "" {
				if err := os.WriteFile(file, []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			blocks, warnings, err := Import(context.Background(), client, "claude.json", Options{ConfigFile: file})
			if err != nil || !strings.Contains(strings.Join(warnings, "\n"), tc.warning) || (tc.warning == "") != (len(warnings) == 0) {
				t.Fatalf("%v, warnings %q", err, warnings)
			}
			out := string(blocks)
			for _, p := range []string{dir, shared, filepath.Join(shared, "work")} {
				refused := slices.Contains(tc.refused, p)
				if strings.Contains(out, "\n      # "+strconv.Quote(p)+",\n") != refused || strings.Contains(out, "\n      "+strconv.Quote(p)+",\n") == refused {
					t.Errorf("%s: refused %v, but\n%s", p, refused, out)
				}
			}
			if tc.warning != "" {
				return
			}
			cfg, err := config.Parse([]byte(tc.config+out), file, nil)
			if err != nil {
				t.Fatalf("the config with the blocks does not load: %v\n%s", err, out)
			}
			if rw := cfg.Plugins[0].Sandbox.ReadWrite; len(rw) != 3-len(tc.refused) {
				t.Errorf("read_write %q", rw)
			}
		})
	}
}

// clientJSON is v as a client's config file holds it: JSON.
func clientJSON(t *testing.T, v any) []byte {
	t.Helper()
	src, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestMCPImportRunsConfined imports npm's filesystem server as a client
// has it (its bin link in node_modules/.bin, a directory to serve), loads
// the output as the config it was written for, and starts it: the server
// runs under bubblewrap in the sandbox the import wrote, which holds its
// node_modules read-only (without them node could not load the script
// behind the link) and its directory read-write, and it answers.
func TestMCPImportRunsConfined(t *testing.T) {
	server := mcptest.NPMServer(t, "mcp-server-filesystem")
	root, dir := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "config.hcl")
	client := clientJSON(t, map[string]any{"mcpServers": map[string]any{"files": map[string]any{"command": server, "args": []string{root}}}})
	blocks, _, err := Import(context.Background(), client, "claude_desktop_config.json", Options{ConfigFile: file, Probe: true})
	if err != nil {
		t.Fatal(err)
	}
	modules, err := filepath.EvalSymlinks(filepath.Join(mcptest.NPMDir(), "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"read_write = [" + strconv.Quote(root) + "]", "read_only  = [" + strconv.Quote(modules) + "]"} {
		if !strings.Contains(string(blocks), "\n    "+line+"\n") {
			t.Errorf("no line %q in\n%s", line, blocks)
		}
	}
	h := startImported(t, file, blocks)
	st := h.Modules().List()[0]
	if st.State != host.StateRunning {
		t.Fatalf("files: %s %s\n%s", st.State, st.LastError, blocks)
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.Pid)); err != nil || filepath.Base(exe) != "bwrap" {
		t.Errorf("the server's process runs %q (%v), not bubblewrap", exe, err)
	}
	call := func(tool string, args map[string]any) string {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: raw})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res.Stdout
	}
	call("write_file", map[string]any{"path": filepath.Join(root, "hello.txt"), "content": "written in the sandbox"})
	if got, err := os.ReadFile(filepath.Join(root, "hello.txt")); err != nil || string(got) != "written in the sandbox" {
		t.Errorf("hello.txt: %q, %v", got, err)
	}
	if out := call("list_directory", map[string]any{"path": root}); !strings.Contains(out, "hello.txt") {
		t.Errorf("list_directory: %s", out)
	}
}

// startImported writes the blocks an import printed to file, as the config
// they were written for, and starts a host on it, with node's patience.
func startImported(t *testing.T, file string, blocks []byte) *host.Host {
	t.Helper()
	if err := os.WriteFile(file, blocks, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Plugins[0].StartTimeout = proctest.Patience // node, on a loaded machine
	h, err := host.New(cfg, &host.Options{DescribeTimeout: proctest.Patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}
