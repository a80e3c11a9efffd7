package org_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/org"
	"github.com/toolhost/toolhost/store"
)

// service knows the role root and records what it was asked to do.
type service struct {
	asked   []string // the methods called that act
	spawnBy toolhost.CallContext
	spawn   []string // role, task, then the artifacts
	created host.RoleSpec
	by      string // Terminate's and Send's caller
}

var root = store.Role{ID: "role_1", Name: "root", Prompt: "You run the place.", Source: "config"}

func (s *service) RoleNamed(name string) (store.Role, error) {
	if name == root.Name {
		return root, nil
	}
	return store.Role{}, store.ErrNotFound
}

func (s *service) Roles() []store.Role { return []store.Role{root, {Name: "worker"}} }

func (s *service) CreateRole(_ context.Context, spec host.RoleSpec) (store.Role, error) {
	s.asked, s.created = append(s.asked, "CreateRole"), spec
	return store.Role{ID: "role_2", Name: spec.Name, Prompt: spec.Prompt, ToolGroups: spec.ToolGroups, Source: "api"}, nil
}

func (s *service) Spawn(_ context.Context, by toolhost.CallContext, role, task string, artifacts []string) (org.Spawned, error) {
	s.asked, s.spawnBy, s.spawn = append(s.asked, "Spawn"), by, append([]string{role, task}, artifacts...)
	return org.Spawned{ID: "agent_2", Role: "worker", Status: store.StatusWaiting}, nil
}

func (s *service) Terminate(_ context.Context, by, target string) ([]string, error) {
	s.asked, s.by = append(s.asked, "Terminate"), by
	return []string{target, "agent_3"}, nil
}

func (s *service) Send(_ context.Context, from, to, _ string) (store.Mail, error) {
	s.asked, s.by = append(s.asked, "Send"), from
	return store.Mail{ID: 7, To: to, From: from}, nil
}

func (s *service) call(t *testing.T, cc toolhost.CallContext, tool, args string) *toolhost.Result {
	t.Helper()
	res, err := org.Group(s).Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: cc})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var (
	admin      = toolhost.CallContext{Credential: store.CredentialAdmin}
	cli        = toolhost.CallContext{Credential: store.CredentialCLI}
	embedder   = toolhost.CallContext{}
	agent      = toolhost.CallContext{AgentID: "agent_1", Role: "root", Credential: "token/root/1", CallID: "call_1"}
	roleToken  = toolhost.CallContext{Role: "root", Credential: "token/root/1"}
	oidcCaller = toolhost.CallContext{Role: "root", Credential: "oidc/alice"}
)

// TestActsForTheCaller: terminate_agent and send_message act for their
// caller, an agent or the operator; a role's credential calling without an
// agent is neither, and is refused before the runtime is asked anything.
func TestActsForTheCaller(t *testing.T) {
	for _, tt := range []struct {
		name string
		cc   toolhost.CallContext
		by   string // the caller the runtime is told of; "-": refused
	}{
		{"admin", admin, ""},
		{"cli", cli, ""},
		{"embedding program", embedder, ""},
		{"agent", agent, "agent_1"},
		{"role token", roleToken, "-"},
		{"access token", oidcCaller, "-"},
	} {
		for _, call := range []struct{ tool, args string }{
			{"terminate_agent", `{"agentId": "agent_9"}`},
			{"send_message", `{"to": "agent_9", "message": "hi"}`},
		} {
			t.Run(tt.name+"/"+call.tool, func(t *testing.T) {
				s := &service{}
				res := s.call(t, tt.cc, call.tool, call.args)
				if tt.by == "-" {
					if res.OK || res.Error.Code != toolhost.CodePolicy || res.Error.Message != call.tool+" acts for its caller, as an agent or as the operator: "+tt.cc.Credential+
						" is not the operator, so call it as an agent of your own (an MCP session or agent key)" || len(s.asked) != 0 {
						t.Errorf("%+v; the runtime was asked %v", res, s.asked)
					}
					return
				}
				if !res.OK || len(s.asked) != 1 || s.by != tt.by {
					t.Errorf("%+v; the runtime was asked %v for %q", res, s.asked, s.by)
				}
			})
		}
	}
	s := &service{}
	if res := s.call(t, agent, "terminate_agent", `{"agentId": "agent_9"}`); res.Stdout != "{\n  \"terminated\": [\n    \"agent_9\",\n    \"agent_3\"\n  ]\n}" {
		t.Errorf("terminate_agent: %q", res.Stdout)
	}
	if res := s.call(t, agent, "send_message", `{"to": "agent_9", "message": "hi"}`); res.Stdout != "{\n  \"id\": 7,\n  \"sent\": true,\n  \"to\": \"agent_9\"\n}" {
		t.Errorf("send_message: %q", res.Stdout)
	}
	s = &service{}
	if res := s.call(t, agent, "send_message", `{"to": "agent_1", "message": "hi"}`); res.OK || res.Error.Message != "field to: an agent cannot send a message to itself" || len(s.asked) != 0 {
		t.Errorf("a message to oneself: %+v; the runtime was asked %v", res, s.asked)
	}
}

