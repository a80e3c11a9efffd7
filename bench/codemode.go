package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/codemode"
	"github.com/toolhost/toolhost/internal/tokencount"
)

// codeModeName is the code-mode measurement's name for -paths.
const codeModeName = "code mode"

// The code-mode goals, per task: one script / call by call.
const (
	codeTokensGoal = 0.40
	codeTurnsGoal  = 0.34
)

// The ways a task is done.
const (
	wayParallel = "call by call, parallel calls"
	wayOneByOne = "call by call, one call a turn"
	wayScript   = "one script (run_script)"
)

// codeWays are the ways, each with its role, in the report's order.
var codeWays = []struct{ Name, Role string }{
	{wayParallel, "code-calls"}, {wayOneByOne, "code-calls"}, {wayScript, "code-script"},
}

// codeResult is the code-mode measurement: each task done each way.
type codeResult struct {
	Tasks []codeTaskResult
}

// codeTaskResult is one task, done each way (codeWays' order).
type codeTaskResult struct {
	Name string
	Runs []codeRun
}

// codeRun counts what one way of doing a task sent the model, in tokens
// (o200k_base, internal/tokencount), and the model's turns.
type codeRun struct {
	Way    string
	Turns  int // model requests until the final answer, that one included
	Calls  int // tool calls made
	Defs   int // tool definitions, as JSON, summed over the turns (each request carries them)
	Said   int // what the model wrote: its tool calls as JSON ({name, arguments}; a script in its arguments) and its answer
	Read   int // the tool results, as the runtime hands them to the model, each once
	Prompt int // every request whole (system prompt, tools, conversation), summed: what a chat API bills as prompt tokens
	// ScriptDef is run_script's definition's share of Defs.
	ScriptDef int
	Moves     []string // each turn's calls ("read_file×50"), or "answer"
	Answer    string
}

// tokens are the tokens reaching the model: definitions, calls and
// script, results.
func (r codeRun) tokens() int { return r.Defs + r.Said + r.Read }

// measureCodeMode does each task each way through the agent runtime on an
// in-process host with the workspace and network modules of pluginDir (the
// network allowed to reach 127.0.0.1, where the pages are served) and the
// code group, its model a [codePlayer], and checks every answer against
// the task's.
func measureCodeMode(ctx context.Context, pluginDir, tmp string) (*codeResult, error) {
	ws, err := os.MkdirTemp(tmp, "codemode-")
	if err != nil {
		return nil, err
	}
	wants := make([]string, len(codeTasks))
	for i, t := range codeTasks {
		if wants[i], err = t.Fixture(ws); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	pages := httptest.NewServer(codePages())
	defer pages.Close()
	// The runtime's bounds are raised so that the one-call-a-turn way
	// (52 turns on the largest-file task, its conversation resent each
	// turn) runs to its answer, uncompressed, as the others do; a script's
	// calls, 50 by default, so that the largest-file script makes its 51.
	body := fmt.Sprintf(`plugin_dir = %q
builtin "workspace" {
  config {
    roots = [%q]
  }
}
builtin "network" {
  config {
    allow_hosts = ["127.0.0.1"]
  }
}
code {
  calls = 100
}
runtime {
  max_turns      = 200
  max_tokens     = 100000000
  context_budget = 10000000
}
`, pluginDir, ws)
	h, err := startHost(ctx, tmp, body, nil)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	for _, m := range h.Modules().List() {
		if m.State != host.StateRunning {
			return nil, fmt.Errorf("%s is %s: %s", m.Name, m.State, m.LastError)
		}
	}
	player := &codeModel{}
	rt := agents.New(h, &agents.Options{Provider: player, RunAgents: true, Console: io.Discard, WatchEvery: 50 * time.Millisecond})
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	defer rt.Close()
	// The roles, once the runtime has registered the code group.
	for _, r := range []host.RoleSpec{{Name: "code-calls", ToolGroups: []string{"workspace", "network"}},
		{Name: "code-script", ToolGroups: []string{host.CodeGroup, "workspace", "network"}}} {
		if _, err := h.Roles().Create(ctx, r); err != nil {
			return nil, err
		}
	}
	res := &codeResult{}
	for i, t := range codeTasks {
		tr := codeTaskResult{Name: t.Name}
		for _, w := range codeWays {
			run, err := player.play(ctx, rt, h, &codePlayer{task: t, way: w.Name, role: w.Role, base: pages.URL})
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", t.Name, w.Name, err)
			}
			if run.Answer != wants[i] {
				return nil, fmt.Errorf("%s, %s: the answer\n%s\nis not the task's\n%s", t.Name, w.Name, run.Answer, wants[i])
			}
			tr.Runs = append(tr.Runs, run)
		}
		res.Tasks = append(res.Tasks, tr)
	}
	return res, nil
}

