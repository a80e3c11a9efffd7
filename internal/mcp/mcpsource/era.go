package mcpsource

// The protocol eras. The go-sdk client asks for the newest version first:
// server/discover with mcpversion.Stateless, then initialize with
// mcpversion.Legacy when the server answers discover with anything but a
// stateless version it shares.
// What the SDK leaves to its user, this file does:
//   - a stdio server that says nothing at all to server/discover, dying or
//     staying silent (a 2025 server that refuses any request before
//     initialize may), is started again and asked with initialize alone;
//   - in the stateless era no session ends when an HTTP server goes away
//     (there is no session, and no GET stream): the subscriptions/listen
//     stream the SDK opens for tools/list_changed is the module's link to
//     the server, and its end ends the module as the end of the 2025 GET
//     stream does. The host restarts it per the block's policy, and the new
//     start lists the tools and listens anew, as the spec asks of a client
//     whose stream ended (missed notifications are not replayed);
//   - a stateless server that announces no list changes but says how long
//     its tool list stays fresh (ttlMs) is listed again when that has passed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// minRefresh bounds how often a ttlMs makes the tools listed again.
const minRefresh = time.Second

// Protocol is the MCP protocol version negotiated with the server:
// [mcpversion.Stateless] for a server that answered server/discover with it, the version
// initialize agreed on for the others.
func (s *Server) Protocol() string {
	if s.session == nil {
		return ""
	}
	if init := s.session.InitializeResult(); init != nil {
		return init.ProtocolVersion
	}
	return ""
}

// stateless reports whether the session speaks the stateless era.
func (s *Server) stateless() bool { return s.Protocol() >= mcpversion.Stateless }

// announces reports whether the server says it announces changes of its tool
// list (in the stateless era, on the subscriptions/listen stream the SDK
// then opens).
func (s *Server) announces() bool {
	init := s.session.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Tools != nil && init.Capabilities.Tools.ListChanged
}

// retryLegacy reports whether a start that failed with err is worth one
// more, asking with initialize alone: a stdio server, asked with the newest
// version, that never said a word before it exited or the start timed out.
func retryLegacy(opts Options, s *Server, err error) bool {
	code := toolhost.CodeOf(err)
	return opts.URL == "" && opts.Protocol == "" && s != nil && !s.heardStarting &&
		(code == toolhost.CodePluginExited || code == toolhost.CodeTimeout)
}

// heard is the stdio connection as the module sees it: it notes whether the
// server has said anything at all, and takes the progress notifications and
// counts the log messages as it reads them, so that a call's come before
// its answer (progress.go, asks.go's logOrder).
type heard struct {
	mcp.Connection
	s *Server
}

func (c heard) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil && time.Now().UnixNano() < c.s.waitEnds.Load() {
		c.s.heard.Store(true)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.IsCall() {
		switch req.Method {
		case "notifications/progress":
			c.s.progress.read(req.Params)
		case "notifications/message":
			c.s.logs.readOne()
		}
	}
	return msg, err
}

// acknowledged is a receiving middleware noting that the server
// acknowledged the subscriptions/listen request: from then on, the end of
// its stream ends the module.
func (s *Server) acknowledged(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/subscriptions/acknowledged" {
			s.listening.Store(true)
		}
		return next(ctx, method, req)
	}
}

// refreshAfter has the tools listed again when ttl has passed (minRefresh at
// least), for a stateless server that does not announce changes; nothing
// for the others, or for a ttl of 0 (a list that is stale at once, which
// the spec lets a client list again whenever it needs it: the host holds
// it instead).
func (s *Server) refreshAfter(ttl time.Duration) {
	if ttl <= 0 || !s.stateless() || s.announces() || s.opts.ToolsChanged == nil || s.done.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refresh != nil {
		s.refresh.Stop()
	}
	s.refresh = time.AfterFunc(max(ttl, minRefresh), func() {
		if s.done.Err() == nil {
			s.opts.ToolsChanged()
		}
	})
}

// httpTransport adds the block's headers to every request, and watches the
// stream of an acknowledged subscriptions/listen request: its end, unless
// the module closed it, ends the module.
type httpTransport struct {
	h    map[string]string
	next http.RoundTripper
	s    *Server
}

func (t httpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "subscriptions/listen" || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media == "text/event-stream" {
		resp.Body = &listenStream{ReadCloser: resp.Body, ctx: r.Context(), s: t.s}
	}
	return resp, nil
}

// listenStream is the body of a subscriptions/listen response.
type listenStream struct {
	io.ReadCloser
	ctx  context.Context // the request's, cancelled when the session closes
	s    *Server
	once sync.Once
}

func (b *listenStream) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.ctx.Err() == nil && b.s.listening.Load() {
		b.once.Do(func() {
			why := err
			if errors.Is(err, io.EOF) {
				why = errors.New("the server closed it")
			}
			b.s.end(fmt.Errorf("the subscriptions/listen stream ended: %w", why))
		})
	}
	return n, err
}
