package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// Request bodies are capped: roles are small, calls may carry file contents.
const (
	maxRoleBody = 1 << 20
	maxCallBody = 16 << 20
)

// apiRole is a role as the API shows it: the stored role, whether it may
// be edited and, if not, why and how to change it.
type apiRole struct {
	store.Role
	ReadOnly       bool   `json:"readOnly"`
	ReadOnlyReason string `json:"readOnlyReason,omitempty"`
	// BuiltIn marks the root role, which the store makes at first start and
	// nobody edits.
	BuiltIn bool `json:"builtIn,omitempty"`
	// DeclaredIn is where this host's config file declares the role (see
	// [host.Host.RoleDeclaredAt]); none for a role made at run time.
	DeclaredIn *host.RoleDeclaration `json:"declaredIn,omitempty"`
	// CodeDefaults are the script bounds the role gets where its own Code
	// says nothing (see [rules.CodeBounds.Over]).
	CodeDefaults codeDefaults `json:"codeDefaults"`
}

// codeDefaults are where a role's script bounds come from when it does
// not say them: the config's top-level code block (only what it says),
// and, under it, [rules.DefaultCodeBounds].
type codeDefaults struct {
	Config  rules.CodeBounds `json:"config"`
	BuiltIn rules.CodeBounds `json:"builtIn"`
}

func (s *Server) roleJSON(r store.Role) apiRole {
	ro, why := s.h.Roles().ReadOnly(r)
	out := apiRole{Role: r, ReadOnly: ro, ReadOnlyReason: why, BuiltIn: r.ID == store.RootRoleID,
		CodeDefaults: codeDefaults{Config: s.h.Config().Code, BuiltIn: rules.DefaultCodeBounds()}}
	if d, ok := s.h.Roles().Declared(r.Name); ok && r.Source == store.SourceConfig {
		out.DeclaredIn = &d
	}
	return out
}

func (s *Server) routesAPI() {
	s.mux.HandleFunc("GET /api/roles", s.listRoles)
	s.mux.HandleFunc("POST /api/roles", s.createRole)
	s.roleRoute("GET /api/roles/{name}", s.getRole)
	s.mux.HandleFunc("PUT /api/roles/{name}", s.updateRole)
	s.mux.HandleFunc("DELETE /api/roles/{name}", s.deleteRole)
	s.roleRoute("GET /api/roles/{name}/tools", s.roleTools)
	s.roleRoute("POST /api/call", s.call)
	s.mux.HandleFunc("GET /api/diagnostics", s.diagnostics)
}

func (s *Server) listRoles(w http.ResponseWriter, _ *http.Request) {
	roles := s.h.Roles().List()
	out := make([]apiRole, len(roles))
	for i, r := range roles {
		out[i] = s.roleJSON(r)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createRole(w http.ResponseWriter, r *http.Request) {
	var spec host.RoleSpec
	if !decode(w, r, maxRoleBody, &spec) {
		return
	}
	spec.CreatedBy = "api"
	role, err := s.h.Roles().Create(r.Context(), spec)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusCreated, s.roleJSON(role))
}

// roleRoute serves a route that a token of the role it names may reach; its
// handler checks the role (see openRole).
func (s *Server) roleRoute(pattern string, handler http.HandlerFunc) {
	s.roleRoutes[pattern] = true
	s.mux.HandleFunc(pattern, handler)
}

// openRole returns the role named by name or id, answering itself when there
// is none (404 to the admin, 403 to a role token, which may not learn which
// roles exist) or when the request's token is for another role (403 policy).
func (s *Server) openRole(w http.ResponseWriter, r *http.Request, name string) (store.Role, bool) {
	p := principalOf(r)
	role, err := s.h.Roles().Get(name)
	switch {
	case err != nil && p.admin:
		writeError(w, statusOf(err), err)
	case err != nil || !p.opens(role.ID):
		writeError(w, http.StatusForbidden, p.refusal(r.Method+" "+r.URL.Path))
	default:
		return role, true
	}
	return store.Role{}, false
}

func (s *Server) getRole(w http.ResponseWriter, r *http.Request) {
	role, ok := s.openRole(w, r, r.PathValue("name"))
	if ok {
		writeJSON(w, http.StatusOK, s.roleJSON(role))
	}
}

// updateRole applies the fields present in the body: "toolGroups": null
// clears the groups (every group is then available), "deferredGroups": null
// or [] defers none, "readOnlyTools": true keeps only the role's read-only
// tools (null or false: all), "rules" and "limits" replace the role's
// (null or []: none), "code" replaces its code bounds (null or {}: the
// config's), an absent field is left as it is.
func (s *Server) updateRole(w http.ResponseWriter, r *http.Request) {
	var fields map[string]json.RawMessage
	if !decode(w, r, maxRoleBody, &fields) {
		return
	}
	var u host.RoleUpdate
	for name, raw := range fields {
		var err error
		switch name {
		case "description":
			u.Description, err = field[string](raw)
		case "prompt":
			u.Prompt, err = field[string](raw)
		case "toolGroups":
			u.ToolGroups, err = field[[]string](raw)
		case "deferredGroups":
			u.DeferredGroups, err = field[[]string](raw)
		case "allow":
			u.Allow, err = field[[]string](raw)
		case "deny":
			u.Deny, err = field[[]string](raw)
		case "readOnlyTools":
			u.ReadOnlyTools, err = field[bool](raw)
		case "rules":
			u.Rules, err = field[[]rules.Rule](raw)
		case "limits":
			u.Limits, err = field[[]rules.Limit](raw)
		case "code":
			u.Code, err = field[rules.CodeBounds](raw)
		default:
			err = errors.New("not a field that can be changed (description, prompt, toolGroups, deferredGroups, allow, deny, readOnlyTools, rules, limits, code)")
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "%s: %v", name, err))
			return
		}
	}
	role, err := s.h.Roles().Update(r.Context(), r.PathValue("name"), u)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, s.roleJSON(role))
}

