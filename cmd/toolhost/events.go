package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

// eventsUsage is `toolhost events`.
var eventsUsage = &usage{
	name:    "events",
	summary: "print the recorded audit events, without starting any module",
	details: "-follow keeps printing new events until interrupted; -tree prints an agent's event tree instead.",
	example: "toolhost events -tool run_command -since 10m",
}

// eventsCmd prints recorded events from the data directory's store, without
// starting any plugin; -follow keeps printing new ones until interrupted.
func eventsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(eventsUsage, stdout, stderr, "warn")
	tool := fs.String("tool", "", "only calls of this tool")
	agent := fs.String("agent", "", "only events of this agent")
	callID := fs.String("call", "", "only events of this call id")
	typ := fs.String("type", "", `only this type, or a prefix such as "tool_call."`)
	since := fs.String("since", "", "only events since: a duration back from now (10m) or an RFC 3339 time")
	limit := fs.Int("limit", 100, "at most this many of the most recent events")
	asJSON := fs.Bool("json", false, "print one JSON object a line")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	tree := fs.String("tree", "", "print this agent's event tree (agent → turn → tool_call, with the agents it spawned) instead")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	if *tree != "" {
		ctx := context.Background()
		return withStore(ctx, cfg, stderr, func(st *store.Store) error { return writeTree(ctx, st, *tree, stdout) })
	}
	f := store.EventFilter{Tool: *tool, Agent: *agent, Call: *callID, Type: *typ, Limit: *limit}
	if *since != "" {
		t, err := server.ParseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 2
		}
		f.Since = t
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return printEvents(ctx, cfg, f, *asJSON, *follow, stdout, stderr)
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
		f.Limit = 0
		err = st.Follow(ctx, f, 250*time.Millisecond, show)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return 0
}

func printEvent(w io.Writer, e store.Event, asJSON bool) {
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
