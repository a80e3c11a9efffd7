package toolsearch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/toolsearch"
)

// service finds one tool and loads what it is told, recording what it was
// asked.
type service struct {
	agent, query string
	limit        int
	load         []string
	loaded       []string
	err          error
}

func (s *service) FindTools(agentID, query string, limit int) ([]host.ToolMatch, error) {
	s.agent, s.query, s.limit = agentID, query, limit
	return []host.ToolMatch{{Name: "run_command", Group: "command", Description: "Run a command.", Why: "shell → command (synonym): name"}}, s.err
}

func (s *service) LoadTools(_ context.Context, agentID string, names []string) ([]string, error) {
	s.agent, s.load = agentID, names
	return s.loaded, s.err
}

// call calls tool as agent_1 and decodes its structured output into out.
func call(t *testing.T, svc *service, tool, args string, out any) *toolhost.Result {
	t.Helper()
	res, err := toolsearch.Group(svc).Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: toolhost.CallContext{AgentID: "agent_1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK {
		if err := json.Unmarshal([]byte(res.Stdout), out); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func TestFindTools(t *testing.T) {
	for _, tt := range []struct {
		args  string
		limit int    // asked of the service; 0: not asked
		msg   string // the refusal
	}{
		{`{"query": "shell"}`, 5, ""},
		{`{"query": "shell", "limit": 1}`, 1, ""},
		{`{"query": "shell", "limit": 20}`, 20, ""},
		{`{"query": "shell", "limit": 21}`, 0, "field limit: must be from 1 to 20, not 21"},
		{`{"query": "shell", "limit": -1}`, 0, "field limit: must be from 1 to 20, not -1"},
	} {
		svc := &service{}
		var found toolsearch.FoundTools
		res := call(t, svc, "find_tools", tt.args, &found)
		if tt.msg != "" {
			if res.OK || res.Error.Code != toolhost.CodeValidation || res.Error.Message != tt.msg || svc.limit != 0 {
				t.Errorf("%s: %+v, asked for %d; want validation %q", tt.args, res, svc.limit, tt.msg)
			}
			continue
		}
		if !res.OK || svc.agent != "agent_1" || svc.query != "shell" || svc.limit != tt.limit {
			t.Errorf("%s: %+v; the service was asked %q %q %d", tt.args, res, svc.agent, svc.query, svc.limit)
		}
		want := toolsearch.FoundTool{Name: "run_command", Group: "command", Description: "Run a command.", Why: "shell → command (synonym): name"}
		if len(found.Tools) != 1 || found.Tools[0] != want {
			t.Errorf("%s: found %+v", tt.args, found)
		}
	}
	svc := &service{err: toolhost.Errorf(toolhost.CodeValidation, "no deferred groups")}
	if res := call(t, svc, "find_tools", `{"query": "x"}`, nil); res.OK || !strings.Contains(res.Error.Message, "no deferred groups") {
		t.Errorf("the service's error: %+v", res)
	}
}

func TestLoadTools(t *testing.T) {
	var loaded toolsearch.LoadedTools
	svc := &service{loaded: []string{"run_command"}}
	if res := call(t, svc, "load_tools", `{"names": ["run_command", "read_file"]}`, &loaded); !res.OK || svc.agent != "agent_1" ||
		strings.Join(svc.load, " ") != "run_command read_file" || strings.Join(loaded.Loaded, " ") != "run_command" {
		t.Errorf("%+v: loaded %v, asked for %v", res, loaded, svc.load)
	}
	svc = &service{}
	if res := call(t, svc, "load_tools", `{"names": ["read_file"]}`, &loaded); !res.OK || !strings.Contains(res.Stdout, `"loaded": []`) {
		t.Errorf("nothing new loaded: %+v", res)
	}
	svc = &service{}
	if res := call(t, svc, "load_tools", `{"names": []}`, nil); res.OK || res.Error.Message != "field names: name at least one tool" || svc.load != nil {
		t.Errorf("no names: %+v, asked for %v", res, svc.load)
	}
	svc = &service{err: errors.New("store down")}
	if res := call(t, svc, "load_tools", `{"names": ["x"]}`, nil); res.OK {
		t.Errorf("the service's error: %+v", res)
	}
}