// codeModel is the model of the measurement's agents: it hands each request
// to the player of the agent running, one at a time.
type codeModel struct {
	mu  sync.Mutex
	cur *codePlayer
}

// play runs an agent of p's role on p's task, p playing its model, and
// returns what p counted and the agent's answer.
func (m *codeModel) play(ctx context.Context, rt *agents.Runtime, h *host.Host, p *codePlayer) (codeRun, error) {
	m.mu.Lock()
	m.cur = p
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	a, err := rt.Spawn(ctx, agents.SpawnRequest{Role: p.role, Task: p.task.Prompt(p.base)})
	if err != nil {
		return codeRun{}, err
	}
	if err := rt.Wait(ctx, a.ID); err != nil {
		return codeRun{}, err
	}
	rec, err := h.Store().Agent(ctx, a.ID)
	if err != nil {
		return codeRun{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = nil
	if p.err != nil {
		return codeRun{}, p.err
	}
	if rec.Error != "" {
		return codeRun{}, fmt.Errorf("the agent failed: %s: %s", rec.ErrorCode, rec.Error)
	}
	p.run.Way, p.run.Answer = p.way, rec.Answer
	return p.run, nil
}

// Complete implements [model.Provider].
func (m *codeModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil || req.Agent.Role != m.cur.role {
		return nil, fmt.Errorf("code mode: a request of role %s, none expected", req.Agent.Role)
	}
	resp, err := m.cur.complete(req)
	if err != nil && m.cur.err == nil {
		m.cur.err = err
	}
	return resp, err
}

// codePlayer plays a competent model doing one task one way, and counts.
// Call by call, each step's calls are made in one turn (parallel calls,
// as the runtime runs a turn's calls as one batch), or one a turn; its
// next step is chosen from the results of the last. With a script, it
// writes the task's script, then answers from its result.
type codePlayer struct {
	task       codeTask
	way, role  string
	base       string
	steps      [][]string // each finished step's results (stdout), in call order
	cur        []string   // the results of the step under way
	pending    []toolCall // its calls not made yet (one a turn)
	stepCalls  int        // how many calls the step under way makes
	run        codeRun
	err        error
	nextCallID int
}

// complete counts a request and returns the next move.
func (p *codePlayer) complete(req *model.Request) (*model.Response, error) {
	p.run.Turns++
	tools, _ := json.Marshal(req.Tools)
	msgs, _ := json.Marshal(req.Messages)
	whole, err := tokencount.Count(req.System + string(tools) + string(msgs))
	if err != nil {
		return nil, err
	}
	p.run.Prompt += whole
	p.run.Defs += tokencount.JSON(req.Tools)
	for _, t := range req.Tools {
		if t.Name == codemode.Tool {
			p.run.ScriptDef += tokencount.JSON(t)
		}
	}
	// The results of the last turn's calls: the messages after its own.
	first := len(req.Messages)
	for first > 0 && req.Messages[first-1].Role == model.RoleTool {
		first--
	}
	for _, msg := range req.Messages[first:] {
		n, _ := tokencount.Count(msg.Content)
		p.run.Read += n
		var env struct {
			OK     bool   `json:"ok"`
			Stdout string `json:"stdout"`
		}
		if err := json.Unmarshal([]byte(msg.Content), &env); err != nil || !env.OK {
			return nil, fmt.Errorf("%s failed: %.500s", msg.Name, msg.Content)
		}
		p.cur = append(p.cur, env.Stdout)
	}
	var calls []toolCall
	var answer string
	switch {
	case len(p.pending) > 0:
		calls, p.pending = p.pending[:1], p.pending[1:]
	case p.way == wayScript:
		calls, answer, err = p.script()
	default:
		if p.stepCalls > 0 {
			p.steps, p.cur, p.stepCalls = append(p.steps, p.cur), nil, 0
		}
		calls, answer, err = p.task.Next(p.base, p.steps)
		p.stepCalls = len(calls)
		if p.way == wayOneByOne && len(calls) > 1 {
			calls, p.pending = calls[:1], calls[1:]
		}
	}
	if err != nil {
		return nil, err
	}
	msg := model.Message{Role: model.RoleAssistant, Content: answer}
	said, _ := tokencount.Count(answer)
	p.run.Moves = append(p.run.Moves, move(calls))
	if len(calls) > 0 {
		type sent struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		var out []sent
		for _, c := range calls {
			args, err := json.Marshal(c.Args)
			if err != nil {
				return nil, err
			}
			p.nextCallID++
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: "call_" + strconv.Itoa(p.nextCallID), Name: c.Name, Arguments: string(args)})
			out = append(out, sent{c.Name, string(args)})
		}
		said = tokencount.JSON(out)
		p.run.Calls += len(calls)
	}
	p.run.Said += said
	return &model.Response{Message: msg, Usage: model.Usage{PromptTokens: whole, CompletionTokens: said}}, nil
}

