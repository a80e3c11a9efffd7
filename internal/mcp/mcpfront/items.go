package mcpfront

// The prompts, resources and resource templates of a role's groups
// (host.ToolList), offered on the role's server as the SDK's own items, so
// that the SDK lists them, page by page, announces their changes, answers
// an unknown prompt or URI with its protocol error (-32602), and keeps
// each session's resource subscriptions. Their handlers, and those of
// completion/complete and resources/(un)subscribe, call through
// host.Host.Call as the request's agent, so the pipeline (the role check,
// validation, rules, limits, approvals, redaction, events) applies as to a
// tool call. A role whose groups offer no prompts has no prompts methods
// (-32601, and no capability in initialize and server/discover), and so
// for resources, completions and subscriptions.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/yosida95/uritemplate/v3"
)

// maxSubscriptions bounds the resources one agent subscribes to at once.
const maxSubscriptions = 256

// roleItems are the items the role's server offers, as last synced.
type roleItems struct {
	prompts     map[string]toolhost.PromptSpec
	resources   map[string]toolhost.ResourceSpec
	templates   map[string]toolhost.ResourceTemplateSpec
	completions bool
	subscribe   bool
}

// syncItems makes the server's items the role's list's: it adds new and
// changed ones and removes gone ones; the SDK then sends the list_changed
// notifications. r.mu is held.
func (r *mcpRole) syncItems(list host.ToolList) {
	it := &r.items
	if it.prompts == nil {
		it.prompts, it.resources, it.templates = map[string]toolhost.PromptSpec{}, map[string]toolhost.ResourceSpec{}, map[string]toolhost.ResourceTemplateSpec{}
	}
	syncSet(it.prompts, list.Prompts, func(p toolhost.PromptSpec) string { return p.Name },
		func(p toolhost.PromptSpec) { r.srv.AddPrompt(mcpPrompt(p), r.getPrompt) }, r.srv.RemovePrompts)
	syncSet(it.resources, list.Resources, func(x toolhost.ResourceSpec) string { return x.URI },
		func(x toolhost.ResourceSpec) { r.srv.AddResource(mcpResource(x), r.readResource) }, r.srv.RemoveResources)
	syncSet(it.templates, list.ResourceTemplates, func(x toolhost.ResourceTemplateSpec) string { return x.URITemplate },
		func(x toolhost.ResourceTemplateSpec) { r.srv.AddResourceTemplate(mcpTemplate(x), r.readResource) }, r.srv.RemoveResourceTemplates)
	it.completions, it.subscribe = list.Completions, list.Subscribe
}

