package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/server"
)

// The notes module's tools (examples/notes) and their arguments: the
// strings a condition reads, and search_notes' optional number.
var (
	noteTools   = []string{"add_note", "get_note", "search_notes"}
	noteStrings = map[string][]string{"add_note": {"title", "body"}, "get_note": {"title"}, "search_notes": {"query"}}
	// noteValues are the strings arguments and literals are drawn from,
	// so that conditions match often.
	noteValues = []string{"src/a", "src/../etc/passwd", "../x", "/etc/shadow", "sudo rm -rf", "a", "x.key", "src", "notes", "./src//b"}
)

// propCond is a generated condition: its CEL text, and what it evaluates
// to on a call as CEL does (an error for a missing argument; && and ||
// decided by a side that decides despite an error on the other).
type propCond struct {
	expr string
	eval func(tool string, args map[string]any) (bool, error)
}

var errNoKey = errors.New("no such key")

func strArg(args map[string]any, f string) (string, error) {
	v, ok := args[f]
	if !ok {
		return "", errNoKey
	}
	return v.(string), nil
}

// genAtom draws a comparison over an argument of the notes tools, the tool
// or has().
func genAtom(t *rapid.T) propCond {
	f := rapid.SampledFrom([]string{"title", "body", "query", "limit"}).Draw(t, "field")
	lit := rapid.SampledFrom(noteValues).Draw(t, "literal")
	n := rapid.IntRange(0, 12).Draw(t, "n")
	str := func(expr string, op func(string) bool) propCond {
		return propCond{expr, func(_ string, args map[string]any) (bool, error) {
			s, err := strArg(args, f)
			return err == nil && op(s), err
		}}
	}
	switch op := rapid.IntRange(0, 7).Draw(t, "op"); {
	case op == 0:
		return propCond{fmt.Sprintf("has(args.%s)", f), func(_ string, args map[string]any) (bool, error) { _, ok := args[f]; return ok, nil }}
	case op == 1:
		tool := rapid.SampledFrom(noteTools).Draw(t, "tool")
		return propCond{fmt.Sprintf("tool == '%s'", tool), func(tl string, _ map[string]any) (bool, error) { return tl == tool, nil }}
	case f == "limit":
		return propCond{fmt.Sprintf("args.limit > %d", n), func(_ string, args map[string]any) (bool, error) {
			v, ok := args["limit"]
			if !ok {
				return false, errNoKey
			}
			return v.(float64) > float64(n), nil
		}}
	case op == 2:
		return str(fmt.Sprintf("args.%s.contains('%s')", f, lit), func(s string) bool { return strings.Contains(s, lit) })
	case op == 3:
		return str(fmt.Sprintf("args.%s.startsWith('%s')", f, lit), func(s string) bool { return strings.HasPrefix(s, lit) })
	case op == 4:
		return str(fmt.Sprintf("args.%s.endsWith('%s')", f, lit), func(s string) bool { return strings.HasSuffix(s, lit) })
	case op == 5:
		return str(fmt.Sprintf("size(args.%s) > %d", f, n), func(s string) bool { return len(s) > n })
	case op == 6:
		return str(fmt.Sprintf("path.clean(args.%s).startsWith('%s')", f, lit), func(s string) bool { return strings.HasPrefix(path.Clean(s), lit) })
	default:
		return str(fmt.Sprintf("args.%s == '%s'", f, lit), func(s string) bool { return s == lit })
	}
}

// genCond draws a condition of atoms joined by !, && and ||.
func genCond(t *rapid.T, depth int) propCond {
	if depth == 0 {
		return genAtom(t)
	}
	switch rapid.IntRange(0, 3).Draw(t, "join") {
	case 0:
		c := genCond(t, depth-1)
		return propCond{"!(" + c.expr + ")", func(tool string, args map[string]any) (bool, error) {
			b, err := c.eval(tool, args)
			return !b && err == nil, err
		}}
	case 1:
		return join("&&", false, genCond(t, depth-1), genCond(t, depth-1))
	case 2:
		return join("||", true, genCond(t, depth-1), genCond(t, depth-1))
	}
	return genAtom(t)
}

// join is a && b (decides false) or a || b (decides true), as CEL
// evaluates them: a side that evaluates to decides decides, whatever the
// other; otherwise an error on either side is the result.
func join(op string, decides bool, a, b propCond) propCond {
	return propCond{"(" + a.expr + ") " + op + " (" + b.expr + ")", func(tool string, args map[string]any) (bool, error) {
		x, ex := a.eval(tool, args)
		y, ey := b.eval(tool, args)
		switch {
		case ex == nil && x == decides || ey == nil && y == decides:
			return decides, nil
		case ex != nil:
			return false, ex
		case ey != nil:
			return false, ey
		}
		return !decides, nil
	}}
}

