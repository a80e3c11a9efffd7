package protocol

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"github.com/toolhost/toolhost/sandbox"
)

// These converters keep the wire messages (package pb) inside this package:
// the rest of the code sees only the toolhost types.

func contextToProto(c toolhost.CallContext) *pb.CallContext {
	return &pb.CallContext{
		CallId: c.CallID, AgentId: c.AgentID, Role: c.Role, Session: c.Session,
		WorkspaceDir: c.WorkspaceDir, Sandboxed: c.Sandboxed, Channel: c.Channel,
	}
}

func contextFromProto(c *pb.CallContext) toolhost.CallContext {
	return toolhost.CallContext{
		CallID: c.GetCallId(), AgentID: c.GetAgentId(), Role: c.GetRole(), Session: c.GetSession(),
		WorkspaceDir: c.GetWorkspaceDir(), Sandboxed: c.GetSandboxed(), Channel: c.GetChannel(),
	}
}

func groupToProto(g *toolhost.GroupSpec) *pb.GroupSpec {
	out := &pb.GroupSpec{Id: g.ID, Description: g.Description, Version: g.Version, Tools: make([]*pb.ToolSpec, len(g.Tools))}
	for i, t := range g.Tools {
		out.Tools[i] = &pb.ToolSpec{
			Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Optional: t.Optional, RequiresApproval: t.RequiresApproval, TimeoutMs: t.Timeout.Milliseconds(),
			NeedsAgent: t.NeedsAgent, OutputTail: t.OutputTail,
			Title: t.Title, Annotations: t.Annotations, OutputSchema: t.OutputSchema,
		}
	}
	return out
}

func groupFromProto(g *pb.GroupSpec) *toolhost.GroupSpec {
	out := &toolhost.GroupSpec{ID: g.GetId(), Description: g.GetDescription(), Version: g.GetVersion(), Tools: make([]toolhost.ToolSpec, len(g.GetTools()))}
	for i, t := range g.GetTools() {
		out.Tools[i] = toolhost.ToolSpec{
			Name: t.GetName(), Description: t.GetDescription(), InputSchema: t.GetInputSchema(),
			Optional: t.GetOptional(), RequiresApproval: t.GetRequiresApproval(),
			Timeout:    time.Duration(t.GetTimeoutMs()) * time.Millisecond,
			NeedsAgent: t.GetNeedsAgent(), OutputTail: t.GetOutputTail(),
			Title: t.GetTitle(), Annotations: t.GetAnnotations(), OutputSchema: t.GetOutputSchema(),
		}
	}
	return out
}

// sandboxToProto encodes a sandbox policy as JSON; nil stays empty.
func sandboxToProto(p *sandbox.Policy) []byte {
	if p == nil {
		return nil
	}
	raw, _ := json.Marshal(p) // cannot fail: strings, numbers and booleans only
	return raw
}

// sandboxFromProto decodes a sandbox policy; empty is nil.
func sandboxFromProto(raw []byte) (*sandbox.Policy, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var p sandbox.Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "configure: the host sent a sandbox that is not a sandbox policy: %v", err)
	}
	return &p, nil
}

// validUTF8 makes s encodable as a protobuf string, replacing invalid bytes
// (binary output, a rune cut in half) with U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func resultToProto(r *toolhost.Result) (*pb.Result, error) {
	out := &pb.Result{
		Ok: r.OK, ExitCode: int32(r.ExitCode), Stdout: validUTF8(r.Stdout), Stderr: validUTF8(r.Stderr),
		TruncatedLines: r.TruncatedLines, TruncatedBytes: r.TruncatedBytes, NextPageCursor: r.NextPageCursor,
	}
	if len(r.Meta) > 0 {
		meta, err := json.Marshal(r.Meta)
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeToolExec, "result meta is not JSON: %v", err)
		}
		out.Meta = meta
	}
	if r.Error != nil {
		out.Error = &pb.Error{Code: string(r.Error.Code), Message: validUTF8(r.Error.Message)}
	}
	for _, a := range r.Attachments {
		out.Attachments = append(out.Attachments, &pb.Attachment{Name: a.Name, MimeType: a.MimeType, Data: a.Data})
	}
	return out, nil
}

func resultFromProto(r *pb.Result) (*toolhost.Result, error) {
	out := &toolhost.Result{
		OK: r.GetOk(), ExitCode: int(r.GetExitCode()), Stdout: r.GetStdout(), Stderr: r.GetStderr(),
		TruncatedLines: r.GetTruncatedLines(), TruncatedBytes: r.GetTruncatedBytes(), NextPageCursor: r.GetNextPageCursor(),
	}
	if len(r.GetMeta()) > 0 {
		if err := json.Unmarshal(r.GetMeta(), &out.Meta); err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInternal, "plugin sent result meta that is not a JSON object: %v", err)
		}
	}
	if e := r.GetError(); e != nil {
		out.Error = &toolhost.ErrorInfo{Code: toolhost.Code(e.GetCode()), Message: e.GetMessage()}
	}
	for _, a := range r.GetAttachments() {
		out.Attachments = append(out.Attachments, toolhost.Attachment{Name: a.GetName(), MimeType: a.GetMimeType(), Data: a.GetData()})
	}
	return out, nil
}