// syncSet makes have (by key) want's: add is called for each new or
// changed item, remove once with the keys of the gone ones.
func syncSet[T any](have map[string]T, want []T, key func(T) string, add func(T), remove func(...string)) {
	seen := make(map[string]bool, len(want))
	for _, x := range want {
		k := key(x)
		seen[k] = true
		if old, ok := have[k]; !ok || !reflect.DeepEqual(old, x) {
			have[k] = x
			add(x)
		}
	}
	var gone []string
	for k := range have {
		if !seen[k] {
			gone = append(gone, k)
			delete(have, k)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
	}
}

// refuses returns the protocol's "method not found" for a request of an
// item method the role offers nothing for; nil otherwise.
func (r *mcpRole) refuses(method string) error {
	var offered func(it *roleItems) bool
	switch method {
	case "prompts/list", toolhost.MethodPromptsGet:
		offered = func(it *roleItems) bool { return len(it.prompts) > 0 }
	case "resources/list", "resources/templates/list", toolhost.MethodResourcesRead:
		offered = func(it *roleItems) bool { return len(it.resources)+len(it.templates) > 0 }
	case toolhost.MethodComplete:
		offered = func(it *roleItems) bool { return it.completions }
	case toolhost.MethodSubscribe, toolhost.MethodUnsubscribe:
		offered = func(it *roleItems) bool { return it.subscribe }
	default:
		return nil // tools/call and the others: no lock on their way
	}
	r.mu.Lock()
	ok := offered(&r.items)
	r.mu.Unlock()
	if ok {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: role %s offers no %s", r.role, strings.Split(method, "/")[0])}
}

// capabilities makes the capabilities a server states its role's: prompts
// and resources as the SDK states them (it has the role's), completions
// and resource subscriptions only when the role offers them.
func (r *mcpRole) capabilities(caps *mcp.ServerCapabilities) {
	if caps == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.items.completions {
		caps.Completions = nil
	}
	if caps.Resources != nil {
		caps.Resources.Subscribe = r.items.subscribe
	}
}

// offersURI reports whether the role's server offers the resource with
// the URI: one it lists, or one of its templates matches.
func (r *mcpRole) offersURI(uri string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.items.resources[uri]; ok {
		return true
	}
	for _, t := range r.items.templates {
		if templateMatches(t.URITemplate, uri) {
			return true
		}
	}
	return false
}

// templateMatches reports whether uri matches the RFC 6570 template, as
// the SDK matches a read's URI.
func templateMatches(template, uri string) bool {
	t, err := uritemplate.New(template)
	return err == nil && t.Regexp().MatchString(uri)
}

// callItem calls an item method through the pipeline as the request's
// agent (its session's, or its key's); watch, when set, is told of the
// resource's updates (a subscription).
func (r *mcpRole) callItem(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, meta mcp.Meta, method string, args any) (*toolhost.Result, *mcpAgent, error) {
	a, err := r.agent(ctx, ss, extra, meta)
	if err != nil {
		return nil, nil, err
	}
	defer a.done()
	ctx, untrack := a.track(ctx)
	defer untrack()
	if method == toolhost.MethodSubscribe {
		ctx = toolhost.WithResourceWatcher(ctx, r)
	}
	res, err := r.runItem(ctx, a, method, args)
	return res, a, err
}

// runItem calls an item method through the pipeline as agent a.
func (r *mcpRole) runItem(ctx context.Context, a *mcpAgent, method string, args any) (*toolhost.Result, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	res, err := r.h.Call(ctx, &toolhost.CallRequest{Tool: method, Arguments: raw,
		Context: toolhost.CallContext{AgentID: a.agentID, Session: a.session(), Channel: "mcp", Principal: a.principal, Credential: a.cred}})
	if err == nil && !res.OK {
		err = failed(res)
	}
	return res, err
}

// askingItem runs a prompts/get or resources/read rq (of the uri) as
// callItem does, its module's requests going to its client as a
// tools/call's do (approval.go): held for a stateless client that may be
// asked, or resumed by its retry. mapped makes the result the method's.
func (r *mcpRole) askingItem(ctx context.Context, extra *mcp.RequestExtra, rq *roundRequest, args any, uri string, mapped func(*toolhost.Result) (mcp.Result, error)) (mcp.Result, error) {
	a, err := r.agent(ctx, rq.ss, extra, rq.meta)
	if err != nil {
		return nil, rpcError(err, uri)
	}
	defer a.done()
	ctx, untrack := a.track(ctx)
	defer untrack()
	if rq.state != "" {
		res, err := r.resume(ctx, a, rq)
		if err != nil {
			return nil, rpcError(err, uri)
		}
		return res, nil
	}
	return r.callAsking(ctx, a, rq, func(ctx context.Context) (mcp.Result, error) {
		res, err := r.runItem(ctx, a, rq.method, args)
		if err != nil {
			return nil, rpcError(err, uri)
		}
		return mapped(res)
	})
}

// failed is a failed result as the protocol's error: the MCP server's own,
// when it answered with one (toolhost.MetaProtocolError), else a server
// error naming the code.
func failed(res *toolhost.Result) error {
	info := res.Error
	if info == nil {
		info = &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: "failed"}
	}
	if pe, ok := res.Meta[toolhost.MetaProtocolError].(map[string]any); ok {
		e := &jsonrpc.Error{Code: jsonrpcServerError, Message: info.Message}
		switch code := pe["code"].(type) {
		case int64:
			e.Code = code
		case float64:
			e.Code = int64(code)
		}
		if msg, ok := pe["message"].(string); ok {
			e.Message = msg
		}
		if d, ok := pe["data"]; ok && d != nil {
			e.Data, _ = json.Marshal(d)
		}
		return e
	}
	return toolhost.Errorf(info.Code, "%s", info.Message)
}

// rpcError is an item call's error as the protocol's: an item the role
// does not have or arguments that are not valid are invalid params (a
// URI's, the spec's resource-not-found, with the URI in its data); the
// pipeline's other refusals a server error naming their code.
func rpcError(err error, uri string) error {
	if _, ok := err.(*jsonrpc.Error); ok {
		return err
	}
	code := toolhost.CodeOf(err)
	switch {
	case uri != "" && (code == toolhost.CodeUnknownTool || code == toolhost.CodeToolNotAvailable):
		return resourceNotFound(uri)
	case code == toolhost.CodeUnknownTool || code == toolhost.CodeToolNotAvailable || code == toolhost.CodeValidation:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", code, err)}
	}
	data, _ := json.Marshal(map[string]any{"code": code, "retry_after_ms": toolhost.InfoOf(err).RetryAfterMs})
	return &jsonrpc.Error{Code: jsonrpcServerError, Message: fmt.Sprintf("%s: %s", code, err), Data: data}
}

func (r *mcpRole) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args := map[string]any{"name": req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		args["arguments"] = req.Params.Arguments
	}
	rq := roundRequestOf(toolhost.MethodPromptsGet, req, req.Params.InputResponses, req.Params.RequestState)
	res, err := r.askingItem(ctx, req.Extra, rq, args, "", func(res *toolhost.Result) (mcp.Result, error) { return promptOf(res), nil })
	out, _ := res.(*mcp.GetPromptResult)
	return out, err
}