// propCase is a generated role (its rules, their conditions' meaning)
// and the calls made through it.
type propCase struct {
	role  string
	rules []rules.Rule
	conds []propCond // conds[i].eval nil: rules[i] has no condition or a literal one
	calls []propCall
}

type propCall struct {
	tool string
	args map[string]any
}

func (c propCall) json() []byte { b, _ := json.Marshal(c.args); return b }

func (pc *propCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "role %s:", pc.role)
	for _, r := range pc.rules {
		fmt.Fprintf(&b, "\n  rule %s tools=%q when=%q action=%s", r.Name, r.Tools, r.When, r.Action)
	}
	return b.String()
}

// genCase draws a role of 1–6 rules and 1–3 distinct calls of the notes
// tools with valid arguments.
func genCase(t *rapid.T, role string) *propCase {
	pc := &propCase{role: role}
	for i := range rapid.IntRange(1, 6).Draw(t, "rules") {
		r := rules.Rule{Name: fmt.Sprintf("r%d", i), Action: rapid.SampledFrom([]rules.Action{rules.Deny, rules.Approve, rules.Allow}).Draw(t, "action")}
		switch rapid.IntRange(0, 3).Draw(t, "tools") {
		case 0: // none: every tool of the role
		case 1:
			r.Tools = []string{"group:notes"}
		case 2:
			r.Tools = rapid.SliceOfNDistinct(rapid.SampledFrom(append(slices.Clone(noteTools), "group:other")), 1, 2, rapid.ID).Draw(t, "names")
		default:
			r.Tools = []string{rapid.SampledFrom(noteTools).Draw(t, "name")}
		}
		var c propCond
		switch rapid.IntRange(0, 7).Draw(t, "when") {
		case 0: // none
		case 1:
			r.When = rapid.SampledFrom([]string{"true", "false"}).Draw(t, "literal")
		default:
			c = genCond(t, rapid.IntRange(0, 2).Draw(t, "depth"))
			r.When = c.expr
		}
		if rapid.Bool().Draw(t, "reason") {
			r.Reason = "because " + r.Name
		}
		pc.rules, pc.conds = append(pc.rules, r), append(pc.conds, c)
	}
	seen := map[string]bool{}
	for range rapid.IntRange(1, 3).Draw(t, "calls") {
		c := propCall{tool: rapid.SampledFrom(noteTools).Draw(t, "tool"), args: map[string]any{}}
		for _, f := range noteStrings[c.tool] {
			c.args[f] = rapid.SampledFrom(noteValues).Draw(t, f)
		}
		if c.tool == "search_notes" && rapid.Bool().Draw(t, "has limit") {
			c.args["limit"] = float64(rapid.IntRange(0, 12).Draw(t, "limit"))
		}
		if k := c.tool + string(c.json()); !seen[k] {
			seen[k] = true
			pc.calls = append(pc.calls, c)
		}
	}
	return pc
}

// applies is whether a rule's tools name the tool (or its group, or none
// are named).
func applies(r rules.Rule, tool string) bool {
	return len(r.Tools) == 0 || slices.Contains(r.Tools, tool) || slices.Contains(r.Tools, "group:notes")
}

// predict is the verdict the rules give a call, as configuration.md says:
// a tool denied whatever its arguments before any rule that could let a
// call through is refused naming that rule; otherwise the first rule that
// matches decides (a condition that cannot be evaluated refuses), and none
// lets the call run.
func (pc *propCase) predict(c propCall) string {
	passable := false
	for i, r := range pc.rules {
		if !applies(r, c.tool) || r.When == "false" {
			continue
		}
		if pc.conds[i].eval == nil { // always
			if r.Action == rules.Deny && !passable {
				return "deny:" + r.Name
			}
			break
		}
		passable = passable || r.Action != rules.Deny
	}
	for i, r := range pc.rules {
		if !applies(r, c.tool) || r.When == "false" {
			continue
		}
		match, err := true, error(nil)
		if e := pc.conds[i].eval; e != nil {
			match, err = e(c.tool, c.args)
		}
		switch {
		case err != nil, match && r.Action == rules.Deny:
			return "deny:" + r.Name
		case match && r.Action == rules.Approve:
			return "approve:" + r.Name
		case match:
			return "ran"
		}
	}
	return "ran"
}

var ruleNamed = regexp.MustCompile(`rule "([^"]+)"`)

