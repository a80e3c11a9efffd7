// Package mcpsource runs an MCP server as a tool-group module: it starts the
// server (a stdio process, sandboxed when the block says so, or a streamable
// HTTP endpoint), speaks the stateless protocol ([mcpversion.Stateless]) to
// a server that offers it and the 2025 session protocol to the others
// (era.go), lists its
// tools page by page, maps their names onto the host's tool-name rule, and
// calls them. The host supervises it as it supervises a plugin process.
package mcpsource

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
	"golang.org/x/sys/unix"
)

// Options say how to reach one MCP server.
type Options struct {
	ID           string            // the group id
	Command      string            // a stdio server's program
	Args         []string          // its arguments
	Env          map[string]string // added to the inherited allowlist ([protocol.Environ])
	Dir          string            // its working directory
	Sandbox      *sandbox.Policy   // confines the process when set
	URL          string            // a streamable HTTP server's endpoint, instead of Command
	Headers      map[string]string // sent with every HTTP request
	Description  string            // the group's; "" for the server's instructions or name
	ToolPrefix   string            // put before each tool name
	StartTimeout time.Duration     // for discover or initialize and the first tools/list; 0 means 10s
	Logger       hclog.Logger      // the server's stderr lines go here
	// Protocol is the protocol version to ask for: "" for the newest
	// ([mcpversion.Stateless], through server/discover, falling back to
	// initialize and what the server offers), [mcpversion.Legacy] (say) for
	// initialize alone.
	Protocol string
	// Asks are what the server may ask of the client that made a call
	// ([toolhost.MethodSampling], [toolhost.MethodElicitation],
	// [toolhost.MethodLog]; asks.go); nil for nothing.
	Asks []string
	// ToolsChanged is called, from a goroutine of the session, when the
	// tools, prompts or resources may have changed: the server announced
	// notifications/tools/list_changed (or prompts' or resources'), or,
	// from a stateless server that announces nothing, the ttlMs of its
	// tool list has passed.
	ToolsChanged func()
}

// Server is a running MCP server, a [toolhost.Provider] of its group.
type Server struct {
	opts    Options
	session *mcp.ClientSession
	cmd     *exec.Cmd     // the stdio process
	box     *sandbox.Cmd  // its sandbox, when confined
	stderr  output.Stderr // the end of the stdio process's stderr, for startError
	done    context.Context
	end     context.CancelCauseFunc

	progress progressSinks // of the calls in flight (progress.go)
	tokens   atomic.Uint64
	heard    atomic.Bool // the stdio server has said something before waitEnds
	// waitEnds is when the start's wait ends (unix nanoseconds): what the
	// server says after, such as its answer to the cancellation of the
	// discover it never answered, is not heard while starting.
	waitEnds atomic.Int64
	// garbled is why the stdio connection ended, when a line of the
	// server's was not JSON-RPC: what a start that failed names.
	garbled atomic.Pointer[error]
	// heardStarting is whether it had when its start failed, before the
	// stop, which may make it answer what it was asked (retryLegacy).
	heardStarting bool
	listening     atomic.Bool   // the server acknowledged subscriptions/listen
	asked         atomic.Uint64 // numbers a 2025 server's requests, for their keys

	fmu     sync.Mutex
	flights map[*flight]struct{} // the calls in flight (asks.go)
	logs    logOrder             // keeps a call's log messages ahead of its answer

	mu      sync.Mutex
	spec    *toolhost.GroupSpec
	names   map[string]string // the agent's name → the server's
	prompts map[string]string // a prompt's name as agents see it → the server's
	refused []string          // tools, prompts and resources that could not be offered, and why
	refresh *time.Timer       // lists the tools again when their ttlMs has passed

	subMu sync.Mutex
	subs  map[string]*upstreamSub // by URI, the resources subscribed to (items.go)
	kept  map[string]bool         // resources whose stream stays open with no watcher (maxKept)
}

