package mcpfront

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/store"
)

// BenchmarkGatewayCall is one tools/call through the front over streamable
// HTTP to an mcp_server group (bench/mcpnoop's no-op tool, unconfined), in
// each era, one client session shared by the callers. Its allocations are
// this process's: the go-sdk client's, the front's, the host's and the
// mcp_server client's (the server is a process of its own).
func BenchmarkGatewayCall(b *testing.B) {
	exe := filepath.Join(b.TempDir(), "mcpnoop")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/toolhost/toolhost/bench/mcpnoop").CombinedOutput(); err != nil {
		b.Fatalf("go build mcpnoop: %v\n%s", err, out)
	}
	h := hosttest.Run(b, fmt.Sprintf("mcp_server \"noop\" {\n  command = %q\n  sandbox = \"off\"\n  start_timeout = \"60s\"\n}\nrole \"bench\" {\n  tool_groups = [\"noop\"]\n}\n", exe))
	f := New(h)
	b.Cleanup(f.Close)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f.ServeRole(w, req, "bench", Caller{Credential: store.CredentialAdmin})
	}))
	b.Cleanup(ts.Close)
	for _, era := range []string{mcpversion.Legacy, mcpversion.Stateless} {
		b.Run(era, func(b *testing.B) {
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}}
			call := func() {
				res, err := cs.CallTool(context.Background(), params)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
			}
			call()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call()
			}
		})
	}
}
