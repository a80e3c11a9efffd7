package main

import (
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// TestNotes runs the same checks in-process and against the built binary.
func TestNotes(t *testing.T) {
	for _, mode := range []string{"in-process", "subprocess"} {
		t.Run(mode, func(t *testing.T) {
			opts := &sdktest.Options{Config: map[string]any{"max_notes": 2}}
			var p *sdktest.Plugin
			if mode == "in-process" {
				p = sdktest.New(t, newGroup(), opts)
			} else {
				p = sdktest.Exec(t, sdktest.Build(t, "."), opts)
				if p.Pid() == 0 {
					t.Fatal("subprocess plugin has no pid")
				}
			}
			if p.Spec.ID != "notes" || len(p.Spec.Tools) != 3 {
				t.Fatalf("spec = %+v", p.Spec)
			}
			sdktest.OK(t, p.Call("add_note", AddArgs{Title: "groceries", Body: "milk, eggs"}))
			sdktest.OK(t, p.Call("add_note", AddArgs{Title: "todo", Body: "buy milk"}))
			if got := sdktest.OK(t, p.Call("get_note", GetArgs{Title: "groceries"})); got != "milk, eggs" {
				t.Errorf("get_note = %q", got)
			}
			if got := sdktest.OK(t, p.Call("search_notes", SearchArgs{Query: "MILK"})); got != "groceries\ntodo" {
				t.Errorf("search_notes = %q", got)
			}
			sdktest.Fails(t, p.Call("add_note", AddArgs{Title: "third", Body: "x"}), sdk.CodePolicy)
			sdktest.Fails(t, p.Call("get_note", GetArgs{Title: "nope"}), sdk.CodeToolExec)
			msg := sdktest.Fails(t, p.Call("get_note", map[string]any{"titel": "x"}), sdk.CodeValidation)
			t.Logf("validation message: %s", msg)
		})
	}
}
