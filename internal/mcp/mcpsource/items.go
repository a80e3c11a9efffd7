package mcpsource

// What a server offers beside its tools: prompts, resources, resource
// templates, completions and resource subscriptions. They are listed with
// the tools (Relist), every page, when the server declares the capability;
// prompt names are mapped as tool names are (ToolName, with the tool
// prefix), resource URIs and templates kept as the server gives them. A
// call whose tool is one of the methods (toolhost.IsItemMethod) is sent to
// the server as that request; prompts/get and resources/read ask the calling
// client as a tools/call does (asks.go's roundTrip).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/toolhost/toolhost/internal/protocol"
)

// items is what Relist found beside the tools.
type items struct {
	prompts   []toolhost.PromptSpec
	resources []toolhost.ResourceSpec
	templates []toolhost.ResourceTemplateSpec
	names     map[string]string // a prompt's name as agents see it → the server's
	refused   []string
}

// listItems lists the server's prompts, resources and resource templates,
// every page, as far as it declares them.
func (s *Server) listItems(ctx context.Context) (*items, error) {
	out := &items{names: map[string]string{}}
	caps := s.capabilities()
	if caps.Prompts != nil {
		n := 0
		for p, err := range s.session.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			if n++; out.tooMany(s.opts.ID, "prompts", n) {
				break
			}
			out.addPrompt(s.opts.ID, s.opts.ToolPrefix, p)
		}
	}
	if caps.Resources != nil {
		seen := map[string]bool{}
		n := 0
		for r, err := range s.session.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			if n++; out.tooMany(s.opts.ID, "resources", n) {
				break
			}
			if seen[r.URI] {
				out.refused = append(out.refused, fmt.Sprintf("resource %s of mcp_server %s is listed twice: offered once", r.URI, s.opts.ID))
				continue
			}
			seen[r.URI] = true
			out.addResource(s.opts.ID, r)
		}
		n = 0
		for t, err := range s.session.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/templates/list: %w", err)
			}
			if n++; out.tooMany(s.opts.ID, "resource templates", n) {
				break
			}
			if seen[t.URITemplate] {
				out.refused = append(out.refused, fmt.Sprintf("resource template %s of mcp_server %s is listed twice: offered once", t.URITemplate, s.opts.ID))
				continue
			}
			seen[t.URITemplate] = true
			out.addTemplate(s.opts.ID, t)
		}
	}
	return out, nil
}

// tooMany reports whether the nth item of a kind is past the limit of
// protocol.MaxTools, saying so once: the server's list is cut there.
func (it *items) tooMany(id, kind string, n int) bool {
	if n <= protocol.MaxTools {
		return false
	}
	it.refused = append(it.refused, fmt.Sprintf("mcp_server %s lists more than %d %s: the rest are not offered", id, protocol.MaxTools, kind))
	return true
}

