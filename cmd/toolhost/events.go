package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

// eventsUsage is `toolhost events`.
var eventsUsage = &usage{
	name:    "events",
	summary: "print the recorded audit events, without starting any module",
	details: "-follow keeps printing new events until interrupted; -export writes every matching event as JSON lines; -story tells one call; -tree prints an agent's event tree.",
	example: "toolhost events -role researcher -outcome denied -since 24h",
}

// eventFlags are the flags of `toolhost events` that are GET /api/events'
// query parameters, read by the same parser (server.ParseEventFilter).
var eventFlags = []struct{ name, usage string }{
	{"tool", "only calls of this `tool`"},
	{"agent", "only events of this `agent` id"},
	{"call", "only events of this call `id`"},
	{"role", "only events of this `role`"},
	{"credential", "only events of calls made with this `credential` as events name it (admin, token/NAME/ID, oidc/SUBJECT)"},
	{"type", "only this event `type`, or a prefix such as \"tool_call.\""},
	{"outcome", "only calls' terminal events that ended so (the `outcome`): ok, failed, failed:CODE, denied, approved, rate_limited"},
	{"since", "only events since a `time`: a duration back from now (10m) or an RFC 3339 time"},
	{"until", "only events before a `time`: a duration back from now (10m) or an RFC 3339 time"},
	{"after", "only events after this event `id`"},
	{"before", "only events before this event `id` (the next page back: the first id printed)"},
	{"limit", "at most `n` of the most recent events, 1 to 1000 (default 100)"},
}

// eventsCmd prints recorded events from the data directory's store, without
// starting any plugin; -follow keeps printing new ones until interrupted,
// -export writes every matching event as JSON lines, -story tells one call.
func eventsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(eventsUsage, stdout, stderr, "warn")
	q := url.Values{}
	for _, f := range eventFlags {
		fs.Var(queryFlag{q, f.name}, f.name, f.usage)
	}
	asJSON := fs.Bool("json", false, "print one JSON object a line")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	export := fs.String("export", "", "write every matching event (no limit), oldest first, as JSON lines to this file (- for stdout)")
	story := fs.String("story", "", "tell this call id's story: caller, arguments, verdicts, approval, outcome, parent and children")
	tree := fs.String("tree", "", "print this agent's event tree (agent → turn → tool_call, with the agents it spawned) instead")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *export != "" && (*follow || q.Has("limit")) {
		return fs.fail("-export writes every matching event: without -follow or -limit")
	}
	if *export == "" && !q.Has("limit") {
		q.Set("limit", "100")
	}
	f, err := server.ParseEventFilter(q, time.Now())
	if err != nil {
		return fs.fail("%v", err)
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch {
	case *tree != "":
		return withStore(ctx, cfg, stderr, func(st *store.Store) error { return writeTree(ctx, st, *tree, stdout) })
	case *story != "":
		return withStore(ctx, cfg, stderr, func(st *store.Store) error { return writeStory(ctx, st, *story, *asJSON, stdout) })
	case *export != "":
		return withStore(ctx, cfg, stderr, func(st *store.Store) error { return exportEvents(ctx, st, f, *export, stdout) })
	}
	return printEvents(ctx, cfg, f, *asJSON, *follow, stdout, stderr)
}

// queryFlag is a filter flag of `toolhost events`: each use adds its value
// to the query, so that server.ParseEventFilter refuses a repeated or empty
// one as GET /api/events does.
type queryFlag struct {
	q    url.Values
	name string
}

// String is the flag's value, for flag's help.
func (f queryFlag) String() string {
	if f.q == nil {
		return ""
	}
	return f.q.Get(f.name)
}

// Set adds a use of the flag to the query.
func (f queryFlag) Set(v string) error {
	f.q.Add(f.name, v)
	return nil
}

