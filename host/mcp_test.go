package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// testMCP is an mcp_server block running this binary as an MCP server of
// the behaviour (see serveTestMCP), unconfined.
func testMCP(name, behaviour string) config.Plugin {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return config.Plugin{Name: name, Kind: config.KindMCP, Path: exe, Env: map[string]string{testMCPEnv: behaviour},
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Sandbox: &sandbox.Policy{Off: true}}
}

// toolNames lists a group's tool names, sorted.
func toolNames(h *Host, id string) []string {
	g, ok := h.mgr.Get(id)
	if !ok {
		return nil
	}
	var names []string
	for _, t := range g.Spec.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// TestMCPServerModule: a go-sdk MCP server over stdio is a group of kind
// mcp; its tools, names mapped, are called through the host's pipeline; a
// new tool it announces joins the group; SIGKILL unregisters the group at
// once and it comes back.
func TestMCPServerModule(t *testing.T) {
	h := startHost(t, testMCP("gomcp", "good"))
	g, ok := h.mgr.Get("gomcp")
	if !ok {
		t.Fatalf("no group gomcp: %+v", h.Modules().List())
	}
	if g.Kind != SourceMCP || g.Spec.Description != "MCP server A good test server" || g.Spec.Version != "1.2.3" {
		t.Errorf("kind %s, description %q, version %q", g.Kind, g.Spec.Description, g.Spec.Version)
	}
	if got, want := toolNames(h, "gomcp"), []string{"add_tool", "big", "burst", "cat", "echo", "fail", "get_thing_v2", "meta", "slow", "wait_file"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	ctx := context.Background()
	call := func(tool, args string) (*toolhost.Result, error) {
		return h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args)})
	}
	res, err := call("echo", `{"text":"hi"}`)
	if err != nil || !res.OK || res.Stdout != "hi" || len(res.Content) != 2 || res.Content[1].Type != toolhost.ContentImage || res.Content[1].MimeType != "image/png" {
		t.Errorf("echo: %+v, %v", res, err)
	}
	if res, err := call("get_thing_v2", `{}`); err != nil || res.Stdout != "thing" {
		t.Errorf("get_thing_v2 (get-thing.v2 on the server): %+v, %v", res, err)
	}
	if res, err := call("fail", `{}`); err != nil || res.OK || res.Error.Code != toolhost.CodeToolExec || res.Error.Message != "it went wrong" {
		t.Errorf("fail: %+v, %v", res, err)
	}
	if _, err := call("echo", `{"text":3}`); toolhost.CodeOf(err) != toolhost.CodeValidation {
		t.Errorf("echo with a number: %v, want validation by the host against the server's schema", err)
	}
	// Cancellation reaches the server.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := h.Call(cctx, &toolhost.CallRequest{Tool: "slow", Arguments: []byte(`{}`)}); err == nil {
		t.Error("slow returned without error after its deadline")
	}

	// tools/list_changed: the group gets the new tool.
	if res, err := call("add_tool", `{}`); err != nil || !res.OK {
		t.Fatalf("add_tool: %+v, %v", res, err)
	}
	proctest.Eventually(t, "the added tool in the group", func() bool { return slices.Contains(toolNames(h, "gomcp"), "added") })
	if res, err := call("added", `{}`); err != nil || res.Stdout != "here" {
		t.Errorf("added: %+v, %v", res, err)
	}

	// SIGKILL: unregistered at once, then restarted.
	pid := h.supervisor("gomcp").status().Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the group unregistered", func() bool {
		_, ok := h.mgr.Get("gomcp")
		return !ok || h.supervisor("gomcp").status().Pid != pid
	})
	proctest.Eventually(t, "the group back", func() bool {
		st := h.supervisor("gomcp").status()
		return st.State == StateRunning && st.Pid != pid && st.Restarts == 1
	})
	if res, err := call("echo", `{"text":"again"}`); err != nil || res.Stdout != "again" {
		t.Errorf("echo after the restart: %+v, %v", res, err)
	}
}

