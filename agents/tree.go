package agents

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/plugins/console"
	"github.com/toolhost/toolhost/store"
)

// Node is one node of an agent's event tree: an agent, one of its turns,
// a tool call, or a single event (started, completed, a console line).
type Node struct {
	// Kind is "agent", "turn", "call" or "event".
	Kind string `json:"kind"`
	// ID is the agent's, turn's or call's id, or the event's type.
	ID string `json:"id"`
	// Title is the node's one-line description.
	Title string `json:"title"`
	// Status is "ok", "failed", "running" or "" (for events), or an agent's
	// status.
	Status string `json:"status,omitempty"`
	// Seq is the id of the node's first event, and Time its time, which
	// orders siblings: events written by several hosts sharing a store
	// are numbered in the order of their hosts' commits, not of their
	// times.
	Seq      int64     `json:"seq"`
	Time     time.Time `json:"time,omitzero"`
	Children []*Node   `json:"children,omitempty"`
}

// treeEventLimit bounds the events read per agent.
const treeEventLimit = 100_000

// Tree builds the event tree of an agent: agent → turn → tool_call, with
// the agents it spawned under the calls that spawned them.
func Tree(ctx context.Context, st *store.Store, agentID string) (*Node, error) {
	all, err := st.Agents(ctx)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	ids := subtree(all, agentID)
	if len(ids) == 0 {
		return nil, noAgent(agentID)
	}
	byID := map[string]store.Agent{}
	for _, a := range all {
		byID[a.ID] = a
	}
	nodes := map[string]*Node{} // agents, turns and calls by id
	spawnedBy := map[string]string{}
	for _, id := range ids {
		a := byID[id]
		role := a.RoleID
		if r, err := st.Role(ctx, a.RoleID); err == nil {
			role = r.Name
		}
		n := &Node{Kind: "agent", ID: id, Status: a.Status, Seq: -1,
			Title: fmt.Sprintf("agent %s (role %s) %s: %d turns, %d tokens", id, role, a.Status, a.Turns, a.Tokens)}
		if a.Error != "" {
			n.Title += ": " + a.Error
		}
		nodes[id] = n
		events, err := st.Events(ctx, store.EventFilter{Agent: id, Limit: treeEventLimit})
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
		}
		for _, e := range events {
			if e.Type == EventAgentSpawned {
				spawnedBy[id] = e.ParentID
				n.Seq, n.Time = e.ID, e.Time
				continue
			}
			addEvent(nodes, n, e)
		}
	}
	for _, id := range ids[1:] {
		parent := nodes[spawnedBy[id]]
		if parent == nil {
			parent = nodes[byID[id].ParentID]
		}
		parent.Children = append(parent.Children, nodes[id])
	}
	root := nodes[agentID]
	sortTree(root)
	return root, nil
}

// addEvent places one of an agent's events in its tree.
func addEvent(nodes map[string]*Node, agent *Node, e store.Event) {
	parent := nodes[e.ParentID]
	if parent == nil || parent.Kind == "agent" && parent != agent {
		parent = agent
	}
	str := func(k string) string { s, _ := e.Payload[k].(string); return s }
	num := func(k string) int { f, _ := e.Payload[k].(float64); return int(f) }
	switch e.Type {
	case EventTurnStarted:
		n := &Node{Kind: "turn", ID: str("id"), Status: "running", Seq: e.ID, Time: e.Time, Title: fmt.Sprintf("turn %d", num("turn"))}
		nodes[n.ID] = n
		agent.Children = append(agent.Children, n)
	case EventTurnCompleted:
		n := nodes[str("id")]
		if n == nil {
			return
		}
		n.Status = "ok"
		switch out := str("outcome"); out {
		case "tool_calls":
			n.Title += fmt.Sprintf(" → %d tool call(s)", num("calls"))
			if failed := num("failed"); failed > 0 {
				// A turn is not done when one of its calls failed.
				n.Status = "failed"
				n.Title += fmt.Sprintf(", %d failed", failed)
			}
		case "answer":
			n.Title += " → final answer"
		case "error":
			n.Status = "failed"
			n.Title += " → no reply: " + output.OneLine(str("reason"), 160)
			return
		default:
			n.Status = "failed"
			n.Title += " → bad output: " + str("reason")
		}
		n.Title += fmt.Sprintf(", %d tokens", num("tokens"))
	case store.EventCallStarted:
		n := &Node{Kind: "call", ID: e.CallID, Status: "running", Seq: e.ID, Time: e.Time, Title: e.Tool + " " + output.OneLine(str("arguments"), 80)}
		nodes[e.CallID] = n
		parent.Children = append(parent.Children, n)
	case store.EventCallCompleted, store.EventCallFailed:
		n := nodes[e.CallID]
		if n == nil {
			return
		}
		n.Status = "ok"
		n.Title += fmt.Sprintf(" ✓ %.1fms", e.Payload["latency_ms"])
		if e.Type == store.EventCallFailed {
			n.Status = "failed"
			n.Title = fmt.Sprintf("%s ✗ %s: %s", strings.SplitN(n.Title, " ", 2)[0], str("code"), output.OneLine(str("error"), 120))
		}
	case EventAgentStarted:
		agent.Children = append(agent.Children, &Node{Kind: "event", ID: e.Type, Seq: e.ID, Time: e.Time, Title: "started"})
	case EventAgentCompleted:
		agent.Children = append(agent.Children, &Node{Kind: "event", ID: e.Type, Seq: e.ID, Time: e.Time, Status: "ok", Title: "completed: " + output.OneLine(str("answer"), 120)})
	case EventAgentFailed:
		agent.Children = append(agent.Children, &Node{Kind: "event", ID: e.Type, Seq: e.ID, Time: e.Time, Status: "failed",
			Title: fmt.Sprintf("failed: %s: %s", str("code"), output.OneLine(str("error"), 160))})
	case EventAgentTerminated:
		agent.Children = append(agent.Children, &Node{Kind: "event", ID: e.Type, Seq: e.ID, Time: e.Time, Status: "failed", Title: "terminated: " + str("reason")})
	case console.EventPrint:
		parent = cmp.Or(nodes[e.ParentID], agent)
		parent.Children = append(parent.Children, &Node{Kind: "event", ID: e.Type, Seq: e.ID, Time: e.Time, Title: "console: " + output.OneLine(str("text"), 120)})
	}
}

func sortTree(n *Node) {
	slices.SortStableFunc(n.Children, func(a, b *Node) int {
		if !a.Time.IsZero() && !b.Time.IsZero() {
			if c := a.Time.Compare(b.Time); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	for _, c := range n.Children {
		sortTree(c)
	}
}

// Write prints the tree with box-drawing branches, one node per line.
func (n *Node) Write(w io.Writer) error {
	if _, err := fmt.Fprintln(w, n.Title); err != nil {
		return err
	}
	return n.writeChildren(w, "")
}

func (n *Node) writeChildren(w io.Writer, prefix string) error {
	for i, c := range n.Children {
		branch, next := "├─ ", "│  "
		if i == len(n.Children)-1 {
			branch, next = "└─ ", "   "
		}
		if _, err := fmt.Fprintf(w, "%s%s%s\n", prefix, branch, c.Title); err != nil {
			return err
		}
		if err := c.writeChildren(w, prefix+next); err != nil {
			return err
		}
	}
	return nil
}
