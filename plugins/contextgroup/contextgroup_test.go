package contextgroup_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/plugins/contextgroup"
)

// service answers with what it was given, recording what it was asked.
type service struct {
	status contextgroup.Status
	done   contextgroup.Compression
	err    error
	agent  string
	keep   int
}

func (s *service) Status(agentID string) (contextgroup.Status, error) {
	s.agent = agentID
	return s.status, s.err
}

func (s *service) Compress(_ context.Context, agentID string, keep int) (contextgroup.Compression, error) {
	s.agent, s.keep = agentID, keep
	return s.done, s.err
}

func call(t *testing.T, svc *service, tool, args string) *toolhost.Result {
	t.Helper()
	res, err := contextgroup.Group(svc).Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: toolhost.CallContext{AgentID: "agent_1"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGetContextStatus(t *testing.T) {
	want := contextgroup.Status{Messages: 3, Tokens: 120, Budget: 1000, Percent: 12, Turns: 2, TotalTokens: 400}
	svc := &service{status: want}
	res := call(t, svc, "get_context_status", `{}`)
	var got contextgroup.Status
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil || got != want || svc.agent != "agent_1" {
		t.Errorf("%+v (%v): %+v for %q", res, err, got, svc.agent)
	}
	svc = &service{err: toolhost.Errorf(toolhost.CodeValidation, "agent agent_1 is not run by this runtime")}
	if res := call(t, svc, "get_context_status", `{}`); res.OK || res.Error.Code != toolhost.CodeValidation {
		t.Errorf("the service's error: %+v", res)
	}
}

func TestCompressContext(t *testing.T) {
	for _, tt := range []struct {
		name, args string
		done       contextgroup.Compression
		keep       int
		out        string
	}{
		{"too few", `{}`, contextgroup.Compression{Messages: 4, Kept: 6}, 0, "nothing to compress: 4 messages, the last 6 are kept"},
		{"compressed", `{"keep": 3}`, contextgroup.Compression{Summarised: 8, Removed: 7, Messages: 6, Kept: 3, Summary: "8 messages summarised"}, 3,
			"{\n  \"messages\": 6,\n  \"removed\": 7,\n  \"summarised\": 8,\n  \"summary\": \"8 messages summarised\"\n}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &service{done: tt.done}
			if res := call(t, svc, "compress_context", tt.args); !res.OK || res.Stdout != tt.out || svc.keep != tt.keep || svc.agent != "agent_1" {
				t.Errorf("%+v: asked to keep %d for %q; want %q", res, svc.keep, svc.agent, tt.out)
			}
		})
	}
	svc := &service{err: toolhost.Errorf(toolhost.CodeToolExec, "the model returned an empty summary")}
	if res := call(t, svc, "compress_context", `{}`); res.OK || res.Error.Code != toolhost.CodeToolExec {
		t.Errorf("the service's error: %+v", res)
	}
}
