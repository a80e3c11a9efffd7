package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// A sessionless tools/call is the gateway's hot path. The SDK answers each
// sessionless request with a session of its own, made for it and closed
// after: a connection, its goroutines, and the request decoded three times
// over, each time with a fresh 32 KiB read buffer. callDirect answers the
// plain ones itself, through the same handler the SDK would reach
// (mcpRole.call), and leaves every other request to the SDK: a request it
// answers is one the SDK would answer the same way but for the framing (a
// JSON body where the SDK writes one SSE event; the protocol lets a server
// answer either way).
//
// A plain call is one POST holding one request: jsonrpc "2.0", an id that
// is an integer or a string of [A-Za-z0-9_.:-], method tools/call and no
// other member; its params a name, arguments and _meta, nothing else; the
// _meta states this front's sessionless version (the Mcp-Protocol-Version
// header's too), the client's capabilities (an object, without the tasks
// extension: a client that takes tasks may be answered with one) and its
// info (an object, when present), and neither a progress token nor a log
// level (the SDK would send notifications on the request's stream); the
// headers are those the SDK requires (Content-Type, Accept, Mcp-Method and
// Mcp-Name naming the call), and the tool is one the role's server offers
// without parameter headers (x-mcp-header, which the SDK checks against the
// request's headers); and the body nests no deeper than the SDK decodes
// (jsondepth.Max). Anything else, malformed or not, the SDK answers, so its
// errors stay its own.
func (r *mcpRole) callDirect(w http.ResponseWriter, req *http.Request, body *postBody) bool {
	if body == nil || req.Header.Get("Mcp-Method") != "tools/call" || !plainHeaders(req.Header) {
		return false
	}
	id, params, ok := plainCall(body.raw)
	if !ok || req.Header.Get("Mcp-Name") != params.Name || !r.offersPlain(params.Name) {
		return false
	}
	res, err := r.answerDirect(req.Context(), &mcp.CallToolRequest{Params: params, Extra: &mcp.RequestExtra{Header: req.Header}})
	writeDirect(w, id, res, err, r.impl)
	return true
}

// answerDirect runs a plain call as the role's server would: its handler,
// a panic answered as an internal error (as newMCPRole's outermost
// middleware does).
func (r *mcpRole) answerDirect(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, r.panicked("tools/call", p)
		}
	}()
	return r.call(ctx, req)
}

// plainHeaders reports whether a POST's Content-Type is JSON and its
// Accept names both JSON and SSE, as the SDK requires of a sessionless
// request, and its protocol version is the front's sessionless one.
func plainHeaders(h http.Header) bool {
	if h.Get("Mcp-Protocol-Version") != mcpversion.Stateless || baseType(h.Get("Content-Type")) != "application/json" {
		return false
	}
	var jsonOK, sseOK bool
	for _, v := range h.Values("Accept") {
		for t := range strings.SplitSeq(v, ",") {
			switch baseType(t) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				sseOK = true
			}
		}
	}
	return jsonOK && sseOK
}

// baseType is a media type without its parameters, in lower case.
func baseType(v string) string {
	v, _, _ = strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(v))
}

// plainCall decodes a body that is one plain tools/call (see callDirect)
// and returns its id, as it came, and its params; ok is false for any
// other body.
func plainCall(raw []byte) (json.RawMessage, *mcp.CallToolParamsRaw, bool) {
	var msg map[string]json.RawMessage
	if !bytes.Contains(raw, []byte(`"tools/call"`)) || jsondepth.Of(raw) > jsondepth.Max || json.Unmarshal(raw, &msg) != nil || len(msg) != 4 ||
		string(msg["jsonrpc"]) != `"2.0"` || string(msg["method"]) != `"tools/call"` || !plainID(msg["id"]) {
		return nil, nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return nil, nil, false
	}
	p := &mcp.CallToolParamsRaw{}
	for k, v := range params {
		var err error
		switch k {
		case "name":
			err = json.Unmarshal(v, &p.Name)
		case "arguments":
			p.Arguments = v
		case "_meta":
			err = json.Unmarshal(v, &p.Meta)
		default:
			return nil, nil, false
		}
		if err != nil {
			return nil, nil, false
		}
	}
	return msg["id"], p, p.Name != "" && plainMeta(p.Meta)
}