// promptOf is a prompts/get's result as the protocol's.
func promptOf(res *toolhost.Result) *mcp.GetPromptResult {
	out := &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}}
	out.Description, _ = res.Meta[toolhost.MetaDescription].(string)
	for _, c := range res.Content {
		if m := mcpcontent.MCP(c); m != nil {
			out.Messages = append(out.Messages, &mcp.PromptMessage{Role: mcp.Role(c.Role), Content: m})
		}
	}
	return out
}

func (r *mcpRole) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rq := roundRequestOf(toolhost.MethodResourcesRead, req, req.Params.InputResponses, req.Params.RequestState)
	res, err := r.askingItem(ctx, req.Extra, rq, map[string]any{"uri": uri}, uri, func(res *toolhost.Result) (mcp.Result, error) { return readOf(res, uri) })
	out, _ := res.(*mcp.ReadResourceResult)
	return out, err
}

// readOf is a resources/read's result as the protocol's.
func readOf(res *toolhost.Result, uri string) (*mcp.ReadResourceResult, error) {
	out := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}}
	for _, c := range res.Content {
		if rc := c.Resource; c.Type == toolhost.ContentResource && rc != nil {
			out.Contents = append(out.Contents, &mcp.ResourceContents{URI: rc.URI, MIMEType: rc.MimeType, Text: rc.Text, Blob: rc.Blob, Meta: metaOf(rc.Meta)})
		}
	}
	if len(out.Contents) == 0 { // never an empty list: that says "not found" no better than the error
		return nil, resourceNotFound(uri)
	}
	return out, nil
}

// resourceNotFound is the spec's resource-not-found error, the URI in its
// data. The go-sdk's own (mcp.ResourceNotFoundError, which its server
// answers a URI it has no handler for with) writes the URI with Go's %q,
// which is not JSON for a control character such as NUL: the answer
// could not be encoded, and the session was dropped.
func resourceNotFound(uri string) error {
	data, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return err
	}
	return &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "Resource not found", Data: data}
}

func (r *mcpRole) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	args := map[string]any{"ref": req.Params.Ref, "argument": req.Params.Argument}
	if req.Params.Context != nil {
		args["context"] = req.Params.Context
	}
	res, _, err := r.callItem(ctx, req.Session, req.Extra, req.Params.Meta, toolhost.MethodComplete, args)
	if err != nil {
		return nil, rpcError(err, "")
	}
	out := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	if b, err := json.Marshal(res.Meta[toolhost.MetaCompletion]); err == nil {
		_ = json.Unmarshal(b, &out.Completion)
	}
	return out, nil
}

