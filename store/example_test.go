package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// A SQLite store in a directory of its own: a role created, events of a
// call written through the store's one writer, and read back by filter.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.Open(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	r, err := s.CreateRole(ctx, store.Role{Name: "writer", Description: "Keeps the notes.", ToolGroups: []string{"notes"},
		Rules: []rules.Rule{{Name: "no-drafts", Tools: []string{"delete_note"}, When: `args.title.startsWith("draft")`, Action: rules.Deny}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = s.CreateRole(ctx, store.Role{Name: "writer"})
	fmt.Println(err, errors.Is(err, store.ErrExists))
	got, _ := s.Role(ctx, "writer")
	fmt.Println(got.ID == r.ID, got.Name, got.ToolGroups, got.Rules[0].Name, got.Source)

	w := s.NewEventWriter(nil)
	w.Emit(store.Event{Type: store.EventCallStarted, CallID: "c1", AgentID: "a1", Role: "writer", Tool: "add_note", Group: "notes"})
	w.Emit(store.Event{Type: store.EventCallCompleted, CallID: "c1", AgentID: "a1", Role: "writer", Tool: "add_note", Group: "notes",
		Payload: map[string]any{"ok": true}})
	w.Emit(store.Event{Type: store.EventCallStarted, CallID: "c2", AgentID: "a2", Role: "writer", Tool: "add_note", Group: "notes"})
	if err := w.Close(); err != nil { // Close writes what is queued
		fmt.Println(err)
		return
	}
	events, err := s.Events(ctx, store.EventFilter{Agent: "a1", Type: "tool_call."})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range events {
		fmt.Println(e.ID, e.Type, e.CallID, e.Tool, e.Payload)
	}
	// Output:
	// store: role "writer": already exists true
	// true writer [notes] no-drafts store
	// 1 tool_call.started c1 add_note map[]
	// 2 tool_call.completed c1 add_note map[ok:true]
}
