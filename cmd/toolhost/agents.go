package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/store"
)

// runUsage is `toolhost run`.
var runUsage = &usage{
	name:    "run",
	args:    "-role R TASK",
	min:     1,
	max:     1,
	summary: "run an agent on a task until it and its agents are idle; print its answer",
	details: `Console lines are printed as they come. The agents are left waiting for messages (a server
started later adopts them) unless -terminate. Exit status 1 when the agent failed.`,
	example: `toolhost run -role root -tree "Write a haiku about tool hosts"`,
}

// runCmd runs an agent of a role on a task until it and every agent it
// spawned are idle, printing console lines as they come and the answer at
// the end. Exit status 1 when the agent failed. The agents are left waiting
// for messages (a server started later adopts them) unless -terminate.
func runCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(runUsage, stdout, stderr, "warn")
	role := fs.String("role", "", "the agent's `role` (required)")
	provider := fs.String("provider", "", "the model block agents use (default: the runtime block's)")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: no limit beyond the runtime block's)")
	tree := fs.Bool("tree", false, "print the agent's event tree at the end")
	end := fs.Bool("terminate", false, "terminate the agents at the end, instead of leaving them waiting for messages")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *role == "" {
		return fs.fail("-role is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	c.console = stdout
	sess, ok := c.startHost(ctx, stderr, ownAgents, *provider)
	if !ok {
		return 1
	}
	defer sess.Close()
	a, err := sess.rt.Spawn(ctx, agents.SpawnRequest{Role: *role, Task: fs.Arg(0), Credential: store.CredentialCLI})
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "agent %s (role %s) started\n", a.ID, *role)
	waitErr := sess.rt.Wait(ctx, a.ID)
	if *end {
		if _, err := sess.rt.Terminate(context.WithoutCancel(ctx), a.ID, "toolhost run finished"); err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
		}
	}
	if err := sess.h.Events().Flush(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
	}
	st := sess.h.Store()
	if *tree {
		if err := writeTree(context.WithoutCancel(ctx), st, a.ID, stdout); err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 1
		}
	}
	if waitErr != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", waitErr)
		return 1
	}
	final, err := st.Agent(context.WithoutCancel(ctx), a.ID)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	if final.Status == store.StatusFailed {
		fmt.Fprintf(stderr, "agent %s failed (%s): %s\n", final.ID, final.ErrorCode, final.Error)
		return 1
	}
	fmt.Fprintln(stdout, final.Answer)
	fmt.Fprintf(stderr, "agent %s: %d turns, %d tokens\n", final.ID, final.Turns, final.Tokens)
	return 0
}

// writeTree prints an agent's event tree.
func writeTree(ctx context.Context, st *store.Store, id string, w io.Writer) error {
	n, err := agents.Tree(ctx, st, id)
	if err == nil {
		err = n.Write(w)
	}
	return err
}

// agentsUsage is `toolhost agents`. list and show read the store only;
// send and terminate go through the runtime, and a running server notices
// them within a second.
var agentsUsage = &usage{
	name:    "agents",
	summary: "list and show the agents, message and terminate them",
	example: `toolhost agents list
toolhost agents show agent_0123abcd`,
	subs: []*usage{agentsListUsage, agentsShowUsage, agentsSendUsage, agentsTerminateUsage},
}

var (
	agentsListUsage = &usage{
		name:    "agents list",
		summary: "list the agents: role, status, parent, turns, tokens, task",
		example: "toolhost agents list -json",
	}
	agentsShowUsage = &usage{
		name:    "agents show",
		args:    "ID",
		min:     1,
		max:     1,
		summary: "show an agent: its task, answer, children, conversation and mailbox",
		example: "toolhost agents show agent_0123abcd",
	}
	agentsSendUsage = &usage{
		name:    "agents send",
		args:    "ID MESSAGE",
		min:     2,
		max:     2,
		summary: "put a message in an agent's mailbox",
		details: `A MESSAGE that starts with "-" goes after "--".`,
		example: `toolhost agents send agent_0123abcd "also check the tests"`,
	}
	agentsTerminateUsage = &usage{
		name:    "agents terminate",
		args:    "ID",
		min:     1,
		max:     1,
		summary: "terminate an agent and the agents it spawned",
		example: "toolhost agents terminate agent_0123abcd",
	}
)

func agentsListCmd(args []string, stdout, stderr io.Writer) int {
	return readAgents(agentsListUsage, args, stdout, stderr, func(ctx context.Context, st *store.Store, _ string, asJSON bool) error {
		return listAgents(ctx, st, stdout, asJSON)
	})
}

func agentsShowCmd(args []string, stdout, stderr io.Writer) int {
	return readAgents(agentsShowUsage, args, stdout, stderr, func(ctx context.Context, st *store.Store, id string, asJSON bool) error {
		return showAgent(ctx, st, id, stdout, asJSON)
	})
}