// Start connects to the server (starting its process), negotiates the
// protocol version (server/discover, else initialize) and lists its tools.
// A stdio server that never answered server/discover is started once more
// and asked with initialize alone. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s, err := start(ctx, opts)
	if err != nil && retryLegacy(opts, s, err) {
		opts.Logger.Warn("no answer to server/discover: starting the server again and asking with initialize", "error", err)
		opts.Protocol = mcpversion.Legacy
		s, err = start(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// start is one attempt of Start. On error it stops what it started and
// returns the server too (nil when nothing was started), for what the
// attempt heard.
func start(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{opts: opts}
	s.done, s.end = context.WithCancelCause(context.Background())
	transport, err := s.transport()
	if err != nil {
		return nil, err
	}
	changed := func() {
		if opts.ToolsChanged != nil {
			opts.ToolsChanged()
		}
	}
	copts := &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { changed() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { changed() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { changed() },
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params != nil {
				s.updated(req.Params.URI)
			}
		},
	}
	if opts.URL != "" { // over stdio the connection takes them (era.go's heard)
		copts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { s.progress.take(req.Params) }
	}
	s.askHandlers(copts)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolhost", Version: "1"}, copts)
	client.AddReceivingMiddleware(s.acknowledged, s.forwardRoots)
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	s.waitEnds.Store(time.Now().Add(opts.StartTimeout).UnixNano())
	defer context.AfterFunc(s.done, cancel)() // a server that dies while starting ends the wait
	s.session, err = client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: opts.Protocol})
	if err == nil {
		go s.watch()
		err = s.Relist(ctx)
	}
	if err == nil {
		s.listenLogs(ctx)
	}
	if err != nil {
		s.heardStarting = s.heard.Load()
		s.Stop()
		return s, s.startError(ctx, err)
	}
	opts.Logger.Debug("started", "protocol", s.Protocol())
	return s, nil
}

// transport is the stdio command or the HTTP endpoint.
func (s *Server) transport() (mcp.Transport, error) {
	o := s.opts
	if o.URL != "" {
		client := &http.Client{Transport: httpTransport{h: o.Headers, next: http.DefaultTransport, s: s}}
		return &mcp.StreamableClientTransport{Endpoint: o.URL, HTTPClient: client, MaxRetries: -1}, nil
	}
	path, err := exec.LookPath(o.Command)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "mcp_server %s: command %q not found: %v", o.ID, o.Command, err)
	}
	if o.Sandbox != nil {
		// The executable is there read-only, at its own path; what else it
		// needs (a script's packages, its data) the block's paths say.
		pol := *o.Sandbox
		pol.ReadOnly = append(slices.Clone(pol.ReadOnly), path)
		box, err := sandbox.Command(context.Background(), &pol, append([]string{path}, o.Args...))
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "mcp_server %s: %v", o.ID, err)
		}
		box.Dir, box.Env = "", protocol.Environ(o.Env)
		if pol.Visible(o.Dir) {
			box.Dir = o.Dir
		}
		if err := box.Prepare(); err != nil { // the transport starts the exec.Cmd (stdio.go)
			return nil, toolhost.Errorf(toolhost.CodePolicy, "mcp_server %s: %v", o.ID, err)
		}
		s.box, s.cmd = box, box.Cmd
	} else {
		s.cmd = exec.Command(path, o.Args...)
		s.cmd.Dir, s.cmd.Env = o.Dir, protocol.Environ(o.Env)
		// Its own process group, so stopping it reaches its children too;
		// SIGKILL when the host dies.
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	// Each line at info, escaped; its end kept for startError.
	s.cmd.Stderr = io.MultiWriter(&s.stderr, output.NewLogLines(func(line string) { s.opts.Logger.Info(line) }))
	return stdio{s: s, terminate: 2 * time.Second}, nil
}

// watchProcess waits for the process to exit, leaving it for the
// connection's Close to reap (so its exit status stays in the exec.Cmd),
// and ends the session.
func (s *Server) watchProcess(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	s.end(errors.New("the server's process exited"))
}

// watch ends Exited when the session ends: the process exited, or the
// connection failed.
func (s *Server) watch() {
	err := s.session.Wait()
	if err == nil {
		err = errors.New("the session ended")
	}
	s.end(err)
}

// startError names why the server did not start, once it is stopped, with a
// code: timeout when it never answered, plugin_exited when its process
// exited by itself (not killed by the stop) or its HTTP endpoint could not
// be reached (a restart may find it back), invalid_group_def when it spoke
// something other than MCP.
func (s *Server) startError(ctx context.Context, err error) error {
	var coded *toolhost.Error
	var unreachable *url.Error
	st := (*os.ProcessState)(nil)
	if s.cmd != nil {
		st = s.cmd.ProcessState
	}
	switch {
	case errors.As(err, &coded):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return toolhost.Errorf(toolhost.CodeTimeout, "mcp_server %s: no answer within the start timeout of %s", s.opts.ID, s.opts.StartTimeout)
	case st != nil && st.Exited():
		return protocol.WithStderr(toolhost.Errorf(toolhost.CodePluginExited, "mcp_server %s: exited while starting (%s): %v", s.opts.ID, st, err), &s.stderr)
	case s.opts.URL != "" && errors.As(err, &unreachable):
		return toolhost.Errorf(toolhost.CodePluginExited, "mcp_server %s: unreachable: %v", s.opts.ID, err)
	}
	if g := s.garbled.Load(); g != nil {
		err = *g // the connection's end, whatever the call that was waiting saw of it
	}
	return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "mcp_server %s: did not start as an MCP server: %v", s.opts.ID, err)
}