// addPrompt adds the server's prompt, its name mapped, unless it clashes
// or is not valid (refused).
func (it *items) addPrompt(id, prefix string, p *mcp.Prompt) {
	name := ToolName(prefix, p.Name)
	if other, dup := it.names[name]; dup {
		it.refused = append(it.refused, fmt.Sprintf("prompt %q of mcp_server %s: its name %s is also %q's: not offered", p.Name, id, name, other))
		return
	}
	ps := toolhost.PromptSpec{Name: name, Title: p.Title, Description: p.Description, Icons: rawJSON(p.Icons), Meta: rawJSON(p.Meta)}
	for _, a := range p.Arguments {
		if a != nil {
			ps.Arguments = append(ps.Arguments, toolhost.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
	}
	if err := protocol.ValidateGroup(&toolhost.GroupSpec{ID: id, Prompts: []toolhost.PromptSpec{ps}}); err != nil {
		it.refused = append(it.refused, fmt.Sprintf("prompt %q of mcp_server %s is not offered: %v", p.Name, id, err))
		return
	}
	it.names[name] = p.Name
	it.prompts = append(it.prompts, ps)
}

// addResource adds the server's resource unless it is not valid.
func (it *items) addResource(id string, r *mcp.Resource) {
	rs := toolhost.ResourceSpec{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType,
		Annotations: rawJSON(r.Annotations), Icons: rawJSON(r.Icons), Meta: rawJSON(r.Meta)}
	if r.Size > 0 {
		rs.Size = &r.Size
	}
	if err := protocol.ValidateGroup(&toolhost.GroupSpec{ID: id, Resources: []toolhost.ResourceSpec{rs}}); err != nil {
		it.refused = append(it.refused, fmt.Sprintf("resource %q of mcp_server %s is not offered: %v", r.URI, id, err))
		return
	}
	it.resources = append(it.resources, rs)
}

// addTemplate adds the server's resource template unless it is not valid.
func (it *items) addTemplate(id string, t *mcp.ResourceTemplate) {
	ts := toolhost.ResourceTemplateSpec{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description,
		MimeType: t.MIMEType, Annotations: rawJSON(t.Annotations), Icons: rawJSON(t.Icons), Meta: rawJSON(t.Meta)}
	if err := protocol.ValidateGroup(&toolhost.GroupSpec{ID: id, ResourceTemplates: []toolhost.ResourceTemplateSpec{ts}}); err != nil {
		it.refused = append(it.refused, fmt.Sprintf("resource template %q of mcp_server %s is not offered: %v", t.URITemplate, id, err))
		return
	}
	it.templates = append(it.templates, ts)
}

// fill puts the items in spec, with the features the server declares.
func (it *items) fill(spec *toolhost.GroupSpec, caps *mcp.ServerCapabilities) {
	spec.Prompts, spec.Resources, spec.ResourceTemplates = it.prompts, it.resources, it.templates
	hasItems := len(it.prompts)+len(it.resources)+len(it.templates) > 0
	spec.Completions = hasItems && caps.Completions != nil
	spec.Subscribe = len(it.resources)+len(it.templates) > 0 && caps.Resources != nil && caps.Resources.Subscribe
}

// capabilities are the server's, never nil.
func (s *Server) capabilities() *mcp.ServerCapabilities {
	if init := s.session.InitializeResult(); init != nil && init.Capabilities != nil {
		return init.Capabilities
	}
	return &mcp.ServerCapabilities{}
}

// rawJSON is v as JSON; nil for an empty or nil v.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" || string(b) == "{}" || string(b) == "[]" {
		return nil
	}
	return b
}