// TestSpawnIsTheCallers: spawn_agent and spawn_agent_with_task pass the
// whole call context on, so that the runtime makes the agent the caller's
// child and its credential's.
func TestSpawnIsTheCallers(t *testing.T) {
	s := &service{}
	res := s.call(t, agent, "spawn_agent_with_task", `{"roleId": "worker", "task": "do it", "artifacts": ["a1", "a2"]}`)
	if !res.OK || res.Stdout != "{\n  \"agentId\": \"agent_2\",\n  \"role\": \"worker\",\n  \"status\": \"waiting\"\n}" {
		t.Errorf("spawn_agent_with_task: %+v", res)
	}
	if s.spawnBy != agent || strings.Join(s.spawn, " ") != "worker do it a1 a2" {
		t.Errorf("the runtime was asked to spawn %v for %+v", s.spawn, s.spawnBy)
	}
	s = &service{}
	if res := s.call(t, roleToken, "spawn_agent", `{"roleId": "role_1"}`); !res.OK || s.spawnBy != roleToken || strings.Join(s.spawn, "|") != "role_1|" {
		t.Errorf("spawn_agent: %+v; the runtime was asked to spawn %q for %+v", res, s.spawn, s.spawnBy)
	}
	s = &service{}
	if res := s.call(t, agent, "spawn_agent_with_task", `{"roleId": "worker", "task": " \n"}`); res.OK || res.Error.Message != "field task: must not be empty" || len(s.asked) != 0 {
		t.Errorf("an empty task: %+v; the runtime was asked %v", res, s.asked)
	}
}

func TestRoles(t *testing.T) {
	s := &service{}
	if res := s.call(t, agent, "find_role_by_name", `{"name": "root"}`); !res.OK ||
		res.Stdout != "{\n  \"id\": \"role_1\",\n  \"name\": \"root\",\n  \"rolePrompt\": \"You run the place.\",\n  \"toolGroups\": [],\n  \"source\": \"config\"\n}" {
		t.Errorf("find root: %+v", res)
	}
	if res := s.call(t, agent, "find_role_by_name", `{"name": "ghost"}`); res.OK || res.Error.Code != toolhost.CodeValidation ||
		res.Error.Message != `no role named "ghost"; the roles are: root, worker` {
		t.Errorf("find ghost: %+v", res)
	}
	for _, tt := range []struct {
		cc toolhost.CallContext
		by string
	}{{agent, "agent_1"}, {roleToken, "token/root/1"}, {embedder, "operator"}} {
		s := &service{}
		res := s.call(t, tt.cc, "create_role", `{"name": "writer", "rolePrompt": "You write.", "toolGroups": ["workspace"]}`)
		if !res.OK || !strings.Contains(res.Stdout, `"toolGroups": [`) || s.created.CreatedBy != tt.by ||
			s.created.Name != "writer" || s.created.Prompt != "You write." || strings.Join(s.created.ToolGroups, ",") != "workspace" {
			t.Errorf("create_role as %+v: %+v, asked %+v", tt.cc, res, s.created)
		}
	}
}