// TestMCPAnswerOverMaxLine: a caller who makes a stdio server answer with
// a line over mcpsource.MaxLine (a big file read) fails only that call,
// with tool_exec naming the size and the bound; the call in flight beside
// it succeeds, and the module keeps its process and its restart budget,
// however often the caller tries.
func TestMCPAnswerOverMaxLine(t *testing.T) {
	t.Parallel()
	// A call answered with 17 MiB, made and read through by race-built
	// binaries on a loaded machine, may take longer than startHost's 10 s.
	p := testMCP("gomcp", "good")
	p.Limits.Timeout = proctest.Patience
	h := startHost(t, p)
	ctx := context.Background()
	call := func(tool, args string) (*toolhost.Result, error) {
		return h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args)})
	}
	before := h.supervisor("gomcp").status()
	size := mcpsource.MaxLine + 1<<20
	for i := range 6 {
		path := filepath.Join(t.TempDir(), "go")
		type answer struct {
			res *toolhost.Result
			err error
		}
		held := make(chan answer, 1)
		go func() {
			res, err := call("wait_file", fmt.Sprintf(`{"path":%q}`, path))
			held <- answer{res, err}
		}()
		proctest.Eventually(t, "wait_file in flight", func() bool {
			_, err := os.Stat(path + ".started")
			return err == nil
		})
		res, err := call("big", fmt.Sprintf(`{"bytes":%d}`, size))
		msg := fmt.Sprintf("%s: %v", toolhost.CodeOf(err), err)
		if err == nil && res.Error != nil {
			msg = string(res.Error.Code) + ": " + res.Error.Message
		}
		m := regexp.MustCompile(`^tool_exec: .*is (\d+) bytes, over the 16777216-byte \(16 MiB\) bound`).FindStringSubmatch(msg)
		var n int
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if n <= size {
			t.Fatalf("try %d: big: %q, want tool_exec naming its size (> %d) and the bound", i, msg, size)
		}
		if i == 0 {
			t.Logf("big: %s", msg)
		}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if a := <-held; a.err != nil || !a.res.OK || a.res.Stdout != "done" {
			t.Fatalf("try %d: the call in flight: %+v, %v", i, a.res, a.err)
		}
		if st := h.supervisor("gomcp").status(); st.State != StateRunning || st.Pid != before.Pid || st.Restarts != before.Restarts {
			t.Fatalf("try %d: state %s, pid %d, restarts %d; before: pid %d, restarts %d", i, st.State, st.Pid, st.Restarts, before.Pid, before.Restarts)
		}
		if res, err := call("echo", `{"text":"after"}`); err != nil || res.Stdout != "after" {
			t.Fatalf("try %d: echo after: %+v, %v", i, res, err)
		}
	}
}

