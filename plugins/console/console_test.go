package console_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/plugins/console"
	"github.com/toolhost/toolhost/store"
)

// service is a console in memory and the events emitted.
type service struct {
	out    io.Writer
	events []store.Event
}

func (s *service) Console() io.Writer     { return s.out }
func (s *service) Emit(e store.Event)     { s.events = append(s.events, e) }
func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

type failing struct{}

func TestConsolePrint(t *testing.T) {
	for _, tt := range []struct {
		name string
		cc   toolhost.CallContext
		line string
	}{
		{"operator", toolhost.CallContext{}, "[operator] hello\n"},
		{"agent", toolhost.CallContext{AgentID: "agent_1", Role: "writer", CallID: "call_1"}, "[agent_1] hello\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			svc := &service{out: &out}
			res, err := console.Group(svc).Call(context.Background(), &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text": "hello\n"}`), Context: tt.cc})
			if err != nil || !res.OK || res.Stdout != "printed" {
				t.Fatalf("%+v %v", res, err)
			}
			if out.String() != tt.line {
				t.Errorf("console: %q, want %q", out.String(), tt.line)
			}
			if ev := svc.events; len(ev) != 1 || ev[0].Type != console.EventPrint || ev[0].Payload["text"] != "hello\n" ||
				ev[0].AgentID != tt.cc.AgentID || ev[0].Role != tt.cc.Role || ev[0].ParentID != tt.cc.CallID {
				t.Errorf("events: %+v", ev)
			}
		})
	}
	svc := &service{out: failing{}}
	res, err := console.Group(svc).Call(context.Background(), &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text": "x"}`)})
	if err != nil || res.OK || res.Error.Code != toolhost.CodeToolExec || len(svc.events) != 0 {
		t.Errorf("a console that fails: %+v %v, events %+v", res, err, svc.events)
	}
}