// callItem sends a call of one of the item methods to the server. A
// JSON-RPC error of the server is a failed result that carries it
// (toolhost.MetaProtocolError), for MCP clients to receive as the server
// sent it.
func (s *Server) callItem(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	var args struct {
		Name      string                     `json:"name"`
		Arguments map[string]string          `json:"arguments"`
		URI       string                     `json:"uri"`
		Ref       *mcp.CompleteReference     `json:"ref"`
		Argument  mcp.CompleteParamsArgument `json:"argument"`
		Context   *mcp.CompleteContext       `json:"context"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "%s: arguments: %v", req.Tool, err)
	}
	var res *toolhost.Result
	var err error
	switch req.Tool {
	case toolhost.MethodPromptsGet:
		upstream, ok := s.promptName(args.Name)
		if !ok {
			return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "mcp_server %s has no prompt %s", s.opts.ID, args.Name)
		}
		params := &mcp.GetPromptParams{Name: upstream, Arguments: args.Arguments}
		var r *mcp.GetPromptResult
		if r, err = roundTrip(ctx, s, &params.Meta, func(ctx context.Context, in mcp.InputResponseMap, state string) (*mcp.GetPromptResult, error) {
			p := *params
			p.InputResponses, p.RequestState = in, state
			return s.session.GetPrompt(ctx, &p)
		}); err == nil {
			res = promptResult(r)
		}
	case toolhost.MethodResourcesRead:
		params := &mcp.ReadResourceParams{URI: args.URI}
		var r *mcp.ReadResourceResult
		if r, err = roundTrip(ctx, s, &params.Meta, func(ctx context.Context, in mcp.InputResponseMap, state string) (*mcp.ReadResourceResult, error) {
			p := *params
			p.InputResponses, p.RequestState = in, state
			return s.session.ReadResource(ctx, &p)
		}); err == nil {
			res = readResult(r)
		}
	case toolhost.MethodComplete:
		if args.Ref == nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "%s: no ref", req.Tool)
		}
		ref := *args.Ref
		if ref.Type == "ref/prompt" {
			var ok bool
			if ref.Name, ok = s.promptName(ref.Name); !ok {
				return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "mcp_server %s has no prompt %s", s.opts.ID, args.Ref.Name)
			}
		}
		var r *mcp.CompleteResult
		if r, err = s.session.Complete(ctx, &mcp.CompleteParams{Ref: &ref, Argument: args.Argument, Context: args.Context}); err == nil {
			values := make([]any, len(r.Completion.Values)) // as JSON decodes, which the pipeline redacts (redact.Value)
			for i, v := range r.Completion.Values {
				values[i] = v
			}
			res = &toolhost.Result{OK: true, Stdout: strings.Join(r.Completion.Values, "\n"), Meta: map[string]any{
				toolhost.MetaCompletion: map[string]any{"values": values, "total": r.Completion.Total, "hasMore": r.Completion.HasMore}}}
		}
	case toolhost.MethodSubscribe, toolhost.MethodUnsubscribe:
		err = s.subscription(ctx, req, args.URI)
		res = &toolhost.Result{OK: true}
	default:
		return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "mcp_server %s has no tool %s", s.opts.ID, req.Tool)
	}
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if res := protocolFailure(err); res != nil {
		return res, nil
	}
	var coded *toolhost.Error
	if errors.As(err, &coded) {
		return nil, err
	}
	return nil, toolhost.Errorf(toolhost.CodeToolExec, "mcp_server %s: %s: %v", s.opts.ID, req.Tool, err)
}

// protocolFailure is the failed result that carries a JSON-RPC error of the
// server (toolhost.MetaProtocolError), for MCP clients to receive as the
// server sent it; nil for another error, and for the one that stands for
// an answer over MaxLine (stdio.go).
func protocolFailure(err error) *toolhost.Result {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code == codeTooLong {
		return nil
	}
	return &toolhost.Result{ExitCode: 1, Error: &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: rpc.Message},
		Meta: map[string]any{toolhost.MetaProtocolError: map[string]any{"code": rpc.Code, "message": rpc.Message, "data": rpc.Data}}}
}

// promptName is the server's name of the prompt agents know as name.
func (s *Server) promptName(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	upstream, ok := s.prompts[name]
	return upstream, ok
}

// promptResult maps a prompt's messages onto a result's content, each
// block with its message's role.
func promptResult(r *mcp.GetPromptResult) *toolhost.Result {
	out := &toolhost.Result{OK: true}
	var texts []string
	for _, m := range r.Messages {
		if m == nil || m.Content == nil {
			continue
		}
		c, ok := mcpcontent.Block(m.Content)
		if !ok {
			continue
		}
		c.Role = string(m.Role)
		out.Content = append(out.Content, c)
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
	}
	out.Stdout = strings.Join(texts, "\n")
	if r.Description != "" {
		out.Meta = map[string]any{toolhost.MetaDescription: r.Description}
	}
	return out
}

// readResult maps a resource's contents onto a result's content, each an
// embedded resource block.
func readResult(r *mcp.ReadResourceResult) *toolhost.Result {
	out := &toolhost.Result{OK: true}
	var texts []string
	for _, c := range r.Contents {
		if c == nil {
			continue
		}
		out.Content = append(out.Content, toolhost.Content{Type: toolhost.ContentResource, Resource: &toolhost.ResourceContents{
			URI: c.URI, MimeType: c.MIMEType, Text: c.Text, Blob: c.Blob, Meta: rawJSON(c.Meta)}})
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
	}
	out.Stdout = strings.Join(texts, "\n")
	return out
}

// upstreamSub is the server's subscription to one resource, which the
// watchers of the resource share.
type upstreamSub struct {
	mu       sync.Mutex                          // held while the server is asked
	watchers map[string]toolhost.ResourceWatcher // by calling agent; guarded by Server.subMu
	on       bool                                // the server is subscribed; guarded by mu
}

// subscription subscribes the caller's watcher to the resource, or
// unsubscribes it: the server is asked when the first watcher comes and
// when the last goes. The watchers are keyed by the calling agent. No lock
// that updated takes is held while the server is asked, so that the
// server's notifications flow meanwhile.
func (s *Server) subscription(ctx context.Context, req *toolhost.CallRequest, uri string) error {
	key := cmp.Or(req.Context.AgentID, req.Context.Session)
	w := toolhost.ResourceWatcherFrom(ctx)
	if req.Tool == toolhost.MethodSubscribe && w == nil {
		return toolhost.Errorf(toolhost.CodeValidation, "%s: only a caller that can be told of updates (an MCP session) subscribes", req.Tool)
	}
	for {
		s.subMu.Lock()
		sub := s.subs[uri]
		if sub == nil {
			if req.Tool == toolhost.MethodUnsubscribe {
				s.subMu.Unlock()
				return nil
			}
			sub = &upstreamSub{watchers: map[string]toolhost.ResourceWatcher{}}
			if s.subs == nil {
				s.subs = map[string]*upstreamSub{}
			}
			s.subs[uri] = sub
		}
		s.subMu.Unlock()
		sub.mu.Lock()
		s.subMu.Lock()
		current := s.subs[uri] == sub // else the last watcher left meanwhile: start again
		s.subMu.Unlock()
		if current {
			err := s.subscribed(ctx, sub, uri, key, w)
			sub.mu.Unlock()
			return err
		}
		sub.mu.Unlock()
	}
}

// subscribed adds or removes the watcher of key, asking the server as
// needed; sub.mu is held.
func (s *Server) subscribed(ctx context.Context, sub *upstreamSub, uri, key string, w toolhost.ResourceWatcher) error {
	if w != nil {
		if !sub.on {
			if err := s.session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				s.dropIfIdle(sub, uri)
				return err
			}
			sub.on = true
		}
		s.subMu.Lock()
		sub.watchers[key] = w
		s.subMu.Unlock()
		return nil
	}
	s.subMu.Lock()
	delete(sub.watchers, key)
	last := len(sub.watchers) == 0
	keep := last && s.stateless() && (s.kept[uri] || len(s.kept) < maxKept)
	if keep {
		if s.kept == nil {
			s.kept = map[string]bool{}
		}
		s.kept[uri] = true
	}
	s.subMu.Unlock()
	if !last || !sub.on {
		return nil
	}
	if keep { // its stream stays open, and a later subscription reuses it
		s.dropIfIdle(sub, uri)
		return nil
	}
	sub.on = false
	err := s.session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	s.dropIfIdle(sub, uri)
	return err
}

// maxKept bounds the resources whose subscriptions/listen stream a module
// keeps open, in the stateless era, after their last watcher left: a go-sdk
// server (v1.8.0) keys its list_changed subscriptions by session, so that
// the end of any of a stdio client's listen streams ends them all, and the
// module would no longer hear of its server's new tools, prompts or
// resources. Past the bound, a stream is ended as the protocol means it.
const maxKept = 64

// dropIfIdle forgets sub when it has no watchers; sub.mu is held.
func (s *Server) dropIfIdle(sub *upstreamSub, uri string) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if len(sub.watchers) == 0 && s.subs[uri] == sub {
		delete(s.subs, uri)
	}
}

// updated tells the watchers of the resource that it changed, each once.
func (s *Server) updated(uri string) {
	s.subMu.Lock()
	told := map[toolhost.ResourceWatcher]bool{}
	if sub := s.subs[uri]; sub != nil {
		for _, w := range sub.watchers {
			told[w] = true
		}
	}
	s.subMu.Unlock()
	for w := range told {
		w.ResourceUpdated(uri)
	}
}