// TestMCPBrokenServers: a server that prints junk, one that never answers
// initialize and one that dies during tools/list are each refused with a
// named code; the good one beside them serves.
func TestMCPBrokenServers(t *testing.T) {
	silent := testMCP("silent", "silent")
	silent.StartTimeout = time.Second
	blocks := []config.Plugin{testMCP("junk", "junk"), silent, testMCP("crash", "crash-on-list"), testMCP("gomcp", "good")}
	for i := range blocks[:3] {
		blocks[i].Restart = config.RestartNever
	}
	h := startHost(t, blocks...)
	want := map[string]toolhost.Code{"junk": toolhost.CodeInvalidGroupDef, "silent": toolhost.CodeTimeout, "crash": toolhost.CodePluginExited}
	for _, p := range h.Modules().List() {
		if code, ok := want[p.Name]; ok && (p.State != StateFailed || p.ErrorCode != code) {
			t.Errorf("%s: state %s, code %s (%s), want failed with %s", p.Name, p.State, p.ErrorCode, p.LastError, code)
		}
		if p.Name == "junk" && !strings.Contains(p.LastError, `not a JSON-RPC message (parse error: the line is not JSON): "hello, I am not an MCP server"`) {
			t.Errorf("junk: %s, want the line it wrote", p.LastError)
		}
	}
	if res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"ok"}`)}); err != nil || res.Stdout != "ok" {
		t.Errorf("the good server: %+v, %v", res, err)
	}
}

// TestMCPHTTPServer: a streamable HTTP MCP server (the go-sdk's, on
// loopback) with a header the block sets.
func TestMCPHTTPServer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "http", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Say who called."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.Header.Get("X-Caller")}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close) // after the host's Close, which ends the session's open stream
	h := startHost(t, config.Plugin{Name: "remote", Kind: config.KindMCP, URL: ts.URL, Headers: map[string]string{"X-Caller": "toolhost"},
		Restart: config.RestartNever, StartTimeout: proctest.Patience})
	if got := toolNames(h, "remote"); !slices.Equal(got, []string{"whoami"}) {
		t.Fatalf("tools %v (%+v)", got, h.Modules().List())
	}
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "whoami", Arguments: []byte(`{}`)})
	if err != nil || res.Stdout != "toolhost" {
		t.Errorf("whoami: %+v, %v", res, err)
	}
}

// TestMCPReferenceServers loads npm's reference MCP servers beside a core
// group with read_file and write_file: the groups register, filesystem's
// clashing tools are diagnosed until its tool_prefix, a role with only
// memory sees exactly memory's tools, and calls work.
func TestMCPReferenceServers(t *testing.T) {
	dir := t.TempDir()
	memory := config.Plugin{Name: "memory", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-memory"),
		Env: map[string]string{"MEMORY_FILE_PATH": dir + "/memory.jsonl"}, Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience,
		Sandbox: mcptest.NPMSandbox(dir)}
	fs := config.Plugin{Name: "fs", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-filesystem"), Args: []string{dir},
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Sandbox: mcptest.NPMSandbox(dir)}
	everything := config.Plugin{Name: "everything", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-everything"),
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Sandbox: mcptest.NPMSandbox()}
	prefixed := fs
	prefixed.Name, prefixed.ToolPrefix = "fs2", "fs_"
	cfg := &config.Config{Limits: config.Limits{Timeout: 20 * time.Second}, Plugins: []config.Plugin{memory, fs, everything, prefixed},
		Roles: []config.Role{{Name: "rememberer", ToolGroups: []string{"memory"}}}}
	h, err := New(cfg, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	core := &sdk.Group{ID: "files", Description: "Core files.", Tools: []sdk.Tool{
		sdk.NewTool("read_file", "Read.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return &sdk.Result{OK: true}, nil }),
		sdk.NewTool("write_file", "Write.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return &sdk.Result{OK: true}, nil }),
	}}
	if err := h.Modules().Register(context.Background(), core); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"memory", "fs", "everything", "fs2"} {
		if g, ok := h.mgr.Get(id); !ok || g.Kind != SourceMCP || len(g.Spec.Tools) == 0 {
			t.Fatalf("group %s: %v %+v", id, ok, h.Modules().List())
		}
	}
	// The clash: fs's read_file and write_file lose to the core group, with
	// a diagnostic each; fs2's are fs_read_file and fs_write_file.
	var clashes []string
	for _, d := range h.Modules().Diagnostics() {
		if d.Group == "fs" && strings.Contains(d.Message, "already provided by group files") {
			clashes = append(clashes, d.Message)
		}
	}
	if len(clashes) != 2 {
		t.Errorf("diagnostics of fs: %v", h.Modules().Diagnostics())
	}
	if names := toolNames(h, "fs2"); !slices.Contains(names, "fs_read_file") || !slices.Contains(names, "fs_write_file") {
		t.Errorf("fs2's tools: %v", names)
	}

	// A role with only memory sees memory's tools, all of them.
	defs, err := roleTools(h, "rememberer")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, d := range defs.Tools {
		seen = append(seen, d.Function.Name)
	}
	slices.Sort(seen)
	if want := toolNames(h, "memory"); !slices.Equal(seen, want) {
		t.Errorf("the role sees %v, want memory's %v", seen, want)
	}

	ctx := context.Background()
	call := func(tool, args string) *toolhost.Result {
		t.Helper()
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args)})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res
	}
	call("create_entities", `{"entities":[{"name":"toolhost","entityType":"project","observations":["hosts tools"]}]}`)
	if out := call("read_graph", `{}`).Stdout; !strings.Contains(out, "hosts tools") {
		t.Errorf("read_graph: %s", out)
	}
	call("fs_write_file", `{"path":"`+dir+`/note.txt","content":"written by fs2"}`)
	if b, err := os.ReadFile(dir + "/note.txt"); err != nil || string(b) != "written by fs2" {
		t.Errorf("note.txt: %q, %v", b, err)
	}
	if out := call("echo", `{"message":"from everything"}`).Stdout; !strings.Contains(out, "from everything") {
		t.Errorf("everything's echo: %s", out)
	}
	// An error of the server's is a failed result, not an error.
	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "fs_read_text_file", Arguments: []byte(`{"path":"/etc/passwd"}`)})
	if err != nil || res.OK || res.Error.Code != toolhost.CodeToolExec {
		t.Errorf("reading outside the server's directory: %+v, %v", res, err)
	}
}

// TestMCPListChangedFloodIsCoalesced: a server announcing tools/list_changed
// 20000 times is listed again once or a few times, not 20000 times (each
// announcement used to start a goroutine that asked for tools/list), its
// unchanged tools record no update, and the host goes on calling it.
func TestMCPListChangedFloodIsCoalesced(t *testing.T) {
	lists := filepath.Join(t.TempDir(), "lists")
	flood := testMCP("flood", "flood")
	flood.Env["TOOLHOST_TEST_MCP_LISTS"] = lists
	flood.Limits.Timeout = proctest.Patience // a loaded machine took over 10 s to read the 20000 announcements
	h := startHost(t, flood)
	for _, tool := range []string{"flood", "finish"} {
		if _, err := callTool(t, h, tool, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	// The tool that finish added is listed by a listing that began after
	// finish's announcement, which came after the flood's: the flood's
	// listings are over, whatever the machine's load.
	proctest.Eventually(t, "the group lists the tool added after the flood", func() bool { return slices.Contains(toolNames(h, "flood"), "after") })
	b, _ := os.ReadFile(lists)
	n, _ := strconv.Atoi(string(b))
	// The first listing, then one for each listing the flood outlasts: one
	// or two on an idle machine, a few more when a listing waits behind the
	// announcements on a loaded one (CI saw 5, with one timed out), against
	// one per announcement without coalescing.
	if n < 2 || n > 20 {
		t.Fatalf("the server was listed %d times (once at start, then for %d announcements and one more); want 2 to 20", n, floodNotices+1)
	}
	if res, err := callTool(t, h, "echo", map[string]any{}); err != nil || !strings.Contains(res.Stdout, "still here") {
		t.Fatalf("echo after the flood: %+v, %v", res, err)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The first registration, and one update for the added tool: the
	// flood's listings changed nothing, and record nothing.
	if evs, _ := h.Events().List(context.Background(), store.EventFilter{Type: store.EventGroupRegistered}); len(evs) != 2 || evs[1].Payload["updated"] != true || evs[1].Payload["tools"] != float64(4) {
		t.Fatalf("group.registered events = %+v, want the first and one update to 4 tools", evs)
	}
}

// TestCoalesce: the function never runs twice at once, and each trigger is
// followed by a run that starts after it, however the triggers come.
func TestCoalesce(t *testing.T) {
	var running, overlaps, runs atomic.Int32
	var lastStart atomic.Int64 // of the latest run, in UnixNano
	trigger := coalesce(func() {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		lastStart.Store(time.Now().UnixNano())
		runs.Add(1)
		time.Sleep(time.Millisecond)
		running.Add(-1)
	})
	for round := range 20 {
		// The latest time a trigger was called at, taken before the call:
		// a run that starts after the call began may still start before
		// the round ends (the time after wg.Wait would be too late).
		var last atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 100 {
					now := time.Now().UnixNano()
					for old := last.Load(); now > old && !last.CompareAndSwap(old, now); old = last.Load() {
					}
					trigger()
				}
			})
		}
		wg.Wait()
		proctest.Eventually(t, fmt.Sprintf("round %d: a run began after the last trigger, and ended", round), func() bool {
			return lastStart.Load() >= last.Load() && running.Load() == 0
		})
	}
	// A run takes 1 ms and the triggers of a round come in far less (more
	// under the race detector): a few runs a round, never one a trigger.
	if overlaps.Load() != 0 || runs.Load() > 20*800/10 {
		t.Fatalf("%d runs overlapped; %d runs for 20 rounds of 800 triggers", overlaps.Load(), runs.Load())
	}
}

// TestMCPServerConfined: an mcp_server with a sandbox block cannot read a
// secret the same server reads unconfined; an mcp_server may not take a
// reserved id.
func TestMCPServerConfined(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	confined := testMCP("confined", "good")
	confined.Sandbox = &sandbox.Policy{}
	reserved := testMCP("workspace", "good")
	reserved.Restart = config.RestartNever
	h := startHost(t, testMCP("open", "good"), confined, reserved)
	read := func(group string) *toolhost.Result {
		t.Helper()
		g, ok := h.mgr.Get(group)
		if !ok {
			t.Fatalf("no group %s: %+v", group, h.Modules().List())
		}
		res, err := g.Provider.Call(context.Background(), &toolhost.CallRequest{Tool: "cat", Arguments: []byte(`{"path":"` + secret + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := read("open"); !res.OK || res.Stdout != "SECRET" {
		t.Fatalf("unconfined: %+v: the attack proves nothing", res)
	}
	if res := read("confined"); res.OK || strings.Contains(res.Stdout, "SECRET") {
		t.Errorf("confined: %+v", res)
	}
	for _, p := range h.Modules().List() {
		if p.Name == "workspace" && p.ErrorCode != toolhost.CodeReservedGroupID {
			t.Errorf("mcp_server workspace: %+v, want reserved_group_id", p)
		}
	}
}