// plainID reports whether a request's id is an integer, or a string the
// SDK would write back as it came.
func plainID(id json.RawMessage) bool {
	s := string(id)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.Trim(s[1:len(s)-1], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") == ""
	}
	s = strings.TrimPrefix(s, "-")
	return len(s) > 0 && len(s) <= 15 && (s == "0" || s[0] != '0') && strings.Trim(s, "0123456789") == ""
}

// plainMeta reports whether a call's _meta is one callDirect answers (see
// there).
func plainMeta(meta mcp.Meta) bool {
	if meta[mcp.MetaKeyProtocolVersion] != mcpversion.Stateless {
		return false
	}
	caps, ok := statedCapabilities(meta)
	if !ok {
		return false
	}
	if exts, ok := caps["extensions"].(map[string]any); ok {
		if _, ok := exts[tasksExtension]; ok {
			return false
		}
	}
	if info, present := meta[mcp.MetaKeyClientInfo]; present {
		if _, ok := info.(map[string]any); !ok {
			return false
		}
	}
	_, progress := meta["progressToken"]
	_, level := meta[mcp.MetaKeyLogLevel]
	return !progress && !level
}

// offersPlain reports whether the role's server offers the tool, without
// parameter headers.
func (r *mcpRole) offersPlain(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.offered[name]
	if !ok {
		return false
	}
	schema, _ := t.InputSchema.(json.RawMessage)
	return !bytes.Contains(schema, []byte("x-mcp-header"))
}

// writeDirect writes the answer to the request with the id: the result as
// the SDK completes it for a sessionless client (typedResult) of the
// server impl, or the error, as the SDK's JSON-RPC connection makes it of a
// handler's.
func writeDirect(w http.ResponseWriter, id json.RawMessage, res *mcp.CallToolResult, err error, impl *mcp.Implementation) {
	member, out, status := `,"result":`, []byte("null"), http.StatusOK // a nil result, as the SDK writes one
	if err == nil && res != nil {
		out, err = typedResult(res, impl)
	}
	if err != nil {
		e := wireError(err)
		member, status = `,"error":`, errorStatus(e.Code)
		out, _ = json.Marshal(e)
	}
	buf := make([]byte, 0, len(`{"jsonrpc":"2.0","id":}`)+len(id)+len(member)+len(out))
	buf = append(append(append(append(append(buf, `{"jsonrpc":"2.0","id":`...), id...), member...), out...), '}')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf)
}

// errorStatus is the HTTP status of a sessionless request's error answer
// of the code, as the protocol has it (and the SDK sends it): 404 for an
// unknown method, 400 for invalid params, an unsupported protocol version
// or a client capability the request needs and the client did not
// declare; else 200.
func errorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// typedResult encodes a call's result as the SDK completes its handlers'
// results for a sessionless client: the server impl in its _meta
// (MetaKeyServerInfo) unless it names one, and its resultType (which none
// of the front's results has yet), input_required for a round of requests,
// else complete, with its content never null.
func typedResult(res *mcp.CallToolResult, impl *mcp.Implementation) ([]byte, error) {
	c := *res
	if _, ok := c.Meta[mcp.MetaKeyServerInfo]; !ok {
		c.Meta = maps.Clone(c.Meta)
		if c.Meta == nil {
			c.Meta = mcp.Meta{}
		}
		c.Meta[mcp.MetaKeyServerInfo] = impl
	}
	rt := `"complete"`
	if c.InputRequests != nil {
		rt = `"input_required"`
	} else if c.Content == nil {
		c.Content = []mcp.Content{}
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, errors.New("mcp: a tools/call result that is not an object")
	}
	out := append(make([]byte, 0, len(b)+40), `{"resultType":`+rt...)
	if b[1] != '}' {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// wireError is a handler's error as the SDK's JSON-RPC connection answers
// it: a protocol error as it is (without data that is not JSON, as the
// role's middleware leaves it), any other with its message and the code of
// a protocol error it wraps (0 when none).
func wireError(err error) *jsonrpc.Error {
	e, ok := err.(*jsonrpc.Error)
	if !ok {
		out := &jsonrpc.Error{Message: err.Error()}
		if errors.As(err, &e) {
			out.Code = e.Code
		}
		return out
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return &jsonrpc.Error{Code: e.Code, Message: e.Message}
	}
	return e
}