// move names a turn's calls: "search_files", "read_file×50" (the same
// tool's calls counted), "answer" for none.
func move(calls []toolCall) string {
	if len(calls) == 0 {
		return "answer"
	}
	var parts []string
	for i := 0; i < len(calls); {
		j := i + 1
		for j < len(calls) && calls[j].Name == calls[i].Name {
			j++
		}
		part := calls[i].Name
		if j-i > 1 {
			part += fmt.Sprintf("×%d", j-i)
		}
		parts, i = append(parts, part), j
	}
	return strings.Join(parts, " + ")
}

// transcript is a run's moves, turn by turn, a run of the same move in
// successive turns counted: "list_files → 50 turns of read_file → answer".
func (r codeRun) transcript() string {
	var parts []string
	for i := 0; i < len(r.Moves); {
		j := i + 1
		for j < len(r.Moves) && r.Moves[j] == r.Moves[i] {
			j++
		}
		part := r.Moves[i]
		if j-i > 1 {
			part = fmt.Sprintf("%d turns of %s", j-i, part)
		}
		parts, i = append(parts, part), j
	}
	return strings.Join(parts, " → ")
}

// script is the scripted way's move: the script first, then the answer
// from its result.
func (p *codePlayer) script() ([]toolCall, string, error) {
	if len(p.cur) == 0 {
		return []toolCall{{codemode.Tool, map[string]any{"script": p.task.Script(p.base)}}}, "", nil
	}
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(p.cur[0]), &out); err != nil || len(out.Result) == 0 {
		return nil, "", errors.Join(fmt.Errorf("run_script's result has no result: %.500s", p.cur[0]), err)
	}
	answer, err := p.task.Answer(out.Result)
	return nil, answer, err
}

// checks are the code-mode lines of the summary, per task: tokens, one
// script against call by call with parallel calls (the fewer tokens of the
// two call-by-call ways); turns, against call by call one call a turn (a
// model reading twenty files over twenty turns, what the goal is set
// against), and, without a target, against parallel calls, where a
// script's two turns are a third of none but tasks of six or more
// dependent steps. The goals hold a multi-step task: one that call by call
// takes more than one call. A task one call does is shown without them:
// there a script cannot save a turn, and its definitions cost more than
// the results it keeps from the model.
func (c *codeResult) checks(add func(name, fig, base string, v, maxV, minV float64)) {
	for _, t := range c.Tasks {
		calls, oneByOne, script := t.Runs[0], t.Runs[1], t.Runs[2]
		tokensGoal, turnsGoal := codeTokensGoal, codeTurnsGoal
		tokensLabel, turnsLabel := "goal ≥ 60 % fewer", "goal a third"
		if !t.multiStep() {
			tokensGoal, turnsGoal = 0, 0
			tokensLabel, turnsLabel = "one call does it: no goal", "one call does it: no goal"
		}
		add(fmt.Sprintf("code mode, %s: tokens, one script / call by call (%s)", t.Name, tokensLabel),
			fmt.Sprint(script.tokens()), fmt.Sprint(calls.tokens()), float64(script.tokens())/float64(calls.tokens()), tokensGoal, 0)
		add(fmt.Sprintf("code mode, %s: model turns, one script / call by call one call a turn (%s)", t.Name, turnsLabel),
			fmt.Sprint(script.Turns), fmt.Sprint(oneByOne.Turns), float64(script.Turns)/float64(oneByOne.Turns), turnsGoal, 0)
		add(fmt.Sprintf("code mode, %s: model turns, one script / call by call with parallel calls", t.Name),
			fmt.Sprint(script.Turns), fmt.Sprint(calls.Turns), float64(script.Turns)/float64(calls.Turns), 0, 0)
	}
}

