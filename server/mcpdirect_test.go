package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// TestMCPDirectCallsAsTheSDK: a plain sessionless tools/call, which the
// front answers itself without a session of the SDK's, gets the answer the
// SDK gives the same call: the same JSON-RPC message (a result of every
// content type, an error result of the server's, a refusal of the
// pipeline, a string id), in a JSON body where the SDK writes one SSE
// event. A params member the front's own answer does not know makes the
// SDK answer (it ignores the member), which is the comparison; a call the
// front may not answer itself (a header that does not name the call, a
// tool the role does not have, a client that takes tasks) is the SDK's,
// refusals included.
func TestMCPDirectCallsAsTheSDK(t *testing.T) {
	srv, _ := serve(t, contentConfig(t))
	url := srv.URL + "/mcp/reader"
	post := func(msg string, header map[string]string) (int, string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		mcptest.SetMessageHeaders(req.Header, msg)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		ct := resp.Header.Get("Content-Type")
		data := sseData(ct, body)
		if len(data) != 1 || !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/event-stream") {
			return resp.StatusCode, ct, map[string]any{"body": string(body)}
		}
		var m map[string]any
		if err := json.Unmarshal(data[0], &m); err != nil {
			t.Fatalf("%s: %v", data[0], err)
		}
		return resp.StatusCode, ct, m
	}
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + strings.Replace(params, "{", `{"_meta":{`+meta2026("")+`},`, 1) + `}`
	}
	sdkOnly := func(msg string) string {
		return strings.Replace(msg, `"params":{`, `"params":{"toolhost-test-unknown":1,`, 1)
	}
	for _, c := range []struct{ name, id, params string }{
		{"every content type", "1", `{"name":"blocks","arguments":{"text":"hello"}}`},
		{"the server's error result", "2", `{"name":"blocks","arguments":{"text":"no","error":true}}`},
		{"the pipeline's refusal", "3", `{"name":"blocks","arguments":{"text":7}}`},
		{"no arguments", "4", `{"name":"blocks"}`},
		{"a string id", `"call-5.a:b"`, `{"name":"sized","arguments":{"text":"s","image":3}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := call(c.id, c.params)
			status, ct, direct := post(msg, nil)
			if status != http.StatusOK || !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("plain call: %d %s %v, want the front's own JSON answer", status, ct, direct)
			}
			status, ct, viaSDK := post(sdkOnly(msg), nil)
			if status != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("call with an unknown member: %d %s %v, want the SDK's SSE answer", status, ct, viaSDK)
			}
			if !reflect.DeepEqual(direct, viaSDK) {
				a, _ := json.Marshal(direct)
				b, _ := json.Marshal(viaSDK)
				t.Fatalf("the front answered\n%s\nthe SDK answers\n%s", a, b)
			}
		})
	}
	// The conformance fixture's tools: a server's protocol error (a client
	// capability the call needs, whose HTTP status is 400), and a round of
	// requests for the client (input_required; its requestState is the
	// front's, a new one for each call).
	exe := filepath.Join(t.TempDir(), "conformserver")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/toolhost/toolhost/internal/mcp/mcptest/conformserver/cmd").CombinedOutput(); err != nil {
		t.Fatalf("go build conformserver: %v\n%s", err, out)
	}
	conform, _ := serve(t, &config.Config{
		Limits: config.Limits{Timeout: proctest.Patience},
		Plugins: []config.Plugin{{Name: "conform", Kind: config.KindMCP, Path: exe, StartTimeout: proctest.Patience, Sandbox: &sandbox.Policy{Off: true},
			ClientRequests: []string{config.ClientRequestLogging, config.ClientRequestElicitation, config.ClientRequestSampling, config.ClientRequestRoots}}},
		Roles: []config.Role{{Name: "conformance", ToolGroups: []string{"conform"}}},
	})
	url = conform.URL + "/mcp/conformance"
	for _, c := range []struct{ tool, caps string }{
		{"test_simple_text", "{}"},
		{"test_error_handling", "{}"},
		{"test_missing_capability", "{}"},
		{"test_input_required_result_elicitation", `{"elicitation":{}}`},
	} {
		msg := strings.Replace(call("8", `{"name":"`+c.tool+`","arguments":{}}`), `Capabilities":{}`, `Capabilities":`+c.caps, 1)
		status, ct, direct := post(msg, nil)
		sdkStatus, _, viaSDK := post(sdkOnly(msg), nil)
		for _, m := range []map[string]any{direct, viaSDK} {
			if res, ok := m["result"].(map[string]any); ok && res["requestState"] != nil {
				res["requestState"] = "(the front's)"
			}
		}
		if !strings.HasPrefix(ct, "application/json") || status != sdkStatus || !reflect.DeepEqual(direct, viaSDK) {
			t.Errorf("%s: the front answered %d %v, the SDK %d %v", c.tool, status, direct, sdkStatus, viaSDK)
		}
		if c.tool == "test_missing_capability" && status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", c.tool, status)
		}
	}
	url = srv.URL + "/mcp/reader"
	plain := call("9", `{"name":"blocks","arguments":{"text":"x"}}`)
	for _, c := range []struct {
		name   string
		msg    string
		header map[string]string
		status int
	}{
		{"Mcp-Name names another tool", plain, map[string]string{"Mcp-Name": "sized"}, http.StatusBadRequest},
		{"no Mcp-Name", plain, map[string]string{"Mcp-Name": ""}, http.StatusBadRequest},
		{"arguments nested deeper than the SDK decodes", call("9", `{"name":"blocks","arguments":{"text":"x","deep":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)+`}}`), nil, http.StatusBadRequest},
		{"a tool the role does not have", call("9", `{"name":"nope","arguments":{}}`), nil, http.StatusBadRequest},
		{"a client that takes tasks", strings.Replace(plain, `Capabilities":{}`, `Capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1), nil, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, ct, m := post(c.msg, c.header)
			if status != c.status || strings.HasPrefix(ct, "application/json") && status == http.StatusOK {
				t.Fatalf("%d %s %v, want %d from the SDK", status, ct, m, c.status)
			}
		})
	}
}
