package host

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testMCPEnv makes this test binary serve an MCP server over stdio, of the
// behaviour it names (see serveTestMCP), instead of running tests.
const testMCPEnv = "TOOLHOST_TEST_MCP"

// serveTestMCP serves, on stdin and stdout:
//   - "good": a go-sdk server with echo, cat, fail (which claims to be
//     read-only), meta (which returns the request's _meta), slow, burst (progress
//     reports at once, then the answer), add_tool (which adds a
//     tool, and so announces tools/list_changed), big (a text of the bytes
//     asked for, in one line: over mcpsource.MaxLine when asked), wait_file
//     (which writes PATH.started, then answers once PATH exists) and a tool
//     whose MCP name has '-' and '.';
//   - "junk": a line that is not JSON-RPC on stdout, then silence;
//   - "silent": never answers initialize;
//   - "crash-on-list": answers initialize, then exits on tools/list.
//   - "flood": echo; flood, which announces tools/list_changed floodNotices
//     times at once; and finish, which adds a tool, after, and announces it
//     once. It counts its tools/list requests in $TOOLHOST_TEST_MCP_LISTS.
func serveTestMCP(behaviour string) {
	switch behaviour {
	case "flood":
		serveFloodMCP()
	case "junk":
		fmt.Println("hello, I am not an MCP server")
		time.Sleep(time.Minute)
	case "silent":
		time.Sleep(time.Minute)
	case "crash-on-list":
		serveRawMCP("crash", false, func(_ io.Writer, method string, _ json.RawMessage, _ string) bool {
			if method == "tools/list" {
				os.Exit(3)
			}
			return false
		})
	default:
		serveGoodMCP()
	}
}

// floodNotices is how many tools/list_changed the "flood" server sends.
const floodNotices = 20000

func serveFloodMCP() {
	lists, tools := 0, `{"name":"echo","description":"Echo.","inputSchema":{"type":"object"}},{"name":"flood","description":"Flood.","inputSchema":{"type":"object"}},{"name":"finish","description":"Add a tool.","inputSchema":{"type":"object"}}`
	serveRawMCP("flood", true, func(out io.Writer, method string, id json.RawMessage, line string) bool {
		switch method {
		case "tools/list":
			lists++
			// Renamed into place: the test may read it while a listing
			// after the one it waited for writes it (a loaded machine read
			// a truncated file, 0 listings, between WriteFile's truncate
			// and its write).
			f := os.Getenv("TOOLHOST_TEST_MCP_LISTS")
			if os.WriteFile(f+".new", []byte(fmt.Sprint(lists)), 0o600) == nil {
				_ = os.Rename(f+".new", f)
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`+"\n", id, tools)
		case "tools/call":
			notices := 0
			switch {
			case strings.Contains(line, `"name":"flood"`):
				notices = floodNotices
			case strings.Contains(line, `"name":"finish"`):
				tools, notices = tools+`,{"name":"after","description":"Listed after finish.","inputSchema":{"type":"object"}}`, 1
			}
			for range notices {
				fmt.Fprintln(out, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"still here"}]}}`+"\n", id)
		default:
			return false
		}
		return true
	})
}

// serveRawMCP answers JSON-RPC lines on stdin by hand, for the servers the
// go-sdk would not let misbehave: initialize, as name (announcing
// tools/list_changed when listChanged), then each message by handle, or a
// request by "method not found" when handle returns false (one of a newer
// protocol, such as server/discover, so that the client falls back).
func serveRawMCP(name string, listChanged bool, handle func(out io.Writer, method string, id json.RawMessage, line string) bool) {
	out := bufio.NewWriter(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(sc.Bytes(), &msg)
		switch {
		case msg.Method == "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":%t}},"serverInfo":{"name":%q,"version":"1"}}}`+"\n", msg.ID, listChanged, name)
		case handle(out, msg.Method, msg.ID, sc.Text()):
		case len(msg.ID) > 0:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", msg.ID)
		}
		_ = out.Flush()
	}
}

type mcpBigArgs struct {
	Bytes int `json:"bytes" jsonschema:"how long the text is"`
}

type mcpEchoArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

func serveGoodMCP() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "good", Title: "A good test server", Version: "1.2.3"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpEchoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("PNG")}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "get-thing.v2", Description: "A name with - and ."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "thing"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "cat", Description: "Read a file."}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Report an error.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it went wrong"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "meta", Description: "Return the request's _meta as JSON."}, func(_ context.Context, r *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		b, _ := json.Marshal(r.Params.Meta)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Wait until cancelled."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "slow: cancelled")
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "burst", Description: "Report progress 1 to 5 of 5 at once, then answer."}, func(ctx context.Context, r *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 5; i++ {
			_ = r.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: r.Params.GetProgressToken(), Progress: float64(i), Total: 5})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "add_tool", Description: "Add a tool named added."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(srv, &mcp.Tool{Name: "added", Description: "Added at run time."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Answer a text of the bytes asked for."}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpBigArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", a.Bytes)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait_file", Description: "Write PATH.started, then answer once PATH exists."}, func(ctx context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		if err := os.WriteFile(a.Path+".started", nil, 0o600); err != nil {
			return nil, nil, err
		}
		for {
			if _, err := os.Stat(a.Path); err == nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	_ = srv.Run(context.Background(), &mcp.StdioTransport{})
}