// Relist lists the server's tools again, every page, and its prompts,
// resources and resource templates (items.go), and makes them the group's
// spec. In the stateless era a page the SDK holds, fresh by its
// ttlMs, is not asked for again (a list_changed notification drops them).
func (s *Server) Relist(ctx context.Context) error {
	var tools []*mcp.Tool
	ttl := time.Duration(-1) // the shortest of the pages'
	params := &mcp.ListToolsParams{}
	for {
		res, err := s.session.ListTools(ctx, params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, res.Tools...)
		if t := time.Duration(res.GetTTLMs()) * time.Millisecond; ttl < 0 || t < ttl {
			ttl = t
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	s.refreshAfter(ttl)
	it, err := s.listItems(ctx)
	if err != nil {
		return err
	}
	spec, names, refused := s.group(tools)
	it.fill(spec, s.capabilities())
	refused = append(refused, it.refused...)
	s.mu.Lock()
	s.spec, s.names, s.prompts, s.refused = spec, names, it.names, refused
	s.mu.Unlock()
	for _, r := range refused {
		s.opts.Logger.Warn("tool not offered", "why", r)
	}
	return nil
}

// group builds the group's spec from the server's tools: names mapped,
// schemas as the server gives them. A tool whose name clashes after the
// mapping or whose schema is not a JSON-schema object is left out, and
// said so in refused.
func (s *Server) group(tools []*mcp.Tool) (*toolhost.GroupSpec, map[string]string, []string) {
	spec := &toolhost.GroupSpec{ID: s.opts.ID, Description: s.opts.Description}
	if init := s.session.InitializeResult(); init != nil {
		if spec.Description == "" {
			spec.Description = summary(init.Instructions)
		}
		if init.ServerInfo != nil {
			if spec.Description == "" {
				spec.Description = "MCP server " + cmp.Or(init.ServerInfo.Title, init.ServerInfo.Name)
			}
			spec.Version = init.ServerInfo.Version
		}
	}
	names := map[string]string{}
	var refused []string
	for _, t := range tools {
		name := ToolName(s.opts.ToolPrefix, t.Name)
		if other, dup := names[name]; dup {
			refused = append(refused, fmt.Sprintf("tool %q of mcp_server %s: its name %s is also %q's: not offered", t.Name, s.opts.ID, name, other))
			continue
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			schema = []byte(`{"type":"object"}`)
		}
		ts := toolhost.ToolSpec{Name: name, Description: cmp.Or(t.Description, t.Title), InputSchema: schema, Title: t.Title}
		if t.Annotations != nil {
			ts.Annotations, _ = json.Marshal(t.Annotations)
		}
		if t.OutputSchema != nil {
			ts.OutputSchema, _ = json.Marshal(t.OutputSchema)
		}
		one := toolhost.GroupSpec{ID: spec.ID, Tools: []toolhost.ToolSpec{ts}}
		if err := protocol.ValidateGroup(&one); err != nil {
			refused = append(refused, fmt.Sprintf("tool %q of mcp_server %s is not offered: %v", t.Name, s.opts.ID, err))
			continue
		}
		names[name] = t.Name
		spec.Tools = append(spec.Tools, ts)
	}
	return spec, names, refused
}

// Names maps each tool name an agent sees to the server's own name for it.
func (s *Server) Names() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.names)
}

// Refused lists the server's tools, prompts and resources that could not
// be offered, and why.
func (s *Server) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Configure does nothing: an MCP server has no config block.
func (s *Server) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }

// Describe returns the group as last listed.
func (s *Server) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec := *s.spec
	return &spec, nil
}