// field decodes one field of an update.
func field[T any](raw json.RawMessage) (*T, error) {
	v := new(T)
	return v, json.Unmarshal(raw, v)
}

func (s *Server) deleteRole(w http.ResponseWriter, r *http.Request) {
	if err := s.h.Roles().Delete(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) roleTools(w http.ResponseWriter, r *http.Request) {
	role, ok := s.openRole(w, r, r.PathValue("name"))
	if !ok {
		return
	}
	tools, err := s.h.Tools(host.ToolQuery{Role: role.Name, Tokens: true})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, tools)
}

// CallBody is the body of POST /api/call.
type CallBody struct {
	Role      string          `json:"role"`
	AgentID   string          `json:"agentId,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	CallID    string          `json:"callId,omitempty"`
}

// call runs one tool through the host and answers with the result envelope
// (200, whether the tool succeeded or not), or with an error when the call
// could not be carried out.
func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	var body CallBody
	if !decode(w, r, maxCallBody, &body) {
		return
	}
	if body.Tool == "" {
		writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "tool: required"))
		return
	}
	p := principalOf(r)
	if !p.admin {
		if err := s.callerOf(r, p, body); err != nil {
			writeError(w, http.StatusForbidden, err)
			return
		}
	}
	if len(body.Arguments) == 0 {
		body.Arguments = json.RawMessage("{}")
	}
	res, err := s.h.Call(r.Context(), &toolhost.CallRequest{Tool: body.Tool, Arguments: body.Arguments,
		Context: toolhost.CallContext{CallID: body.CallID, Role: body.Role, AgentID: body.AgentID, Channel: "http",
			Principal: p.subject(), Credential: p.credential()}})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// callerOf checks that p, which is not the admin, may make a call as its
// caller: its agent, which must be of a role p opens and p's own (an agent
// belongs to the credential that made it), else its role, which p must
// open. A call with neither runs with every group: never a role token's.
func (s *Server) callerOf(r *http.Request, p principal, body CallBody) error {
	switch {
	case body.AgentID != "":
		a, err := s.h.Store().Agent(r.Context(), body.AgentID)
		if err != nil || !p.opens(a.RoleID) || body.Role != "" && !s.roleIs(body.Role, a.RoleID) {
			return p.refusal("a call as " + callerName(body))
		}
		if a.Credential != p.credential() {
			return toolhost.Errorf(toolhost.CodePolicy,
				"a call as agent %q: refused: the agent belongs to the credential that made it, and %s is not that credential (make calls as an agent of your own: an MCP session or agent key makes one)",
				body.AgentID, p.credential())
		}
		return nil
	case body.Role != "":
		if role, err := s.h.Roles().Get(body.Role); err == nil && p.opens(role.ID) {
			return nil
		}
	}
	return p.refusal("a call as " + callerName(body))
}

// roleIs reports whether the role named (or with the id) name has the id.
func (s *Server) roleIs(name, id string) bool {
	role, err := s.h.Roles().Get(name)
	return err == nil && role.ID == id
}

// callerName names a call's caller for a refusal.
func callerName(body CallBody) string {
	switch {
	case body.AgentID != "":
		return "agent " + strconv.Quote(body.AgentID)
	case body.Role != "":
		return "role " + strconv.Quote(body.Role)
	}
	return "the operator (no role or agentId: every group)"
}

func (s *Server) diagnostics(w http.ResponseWriter, _ *http.Request) {
	d := s.h.Modules().Diagnostics()
	if d == nil {
		d = []host.Diagnostic{}
	}
	writeJSON(w, http.StatusOK, d)
}

// decode reads a JSON body of at most limit bytes into v, strictly: an
// unknown field, a value of the wrong type or anything after the value is a
// 400 validation error naming it (a slip such as "agent" for "agentId" must
// not be dropped silently), a body over the limit 413.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON value")
	}
	if err == nil {
		return true
	}
	status := http.StatusBadRequest
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		status = http.StatusRequestEntityTooLarge
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		err = fmt.Errorf("field %q: a JSON %s cannot be a %s", te.Field, te.Value, te.Type)
	}
	writeError(w, status, toolhost.Errorf(toolhost.CodeValidation, "request body: %s", strings.TrimPrefix(err.Error(), "json: ")))
	return false
}

// statusOf maps an error's code to an HTTP status.
func statusOf(err error) int {
	switch toolhost.CodeOf(err) {
	case toolhost.CodeValidation:
		if errors.Is(err, store.ErrNotFound) {
			return http.StatusNotFound
		}
		return http.StatusBadRequest
	case toolhost.CodeUnknownTool:
		return http.StatusNotFound
	case toolhost.CodeToolNotAvailable, toolhost.CodePolicy, toolhost.CodeApprovalDenied:
		return http.StatusForbidden
	case toolhost.CodeRateLimited:
		return http.StatusTooManyRequests
	case toolhost.CodeTimeout:
		return http.StatusGatewayTimeout
	case toolhost.CodeCancelled:
		return 499 // client closed request
	case toolhost.CodePluginExited:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}