// readAgents runs `agents list` or `agents show` (u): f on the store, with
// the first argument and -json.
func readAgents(u *usage, args []string, stdout, stderr io.Writer, f func(ctx context.Context, st *store.Store, arg string, asJSON bool) error) int {
	fs, c := newHostFlags(u, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	ctx := context.Background()
	return withStore(ctx, cfg, stderr, func(st *store.Store) error { return f(ctx, st, fs.Arg(0), *asJSON) })
}

func agentsSendCmd(args []string, stdout, stderr io.Writer) int {
	return withRuntime(agentsSendUsage, args, stdout, stderr, func(ctx context.Context, rt *agents.Runtime, args []string) error {
		m, err := rt.Send(ctx, "", args[0], args[1])
		if err == nil {
			fmt.Fprintf(stdout, "message %d sent to %s\n", m.ID, m.To)
		}
		return err
	})
}

func agentsTerminateCmd(args []string, stdout, stderr io.Writer) int {
	return withRuntime(agentsTerminateUsage, args, stdout, stderr, func(ctx context.Context, rt *agents.Runtime, args []string) error {
		ids, err := rt.Terminate(ctx, args[0], "terminated from the command line")
		if err == nil && len(ids) == 0 {
			fmt.Fprintf(stdout, "agent %s had already ended\n", args[0])
		}
		for _, id := range ids {
			fmt.Fprintf(stdout, "terminated %s\n", id)
		}
		return err
	})
}

// withRuntime runs `agents send` or `agents terminate` (u): f on a started
// host's runtime, with the positional arguments.
func withRuntime(u *usage, args []string, stdout, stderr io.Writer, f func(ctx context.Context, rt *agents.Runtime, args []string) error) int {
	fs, c := newHostFlags(u, stdout, stderr, "warn")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	ctx := context.Background()
	sess, ok := c.startHost(ctx, stderr, recordAgents, "")
	if !ok {
		return 1
	}
	defer sess.Close()
	if err := f(ctx, sess.rt, fs.Args()); err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return 0
}

// openStore opens the store the config's data directory and store block
// name.
func openStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	return store.OpenWith(ctx, cfg.DataDir, store.Options{Driver: cfg.Store.Driver, DSN: cfg.Store.DSN})
}

// withStore opens the data directory's store for f, printing f's error.
func withStore(ctx context.Context, cfg *config.Config, stderr io.Writer, f func(*store.Store) error) int {
	st, err := openStore(ctx, cfg)
	if err == nil {
		err = f(st)
		st.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return 0
}

func listAgents(ctx context.Context, st *store.Store, stdout io.Writer, asJSON bool) error {
	list, err := agents.List(ctx, st)
	if err != nil {
		return err
	}
	return printList(stdout, list, asJSON, "AGENT\tROLE\tSTATUS\tPARENT\tTURNS\tTOKENS\tTASK", func(a agents.AgentSummary) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%s", a.ID, a.Role, a.Status, dash(a.ParentID), a.Turns, a.Tokens, dash(output.OneLine(a.Task, 60)))
	})
}

func showAgent(ctx context.Context, st *store.Store, id string, stdout io.Writer, asJSON bool) error {
	d, err := agents.Show(ctx, st, id)
	if err != nil {
		return err
	}
	if asJSON {
		printJSON(stdout, d)
		return nil
	}
	fmt.Fprintf(stdout, "agent    %s\nrole     %s\nstatus   %s\nkind     %s\nparent   %s\nturns    %d\ntokens   %d\ncreated  %s\n",
		d.ID, d.Role, d.Status, d.Kind, dash(d.ParentID), d.Turns, d.Tokens, d.CreatedAt.Local().Format(time.DateTime))
	if d.Task != "" {
		fmt.Fprintf(stdout, "task     %s\n", output.OneLine(d.Task, 200))
	}
	if d.Answer != "" {
		fmt.Fprintf(stdout, "answer   %s\n", output.OneLine(d.Answer, 200))
	}
	if d.Error != "" {
		fmt.Fprintf(stdout, "error    %s\n", strings.TrimPrefix(d.ErrorCode+": "+d.Error, ": "))
	}
	if len(d.Children) > 0 {
		fmt.Fprintf(stdout, "children %s\n", strings.Join(d.Children, ", "))
	}
	fmt.Fprintf(stdout, "\nconversation (%d messages):\n", len(d.Messages))
	for _, m := range d.Messages {
		text := m.Content
		if len(m.ToolCalls) > 0 {
			text = strings.TrimSpace(text + " calls " + string(m.ToolCalls))
		}
		label := m.Role
		if m.Name != "" {
			label += " " + m.Name
		}
		fmt.Fprintf(stdout, "  %3d %-16s %s\n", m.Seq, label, output.OneLine(text, 160))
	}
	unread := 0
	for _, m := range d.Mailbox {
		if m.Read.IsZero() {
			unread++
		}
	}
	fmt.Fprintf(stdout, "\nmailbox: %d received, %d unread\n", len(d.Mailbox), unread)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