// verdict reads a call's outcome as a front reports it: ran (ok, or the
// tool's own failure), deny:RULE (policy naming the rule), approve:RULE
// (approval_denied naming the rule: every approver here denies), or
// CODE:MESSAGE for anything else.
func verdict(ok bool, code toolhost.Code, msg string) string {
	rule := ""
	if m := ruleNamed.FindStringSubmatch(msg); m != nil {
		rule = m[1]
	}
	switch {
	case ok || code == toolhost.CodeToolExec:
		return "ran"
	case code == toolhost.CodePolicy && rule != "":
		return "deny:" + rule
	case code == toolhost.CodeApprovalDenied && rule != "":
		return "approve:" + rule
	}
	return fmt.Sprintf("%s:%s", code, msg)
}

// envelope is a result envelope or an error body, as /api/call, the CLI and
// the agent loop's tool messages give them.
type envelope struct {
	OK    bool                `json:"ok"`
	Error *toolhost.ErrorInfo `json:"error"`
}

func envelopeVerdict(b []byte) string {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Sprintf("unreadable:%q", b)
	}
	if e.Error == nil {
		e.Error = &toolhost.ErrorInfo{}
	}
	return verdict(e.OK, e.Error.Code, e.Error.Message)
}

// propConfig is the HCL of a host on the notes module (built into dir)
// whose approver denies every call that needs approval, without
// authentication (loopback only), with the roles' blocks.
func propConfig(dir, data, roles string) string {
	return fmt.Sprintf(`data_dir = %q
auth {
  disabled = true
}
executor {
  approver = "deny"
}
plugin "notes" {
  path = %q
  config {
    max_notes = 100000
  }
}
%s`, data, filepath.Join(dir, "notes"), roles)
}

// roleHCL is a case's role as a config block.
func (pc *propCase) roleHCL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "role %q {\n  tool_groups = [\"notes\"]\n", pc.role)
	for _, r := range pc.rules {
		fmt.Fprintf(&b, "  rule %q {\n    action = %q\n", r.Name, r.Action)
		if r.Tools != nil {
			tools, _ := json.Marshal(r.Tools)
			fmt.Fprintf(&b, "    tools = %s\n", tools)
		}
		if r.When != "" {
			fmt.Fprintf(&b, "    when = %q\n", r.When)
		}
		if r.Reason != "" {
			fmt.Fprintf(&b, "    reason = %q\n", r.Reason)
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// TestRuleVerdictSameOnEveryPath is the property that a rule's verdict on a
// call is the same through POST /api/call, MCP (/mcp/ROLE), the agent loop
// and `toolhost call`, and is what the rules predict (predict). Roles of
// 1–6 rules (deny, approve, allow; over the notes module's tools by name,
// group:notes or none; conditions of contains, startsWith, endsWith, size,
// path.clean, ==, a number's >, has() and the tool, joined by !, && and
// ||) and their calls are drawn by rapid; the approver denies every call
// that needs approval, so that approve is seen at once as approval_denied
// naming the rule. The API and MCP are checked within each run; the agent
// loop (one agent per role, the scripted model making the calls) and the
// CLI (the real binary, a host per call, the roles as config blocks) over
// the batch of runs afterwards, since they start an agent or a process
// per call.
func TestRuleVerdictSameOnEveryPath(t *testing.T) {
	dir := t.TempDir()
	for pkg, out := range map[string]string{"../../examples/notes": "notes", ".": "toolhost"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	h := hosttest.Run(t, propConfig(dir, filepath.Join(dir, "data"), ""))
	ctx := context.Background()
	handler, err := server.New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	client := http.DefaultClient

	var cases []*propCase
	want := map[*propCase][]string{}
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		pc := genCase(rt, fmt.Sprintf("case%d", runs))
		if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: pc.role, ToolGroups: []string{"notes"}, Rules: pc.rules}); err != nil {
			rt.Fatalf("%v\n%s", err, pc)
		}
		mc := mcp.NewClient(&mcp.Implementation{Name: "rules-prop"}, nil)
		cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/" + pc.role}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer cs.Close()
		var verdicts []string
		for _, c := range pc.calls {
			predicted := pc.predict(c)
			body, _ := json.Marshal(server.CallBody{Role: pc.role, Tool: c.tool, Arguments: c.json()})
			resp, err := client.Post(srv.URL+"/api/call", "application/json", bytes.NewReader(body))
			if err != nil {
				rt.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			api := envelopeVerdict(buf.Bytes())

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			var viaMCP string
			switch {
			case err != nil:
				viaMCP = "protocol error:" + err.Error()
			case !res.IsError:
				viaMCP = "ran"
			default:
				text := res.Content[0].(*mcp.TextContent).Text
				code, msg, _ := strings.Cut(text, ": ")
				viaMCP = verdict(false, toolhost.Code(code), msg)
			}
			if api != predicted || viaMCP != predicted {
				rt.Fatalf("%s %s: predicted %s; API %s; MCP %s\n%s", c.tool, c.json(), predicted, api, viaMCP, pc)
			}
			verdicts = append(verdicts, predicted)
		}
		cases = append(cases, pc)
		want[pc] = verdicts
	})
	if t.Failed() {
		return
	}
	kinds := map[string]int{}
	for _, vs := range want {
		for _, v := range vs {
			kind, _, _ := strings.Cut(v, ":")
			kinds[kind]++
		}
	}
	t.Logf("%d roles; verdicts %v", len(cases), kinds)
	t.Run("agent loop", func(t *testing.T) { checkAgentVerdicts(t, h, dir, cases, want) })
	t.Run("cli", func(t *testing.T) { checkCLIVerdicts(t, dir, cases, want) })
}

