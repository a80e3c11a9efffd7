package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

// artifactsConfig is serve with three roles that store artifacts, bob
// also spawning agents, and quotas small enough to fill: bob alone may
// hold 4 KiB, all roles 6 KiB, so bob filling his quota on top of alice's
// 2.5 KiB report passes the host's.
const artifactsConfig = `
data_dir = "data"
store {
  quota      = "6KiB"
  role_quota = "4KiB"
}
role "alice" {
  tool_groups = ["artifact"]
}
role "bob" {
  tool_groups = ["artifact", "org_management"]
}
role "carol" {
  tool_groups = ["artifact"]
}
`

// artifactCaller calls a tool as one role, and returns the text it
// answers (for an error, "code: message") and whether it is an error.
type artifactCaller func(tool string, args map[string]any) (string, bool)

// TestHostileArtifacts: bob, a hostile agent with a role token of his own,
// goes for alice's artifacts on a real serve, over MCP in both eras and
// over the API: he reads her artifact's id, confirms a guess of its bytes
// by their SHA-256, squats on bytes before she stores them, fills his
// quota to evict hers, and hands on what she shared with him. Each row
// must leave alice's artifacts as she stored them, and carol (who was
// handed nothing) must read none of them.
func TestHostileArtifacts(t *testing.T) {
	for _, kind := range []string{"mcp 2025-11-25", "mcp 2026-07-28", "api"} {
		t.Run(kind, func(t *testing.T) {
			h := newServe(t, artifactsConfig)
			h.start()
			as := map[string]artifactCaller{}
			for _, role := range []string{"alice", "bob", "carol"} {
				as[role] = artifactClient(t, h, kind, role, h.roleToken(role, role+"-token", ""))
			}
			put := func(t *testing.T, role string, args map[string]any) string {
				t.Helper()
				out, isErr := as[role]("put_artifact", args)
				var a struct{ ID string }
				if isErr || json.Unmarshal([]byte(out), &a) != nil || a.ID == "" {
					t.Fatalf("%s's put_artifact: %s", role, out)
				}
				return a.ID
			}
			// unknown is what get_artifact answers role for an id that names
			// nothing, the id taken out: what any other role's id must get.
			get := func(role, id string) (string, bool) {
				out, isErr := as[role]("get_artifact", map[string]any{"id": id})
				return strings.ReplaceAll(out, id, "ID"), isErr
			}
			unknown, isErr := get("bob", strings.Repeat("0", 64))
			if !isErr || !strings.HasPrefix(unknown, "validation: ") {
				t.Fatalf("an unknown id: %s", unknown)
			}
			refused := func(t *testing.T, role string, ids ...string) {
				t.Helper()
				for _, id := range ids {
					if out, isErr := get(role, id); !isErr || out != unknown {
						t.Errorf("%s reads %s: %.200q, want %q", role, id, out, unknown)
					}
				}
			}

			report := "alice's report\n" + strings.Repeat("confidential figures\n", 120) // 2.5 KiB
			reportID := put(t, "alice", map[string]any{"name": "report.txt", "content": report})
			alice := map[string]string{reportID: report} // what alice stored, by id, which every row leaves as it was
			unchanged := func(t *testing.T) {
				t.Helper()
				for id, want := range alice {
					if out, isErr := get("alice", id); isErr || out != want {
						t.Errorf("afterwards, alice reads her %s: %.200q", id, out)
					}
					refused(t, "carol", id)
				}
			}

			sum := sha256.Sum256([]byte("common bytes"))
			guess := hex.EncodeToString(sum[:])
			for _, row := range []struct {
				name   string
				attack func(t *testing.T)
			}{
				{"read another role's id", func(t *testing.T) {
					refused(t, "bob", reportID)
				}},
				{"confirm a guess by its hash", func(t *testing.T) {
					sum := sha256.Sum256([]byte(report))
					hash := hex.EncodeToString(sum[:])
					if reportID == hash {
						t.Errorf("the report's id is its SHA-256")
					}
					refused(t, "bob", hash)
				}},
				{"squat on bytes before their owner", func(t *testing.T) {
					squat := put(t, "bob", map[string]any{"content": "common bytes"})
					mine := put(t, "alice", map[string]any{"content": "common bytes"})
					if mine == squat || mine == guess || squat == guess {
						t.Errorf("ids %s (bob's) and %s (alice's) for the same bytes, whose SHA-256 is %s", squat, mine, guess)
					}
					alice[mine] = "common bytes"
					refused(t, "bob", mine, guess)
				}},
				{"evict by filling a quota", func(t *testing.T) {
					// Each of bob's stores either evicts his own oldest or is
					// refused (policy) once the host's quota holds only
					// alice's and his newest.
					for i := range 10 {
						if out, isErr := as["bob"]("put_artifact", map[string]any{"content": strings.Repeat(string(rune('a'+i)), 1000)}); isErr && !strings.HasPrefix(out, "policy: ") {
							t.Fatalf("bob fills his quota: %s", out)
						}
					}
				}},
				{"hand on what was shared", func(t *testing.T) {
					shared := put(t, "alice", map[string]any{"content": "for bob's eyes", "share": []string{"bob"}})
					alice[shared] = "for bob's eyes"
					if out, isErr := get("bob", shared); isErr || out != "for bob's eyes" {
						t.Errorf("bob reads what alice shared with him: %s", out)
					}
					out, isErr := as["bob"]("spawn_agent_with_task", map[string]any{"roleId": "carol", "task": "read it", "artifacts": []string{shared}})
					if !isErr || !strings.HasPrefix(out, "policy: ") {
						t.Errorf("bob hands alice's artifact to carol: %s, want policy", out)
					}
					out, isErr = as["bob"]("spawn_agent_with_task", map[string]any{"roleId": "carol", "task": "read it", "artifacts": []string{reportID}})
					if out = strings.ReplaceAll(out, reportID, "ID"); !isErr || out != unknown {
						t.Errorf("bob hands alice's report to carol: %s, want %s", out, unknown)
					}
				}},
			} {
				t.Run(row.name, func(t *testing.T) {
					row.attack(t)
					unchanged(t)
				})
			}
		})
	}
}

// artifactClient is a caller as role with token: an MCP client of the
// era kind names on /mcp/role, or POST /api/call.
func artifactClient(t *testing.T, h *hostile, kind, role, token string) artifactCaller {
	t.Helper()
	if kind == "api" {
		return func(tool string, args map[string]any) (string, bool) {
			t.Helper()
			body, _ := json.Marshal(map[string]any{"role": role, "tool": tool, "arguments": args})
			status, resp := h.send(request{method: "POST", path: "/api/call", token: token, contentType: "application/json", body: string(body)})
			var res struct {
				OK     bool   `json:"ok"`
				Stdout string `json:"stdout"`
				Error  *struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(resp), &res); err != nil || status != http.StatusOK {
				t.Fatalf("%s as %s: %d %s", tool, role, status, resp)
			}
			if !res.OK && res.Error != nil {
				return res.Error.Code + ": " + res.Error.Message, true
			}
			return res.Stdout, !res.OK
		}
	}
	version := strings.TrimPrefix(kind, "mcp ")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.base + "/mcp/" + role, HTTPClient: &http.Client{Transport: bearerTransport(token)}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s's MCP client (%s): %v", role, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("%s's MCP client negotiated %s, want %s", role, got, version)
	}
	return func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		return mcptest.CallText(t, cs, tool, args)
	}
}
