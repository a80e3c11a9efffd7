// Package console is the console group: console_print writes a line for the
// operator on the host's console and records it as an event. It runs
// in-process, registered by the agent runtime
// ([github.com/toolhost/toolhost/agents]) under its reserved id.
package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// EventPrint is the type of the event console_print records.
const EventPrint = "console.print"

// Service is what the console group needs from the agent runtime.
type Service interface {
	// Console is where console_print writes its lines.
	Console() io.Writer
	// Emit records an event.
	Emit(e store.Event)
}

type printArgs struct {
	Text string `json:"text" jsonschema:"the text to print"`
}

// Group returns the console group: a line on svc's console and an
// [EventPrint] event per print, the lines of concurrent calls kept whole.
func Group(svc Service) *sdk.Group {
	var mu sync.Mutex
	return &sdk.Group{ID: "console", Description: "The host's console: print text for the operator.", Tools: []sdk.Tool{
		sdk.NewTool("console_print", "Print text on the host's console (and record it in the event log).",
			func(_ context.Context, r *sdk.Request[printArgs]) (*sdk.Result, error) {
				who := r.Call.AgentID
				if who == "" {
					who = "operator"
				}
				mu.Lock()
				_, err := fmt.Fprintf(svc.Console(), "[%s] %s\n", who, strings.TrimRight(r.Args.Text, "\n"))
				mu.Unlock()
				if err != nil {
					return nil, sdk.Errorf(toolhost.CodeToolExec, "console: %v", err)
				}
				svc.Emit(store.Event{Type: EventPrint, AgentID: r.Call.AgentID, Role: r.Call.Role, ParentID: r.Call.CallID,
					Payload: map[string]any{"text": r.Args.Text}})
				return sdk.Text("printed"), nil
			}, sdk.Title("Print to console"), sdk.Additive()),
	}}
}