// multiStep reports whether call by call took more than one call.
func (t codeTaskResult) multiStep() bool { return t.Runs[0].Calls > 1 }

// write renders the code-mode section.
func (c *codeResult) write(p func(string, ...any)) {
	p("\n## 7c. Code mode: one script against call by call\n")
	var single []string
	for _, t := range c.Tasks {
		if !t.multiStep() {
			single = append(single, "the task \""+t.Name+"\"")
		}
	}
	p("%d tasks (`bench/codetasks.go`), each written and committed with its fixture, expected answer, the call-by-call "+
		"model and the script before it was measured, each done three ways by an agent of the agent runtime on an in-process host"+
		" with the real workspace and network modules (the network allowed to reach the pages' server on 127.0.0.1): call by call, "+
		"each step's independent calls made in one turn (parallel calls, which the runtime runs as one batch: the baseline of the tokens goal, "+
		"the call-by-call way that costs fewer); call by call, one call a turn (the baseline of the turns goal: a model reading twenty files "+
		"over twenty turns); and with one `run_script`. The model is a program playing a competent model: it chooses its next "+
		"calls from the results it was given, and answers from them; every answer must equal the fixture's, the same text every way, or the bench fails.\n", len(c.Tasks))
	if len(single) > 0 {
		p("The goals hold the multi-step tasks, those that call by call takes more than one call. One call does %s: there a script "+
			"cannot save a turn, and its definitions cost more than the results it keeps from the model, so the summary shows its ratios "+
			"without a goal. The last task was added once the first measurement had shown that, and written before it was measured.\n",
			strings.Join(single, " and "))
	}
	p("Tokens (o200k_base, `internal/tokencount`, as the page's token cost) reaching the model: the tool definitions, counted in every " +
		"turn as a chat API resends them; what the model writes (its tool calls as JSON, the script inside run_script's arguments, its " +
		"answer); the tool results as the runtime hands them over, each once. The task's prompt and the role's system prompt are the same " +
		"every way and left out. Turns are model requests up to the final answer, that one included. The last column is every request " +
		"counted whole, as a chat API bills prompt tokens (the conversation resent each turn).\n")
	p("| task | way | turns, each turn's calls | calls | definitions | calls, script, answer | results | tokens | one script / this | billed prompt tokens |")
	p("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, t := range c.Tasks {
		script := t.Runs[len(t.Runs)-1]
		for _, r := range t.Runs {
			ratio := "—"
			if r.Way != wayScript {
				ratio = fmt.Sprintf("%s tokens, %s turns", formatRatio(float64(script.tokens())/float64(r.tokens())),
					formatRatio(float64(script.Turns)/float64(r.Turns)))
			}
			p("| %s | %s | %d: %s | %d | %d | %d | %d | %d | %s | %d |", t.Name, r.Way, r.Turns, r.transcript(), r.Calls, r.Defs, r.Said, r.Read, r.tokens(), ratio, r.Prompt)
		}
	}
	// What the scripted way would cost were run_script offered alone:
	// the role names the groups whose tools its scripts call, so their
	// definitions are offered too, and run_script's lists them again.
	var alone []string
	for _, t := range c.Tasks {
		calls, script := t.Runs[0], t.Runs[len(t.Runs)-1]
		only := script.tokens() - script.Defs + script.ScriptDef
		alone = append(alone, fmt.Sprintf("%s %d (%s of call by call)", t.Name, only, formatRatio(float64(only)/float64(calls.tokens()))))
	}
	script := c.Tasks[0].Runs[len(c.Tasks[0].Runs)-1]
	p("\nThe scripted role names the code group beside the workspace and network groups its scripts call, so each of its turns carries "+
		"their definitions and run_script's (%d tokens a turn, the functions listed again in its description). Were run_script offered alone, "+
		"the scripted way would cost: %s.\n", script.ScriptDef/script.Turns, strings.Join(alone, "; "))
}