// Call calls the tool on the server, or sends it the request of one of the
// item methods (prompts/get and the others: items.go). A tool's content
// blocks are the result's Content, their text its output; isError is a
// failed result (tool_exec); the server's JSON-RPC error a failed result
// carrying it (protocolFailure); another error of the protocol an error. A call
// whose context ends is cancelled upstream (notifications/cancelled); the
// server's progress reaches the context's [toolhost.Progress], and what it
// asks of the calling client its [toolhost.Asker] (asks.go).
func (s *Server) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	if toolhost.IsItemMethod(req.Tool) {
		return s.callItem(ctx, req)
	}
	s.mu.Lock()
	upstream, ok := s.names[req.Tool]
	s.mu.Unlock()
	if !ok {
		return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "mcp_server %s has no tool %s", s.opts.ID, req.Tool)
	}
	var args map[string]any
	if len(req.Arguments) > 0 {
		if err := json.Unmarshal(req.Arguments, &args); err != nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments: %v", err)
		}
	}
	params := &mcp.CallToolParams{Name: upstream, Arguments: args}
	if p := toolhost.ProgressFrom(ctx); p != nil {
		token := fmt.Sprintf("toolhost-%d", s.tokens.Add(1))
		s.progress.open(token, p)
		defer s.progress.close(token)
		params.SetProgressToken(token)
	}
	res, err := roundTrip(ctx, s, &params.Meta, func(ctx context.Context, in mcp.InputResponseMap, state string) (*mcp.CallToolResult, error) {
		p := *params
		p.InputResponses, p.RequestState = in, state
		return s.session.CallTool(ctx, &p)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		code := toolhost.CodeToolExec // or what refused the server's request of the client
		if coded := (*toolhost.Error)(nil); errors.As(err, &coded) {
			code = coded.Code
		} else if res := protocolFailure(err); res != nil {
			return res, nil
		}
		return nil, toolhost.Errorf(code, "mcp_server %s: %s: %v", s.opts.ID, upstream, err)
	}
	return result(res), nil
}

// result maps an MCP tool result onto the envelope: its content blocks as
// the server sent them, in order (Content), their text (of text blocks and
// embedded text resources) joined by newlines as the output (Stdout), the
// structured content in Meta. A result with
// isError fails with tool_exec, the first line of its text as the message;
// its blocks are still the server's own, which MCP clients get as they
// came.
func result(res *mcp.CallToolResult) *toolhost.Result {
	out := &toolhost.Result{OK: !res.IsError, Content: mcpcontent.From(res.Content)}
	var texts []string
	for i := range out.Content {
		if text, ok := out.Content[i].StdoutText(); ok {
			texts = append(texts, text)
		}
	}
	out.Stdout = strings.Join(texts, "\n")
	if res.StructuredContent != nil {
		out.Meta = map[string]any{toolhost.MetaStructuredContent: res.StructuredContent}
	}
	if res.IsError {
		out.ExitCode = 1
		out.Error = &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: cmp.Or(firstLine(out.Stdout), "the tool reported an error")}
	}
	return out
}

// Pid is the stdio process's pid (bubblewrap's when sandboxed); 0 for HTTP.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Exited is cancelled once the session has ended: the process exited or
// the connection failed.
func (s *Server) Exited() context.Context { return s.done }

// ExitError describes how the server ended: nil for a process that exited
// with status 0; the session's error for an HTTP server.
func (s *Server) ExitError() error {
	if s.cmd != nil {
		if st := s.cmd.ProcessState; st != nil && !st.Success() {
			return errors.New(st.String())
		}
		return nil
	}
	return context.Cause(s.done)
}

// Stop ends the session and the process, with whatever it started.
func (s *Server) Stop() {
	s.mu.Lock()
	if s.refresh != nil {
		s.refresh.Stop()
	}
	s.mu.Unlock()
	if s.session != nil {
		_ = s.session.Close() // closes stdin, then SIGTERM after 2s (stdio.go's pipes)
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		if s.session == nil {
			_ = s.cmd.Wait()
		}
	}
	if s.box != nil {
		s.box.Close()
	}
	s.end(errors.New("stopped"))
}

// ToolName is the name an agent sees for the server's tool: the prefix and
// the name, lower-cased, with every character but letters, digits and '_'
// (MCP also allows '-' and '.') turned into '_', "t_" before a name that
// does not start with a letter, and a name longer than 64 cut to 55
// characters and '_' and 8 hex digits of its SHA-256. The mapping is kept in
// a table, so a call reaches the server under the server's name; two names
// that map to one are a clash the host reports.
func ToolName(prefix, name string) string {
	if protocol.ValidToolName(prefix + name) {
		return prefix + name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(prefix + name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] < 'a' || out[0] > 'z' {
		out = "t_" + out
	}
	if len(out) > 64 {
		sum := sha256.Sum256([]byte(prefix + name))
		out = out[:55] + "_" + hex.EncodeToString(sum[:4])
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