// checkAgentVerdicts runs an agent of each case's role on h, whose
// scripted model makes the case's calls a turn each, and compares what the
// agent's tool messages say with want.
func checkAgentVerdicts(t *testing.T, h *host.Host, dir string, cases []*propCase, want map[*propCase][]string) {
	type turn struct {
		ToolCalls   []map[string]any `json:"tool_calls,omitempty"`
		FinalAnswer string           `json:"final_answer,omitempty"`
		If          string           `json:"if"`
	}
	script := map[string]map[string][]turn{"roles": {}}
	for _, pc := range cases {
		var turns []turn
		for _, c := range pc.calls {
			turns = append(turns, turn{ToolCalls: []map[string]any{{"name": c.tool, "arguments": c.args}}, If: "any"})
		}
		script["roles"][pc.role] = append(turns, turn{FinalAnswer: "done", If: "any"})
	}
	scriptPath := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(script)
	if err := os.WriteFile(scriptPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := model.NewScripted(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	rt := agents.New(h, &agents.Options{Provider: sc, RunAgents: true})
	ctx := context.Background()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	spawned := map[*propCase]string{}
	for _, pc := range cases {
		a, err := rt.Spawn(ctx, agents.SpawnRequest{Role: pc.role, Task: "make the calls"})
		if err != nil {
			t.Fatal(err)
		}
		spawned[pc] = a.ID
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, id := range spawned {
		if err := rt.Wait(wctx, id); err != nil {
			t.Fatal(err)
		}
	}
	last := map[string]model.Request{} // the last turn of each agent, holding every tool message
	for _, r := range sc.Requests() {
		if r.Purpose == model.PurposeTurn {
			last[r.Agent.ID] = r
		}
	}
	for _, pc := range cases {
		var got []string
		for _, m := range last[spawned[pc]].Messages {
			if m.Role == model.RoleTool {
				got = append(got, envelopeVerdict([]byte(m.Content)))
			}
		}
		if !slices.Equal(got, want[pc]) {
			t.Errorf("agent loop: %v, want %v (the API's and MCP's)\n%s\ncalls %v", got, want[pc], pc, pc.calls)
		}
	}
}

// checkCLIVerdicts runs `toolhost call` (the binary built into dir) for
// each call of each case, on configs holding the cases' roles as blocks,
// three at a time (each on its own config and data directory), and
// compares the verdicts with want.
func checkCLIVerdicts(t *testing.T, dir string, cases []*propCase, want map[*propCase][]string) {
	var roles strings.Builder
	for _, pc := range cases {
		roles.WriteString(pc.roleHCL())
	}
	const workers = 3
	type job struct {
		pc *propCase
		i  int
	}
	jobs := make(chan job)
	var mu sync.Mutex
	got := map[*propCase][]string{}
	var wg sync.WaitGroup
	for w := range workers {
		cfgPath := filepath.Join(dir, fmt.Sprintf("cli%d.hcl", w))
		if err := os.WriteFile(cfgPath, []byte(propConfig(dir, filepath.Join(dir, fmt.Sprintf("cli%d", w)), roles.String())), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				c := j.pc.calls[j.i]
				cmd := exec.Command(filepath.Join(dir, "toolhost"), "call", "-config", cfgPath, "-log-level", "error", "-role", j.pc.role, c.tool, string(c.json()))
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				_ = cmd.Run() // exit status 1 for a call not ok
				v := envelopeVerdict(stdout.Bytes())
				if strings.HasPrefix(v, "unreadable:") {
					v += " stderr: " + stderr.String()
				}
				mu.Lock()
				got[j.pc][j.i] = v
				mu.Unlock()
			}
		}()
	}
	for _, pc := range cases {
		got[pc] = make([]string, len(pc.calls))
	}
	for _, pc := range cases {
		for i := range pc.calls {
			jobs <- job{pc, i}
		}
	}
	close(jobs)
	wg.Wait()
	for _, pc := range cases {
		if !slices.Equal(got[pc], want[pc]) {
			t.Errorf("toolhost call: %v, want %v (the API's and MCP's)\n%s\ncalls %v", got[pc], want[pc], pc, pc.calls)
		}
	}
}