// TestToolSettingsHints: a tool block's title and hints replace a module's,
// and approve = "read_only" lets a tool the operator made read-only run
// without the approver (here one that denies everything), while the others
// still ask it, fail among them although its server claims to be read-only.
func TestToolSettingsHints(t *testing.T) {
	block := testMCP("gomcp", "good")
	block.Tools = map[string]config.ToolSettings{
		"echo": {RequiresApproval: true, Title: "Echo it", Hints: map[string]bool{"readOnlyHint": true, "openWorldHint": false}},
		"fail": {RequiresApproval: true},
	}
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{block},
		Executor: config.Executor{Mode: "sequential", MaxParallel: 4, Approver: "deny", Approve: "read_only", ApprovalTimeout: time.Minute, IdempotencyWindow: time.Hour}}
	h := runHost(t, cfg, testOptions(t))
	g, ok := h.mgr.Get("gomcp")
	if !ok {
		t.Fatalf("no group: %+v", h.Modules().List())
	}
	echo, _ := g.tool("echo")
	var hints map[string]bool
	if err := json.Unmarshal(echo.Annotations, &hints); err != nil || echo.Title != "Echo it" || !hints["readOnlyHint"] || hints["openWorldHint"] || !hints["destructiveHint"] {
		t.Errorf("echo: title %q, hints %s", echo.Title, echo.Annotations)
	}
	ctx := context.Background()
	if res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"ok"}`)}); err != nil || res.Stdout != "ok" {
		t.Errorf("echo (read-only, so not asked): %+v, %v", res, err)
	}
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "fail", Arguments: []byte(`{}`)}); toolhost.CodeOf(err) != toolhost.CodeApprovalDenied {
		t.Errorf("fail (asks the approver, which denies): %v", err)
	}
	// A first-party (runtime) tool's own read-only hint is trusted.
	peek := &sdk.Group{ID: "peeker", Description: "Peek.", Tools: []sdk.Tool{
		sdk.NewTool("peek", "Peek.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return sdk.Text("seen"), nil },
			sdk.ReadOnly(), sdk.RequiresApproval()),
	}}
	if err := h.Modules().Register(ctx, peek); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "peek", Arguments: []byte(`{}`)}); err != nil || res.Stdout != "seen" {
		t.Errorf("peek (first-party, read-only): %+v, %v", res, err)
	}
}