// exportEvents writes every event matching f to the file path (- for
// stdout) as JSON lines, as GET /api/events?format=jsonl does.
func exportEvents(ctx context.Context, st *store.Store, f store.EventFilter, path string, stdout io.Writer) error {
	write := func(w io.Writer) error {
		return st.EachEvent(ctx, f, func(events []store.Event) error { return server.WriteJSONLines(w, events) })
	}
	if path == "-" {
		return write(stdout)
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // the audit trail: its owner only
	if err != nil {
		return err
	}
	err = write(file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

func printEvents(ctx context.Context, cfg *config.Config, f store.EventFilter, asJSON, follow bool, stdout, stderr io.Writer) int {
	st, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	defer st.Close()
	show := func(events []store.Event) error {
		for _, e := range events {
			printEvent(stdout, e, asJSON)
			f.AfterID = e.ID
		}
		return nil
	}
	events, err := st.Events(ctx, f)
	if err == nil {
		err = show(events)
	}
	if err == nil && follow {
		f.Limit, f.BeforeID = 0, 0
		err = st.Follow(ctx, f, 250*time.Millisecond, show)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return 0
}

// printEvent prints an event, readable ([store.Event.Readable]): as one
// JSON object, or as one line of text.
func printEvent(w io.Writer, e store.Event, asJSON bool) {
	e = e.Readable()
	if asJSON {
		b, _ := json.Marshal(e)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%d %s %-19s", e.ID, e.Time.Local().Format("15:04:05.000"), e.Type)
	for _, kv := range [][2]string{{"call", e.CallID}, {"tool", e.Tool}, {"group", e.Group}, {"agent", e.AgentID}, {"role", e.Role}} {
		if kv[1] != "" {
			fmt.Fprintf(w, " %s=%s", kv[0], kv[1])
		}
	}
	if e.Payload["replayed"] == true {
		fmt.Fprintf(w, " REPLAY of %v, nothing ran:", e.Payload["replay_of"])
	}
	if len(e.Payload) > 0 {
		b, _ := json.Marshal(e.Payload)
		fmt.Fprintf(w, " %s", b)
	}
	fmt.Fprintln(w)
}

// writeStory prints the story of the call id ([store.Store.CallStory]):
// as one JSON object, or as lines of text followed by its events.
func writeStory(ctx context.Context, st *store.Store, id string, asJSON bool, w io.Writer) error {
	s, err := st.CallStory(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := jsondepth.MarshalIndent(s)
		fmt.Fprintln(w, string(b))
		return err
	}
	line := func(label string, v any) {
		if b, _ := json.Marshal(v); v != nil && v != "" && string(b) != "null" {
			if text, ok := v.(string); ok {
				b = []byte(text)
			}
			fmt.Fprintf(w, "%-11s %s\n", label+":", b)
		}
	}
	line("call", s.CallID)
	line("tool", strings.TrimSuffix(s.Tool+" (group "+s.Group+")", " (group )"))
	line("caller", strings.Join(nonEmpty("agent", s.AgentID, "role", s.Role, "credential", s.Credential, "principal", s.Principal, "channel", s.Channel), " "))
	line("arguments", s.Arguments)
	line("rule", strings.TrimSpace(s.Rule+" "+s.RuleAction))
	line("limits", s.Limits)
	line("approval", s.Approval)
	outcome := s.Outcome
	if s.Code != "" {
		outcome += " (" + s.Code + "): " + s.Error
	}
	line("outcome", outcome)
	if s.Started != nil {
		line("started", s.Started.Local().Format(time.RFC3339Nano))
	}
	if s.LatencyMs != nil {
		line("took", fmt.Sprintf("%.3f ms", *s.LatencyMs))
	}
	if s.Replays > 0 {
		line("replays", s.Replays)
	}
	line("result", s.Result)
	line("parent", s.ParentCall)
	if len(s.Children) > 0 {
		fmt.Fprintln(w, "children:")
	}
	for _, e := range s.Children {
		printEvent(w, e, false)
	}
	fmt.Fprintln(w, "events:")
	for _, e := range s.Events {
		printEvent(w, e, false)
	}
	return nil
}

// nonEmpty returns "key=value" for each pair of kv whose value is set.
func nonEmpty(kv ...string) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out = append(out, kv[i]+"="+kv[i+1])
		}
	}
	return out
}