func (r *mcpRole) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	a, err := r.agent(ctx, req.Session, req.Extra, req.Params.Meta)
	if err != nil {
		return err
	}
	a.mu.Lock()
	n := len(a.subs)
	a.mu.Unlock()
	a.done()
	if n >= maxSubscriptions {
		return &jsonrpc.Error{Code: jsonrpcServerError, Message: fmt.Sprintf("%s: an agent subscribes to at most %d resources at once", toolhost.CodeRateLimited, maxSubscriptions)}
	}
	if _, a, err = r.callItem(ctx, req.Session, req.Extra, req.Params.Meta, toolhost.MethodSubscribe, map[string]any{"uri": uri}); err != nil {
		return rpcError(err, uri)
	}
	a.mu.Lock()
	a.subs[uri] = true
	a.mu.Unlock()
	return nil
}

func (r *mcpRole) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	_, a, err := r.callItem(ctx, req.Session, req.Extra, req.Params.Meta, toolhost.MethodUnsubscribe, map[string]any{"uri": uri})
	if a != nil {
		a.mu.Lock()
		delete(a.subs, uri)
		a.mu.Unlock()
	}
	if err != nil {
		return rpcError(err, uri)
	}
	return nil
}

// unsubscribeAll ends the subscriptions of an agent that is ending.
func (r *mcpRole) unsubscribeAll(ctx context.Context, a *mcpAgent) {
	a.mu.Lock()
	uris := a.subs
	a.subs = map[string]bool{}
	a.mu.Unlock()
	for uri := range uris {
		raw, _ := json.Marshal(map[string]string{"uri": uri})
		if _, err := r.h.Call(ctx, &toolhost.CallRequest{Tool: toolhost.MethodUnsubscribe, Arguments: raw,
			Context: toolhost.CallContext{AgentID: a.agentID, Session: a.session(), Channel: "mcp", Principal: a.principal, Credential: a.cred}}); err != nil {
			r.h.Logger().Debug("mcp: an ended agent's subscription not ended upstream", "role", r.role, "uri", uri, "error", err)
		}
	}
}

// ResourceUpdated tells the sessions subscribed to the resource that it
// changed, while the role still offers it: the SDK knows which sessions
// subscribed, each through the pipeline.
func (r *mcpRole) ResourceUpdated(uri string) {
	if !r.offersURI(uri) {
		return
	}
	if err := r.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		r.h.Logger().Debug("mcp: resource update not sent", "role", r.role, "uri", uri, "error", err)
	}
}

// mcpPrompt is the prompt as MCP clients see it.
func mcpPrompt(p toolhost.PromptSpec) *mcp.Prompt {
	out := &mcp.Prompt{Name: p.Name, Title: p.Title, Description: p.Description, Meta: metaOf(p.Meta)}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, &mcp.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
	}
	_ = json.Unmarshal(p.Icons, &out.Icons)
	return out
}

// mcpResource is the resource as MCP clients see it.
func mcpResource(x toolhost.ResourceSpec) *mcp.Resource {
	out := &mcp.Resource{URI: x.URI, Name: x.Name, Title: x.Title, Description: x.Description, MIMEType: x.MimeType, Meta: metaOf(x.Meta)}
	if x.Size != nil {
		out.Size = *x.Size
	}
	if len(x.Annotations) > 0 {
		out.Annotations = &mcp.Annotations{}
		_ = json.Unmarshal(x.Annotations, out.Annotations)
	}
	_ = json.Unmarshal(x.Icons, &out.Icons)
	return out
}

// mcpTemplate is the resource template as MCP clients see it.
func mcpTemplate(x toolhost.ResourceTemplateSpec) *mcp.ResourceTemplate {
	out := &mcp.ResourceTemplate{URITemplate: x.URITemplate, Name: x.Name, Title: x.Title, Description: x.Description, MIMEType: x.MimeType, Meta: metaOf(x.Meta)}
	if len(x.Annotations) > 0 {
		out.Annotations = &mcp.Annotations{}
		_ = json.Unmarshal(x.Annotations, out.Annotations)
	}
	_ = json.Unmarshal(x.Icons, &out.Icons)
	return out
}

// metaOf is a _meta object as the SDK holds it; nil for none.
func metaOf(raw json.RawMessage) mcp.Meta {
	var m mcp.Meta
	_ = json.Unmarshal(raw, &m)
	return m
}
