package proto

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorDomain marks a gRPC status detail as carrying a toolhost code.
const errorDomain = "toolhost"

// NewServer returns the gRPC service serving p.
func NewServer(p toolhost.Provider) ToolGroupServer { return &server{impl: p} }

type server struct {
	UnimplementedToolGroupServer
	impl toolhost.Provider
}

func (s *server) Describe(ctx context.Context, req *DescribeRequest) (*DescribeResponse, error) {
	spec, err := s.impl.Describe(ctx, &toolhost.DescribeRequest{Context: contextFromProto(req.GetContext())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &DescribeResponse{Group: groupToProto(spec)}, nil
}

func (s *server) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	box, err := sandboxFromProto(req.GetSandbox())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.Configure(ctx, &toolhost.ConfigureRequest{Config: req.GetConfig(), HostPaths: req.GetHostPaths(), Sandbox: box}); err != nil {
		return nil, toStatus(err)
	}
	return &ConfigureResponse{}, nil
}

// Call runs a call; a traced one (protocol minor 5) runs under the
// handler's span, a child of the host's dispatch span, and its spans go
// back with the response.
func (s *server) Call(ctx context.Context, req *CallRequest) (*CallResponse, error) {
	end := func(string) []*Span { return nil }
	if tctx, ok := extractTrace(ctx, req.GetContext()); ok {
		ctx, end = pluginTracing().begin(tctx, req.GetTool())
	}
	res, err := s.impl.Call(ctx, &toolhost.CallRequest{
		Tool: req.GetTool(), Arguments: req.GetArguments(), Context: contextFromProto(req.GetContext()),
	})
	if err == nil {
		var out *Result
		if out, err = resultToProto(res); err == nil {
			var failed string
			if !res.OK && res.Error != nil {
				failed = string(res.Error.Code) + ": " + res.Error.Message
			} else if !res.OK {
				failed = "the tool failed"
			}
			return &CallResponse{Result: out, Spans: end(failed)}, nil
		}
	}
	end(err.Error())
	return nil, toStatus(err)
}

// CallStream runs a call as Call does, with a Progress in its context that
// sends the tool's reports on the stream ahead of the response, and, when
// the host takes it so (stream_output), an Output that sends its output.
func (s *server) CallStream(req *CallRequest, stream grpc.ServerStreamingServer[CallEvent]) error {
	var (
		mu   sync.Mutex
		done bool
	)
	ctx := toolhost.WithProgress(stream.Context(), func(progress, total float64, message string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = stream.Send(&CallEvent{Event: &CallEvent_Progress{Progress: &Progress{Progress: progress, Total: total, Message: message}}})
		}
	})
	if req.GetStreamOutput() {
		ctx = toolhost.WithOutput(ctx, func(stderr bool, p []byte) error {
			mu.Lock()
			defer mu.Unlock()
			for len(p) > 0 && !done {
				// Send blocks while the host has not taken the pieces before
				// (flow control), so that the tool waits rather than the
				// output piling up.
				n := min(len(p), maxOutputPiece)
				if err := stream.Send(&CallEvent{Event: &CallEvent_Output{Output: &Output{Stderr: stderr, Data: p[:n]}}}); err != nil {
					return err
				}
				p = p[n:]
			}
			if done {
				return errCallEnded
			}
			return nil
		})
	}
	resp, err := s.Call(ctx, req)
	mu.Lock()
	done = true
	mu.Unlock()
	if err != nil {
		return err
	}
	return stream.Send(&CallEvent{Event: &CallEvent_Response{Response: resp}})
}

// maxOutputPiece bounds the output a CallEvent carries: its message then
// fits gRPC's pooled 32 KiB buffers at both ends, where a larger one takes
// a 1 MiB buffer from the pool for as long as it is queued.
const maxOutputPiece = 32<<10 - 64

var errCallEnded = errors.New("the call has ended")

// toStatus carries err's code across the wire as a status detail.
func toStatus(err error) error {
	st := status.New(codes.Unknown, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: string(toolhost.CodeOf(err))}); derr == nil {
		st = d
	}
	return st.Err()
}

// Client is a [toolhost.Provider] that calls a plugin over gRPC.
type Client struct {
	rpc      ToolGroupClient
	noStream atomic.Bool // the plugin predates CallStream (protocol minor 4)
}

var _ toolhost.Provider = (*Client)(nil)

// NewClient returns a Provider calling the ToolGroup service on conn.
func NewClient(conn grpc.ClientConnInterface) *Client { return &Client{rpc: NewToolGroupClient(conn)} }

// Describe asks the plugin for its group. A spec larger than
// [toolhost.MaxSpecBytes] is refused with invalid_group_def.
func (c *Client) Describe(ctx context.Context, req *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	resp, err := c.rpc.Describe(ctx, &DescribeRequest{ProtocolMinor: toolhost.ProtocolMinor, Context: contextToProto(req.Context)},
		grpc.MaxCallRecvMsgSize(toolhost.MaxSpecBytes))
	if status.Code(err) == codes.ResourceExhausted {
		return nil, toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group spec is larger than the limit of %d bytes: %v", toolhost.MaxSpecBytes, status.Convert(err).Message())
	}
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	return groupFromProto(resp.GetGroup()), nil
}

// Configure passes the configuration to the plugin.
func (c *Client) Configure(ctx context.Context, req *toolhost.ConfigureRequest) error {
	_, err := c.rpc.Configure(ctx, &ConfigureRequest{ProtocolMinor: toolhost.ProtocolMinor, Config: req.Config, HostPaths: req.HostPaths,
		Sandbox: sandboxToProto(req.Sandbox)})
	return fromStatus(ctx, err)
}

// Call runs one tool in the plugin. When ctx carries a [Progress]
// ([toolhost.WithProgress]), the plugin's progress reports reach it, unless
// the plugin predates protocol minor 4; when it carries an [Output]
// ([toolhost.WithOutput]), the output the plugin streams reaches it, unless
// the plugin predates minor 6 (the result carries it then).
func (c *Client) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	in := &CallRequest{ProtocolMinor: toolhost.ProtocolMinor, Tool: req.Tool, Arguments: req.Arguments, Context: contextToProto(req.Context)}
	var began time.Time // of a traced call, whose spans come back
	if injectTrace(ctx, in.Context) {
		began = time.Now()
	}
	var (
		resp     *CallResponse
		err      error
		streamed bool
	)
	if p, o := toolhost.ProgressFrom(ctx), toolhost.OutputFrom(ctx); (p != nil || o != nil) && !c.noStream.Load() {
		in.StreamOutput = o != nil
		resp, err = c.callStream(ctx, in, p, o)
		if streamed = status.Code(err) != codes.Unimplemented; !streamed {
			c.noStream.Store(true)
		}
	}
	if !streamed {
		resp, err = c.rpc.Call(ctx, in)
	}
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	if !began.IsZero() && len(resp.GetSpans()) > 0 { // spans the host did not ask for are dropped
		replay(ctx, resp.GetSpans(), began, time.Now())
	}
	return resultFromProto(resp.GetResult())
}

// callStream runs a call through CallStream, passing its progress to p and
// its output to o (each nil when the caller takes none).
func (c *Client) callStream(ctx context.Context, in *CallRequest, p toolhost.Progress, o toolhost.Output) (*CallResponse, error) {
	stream, err := c.rpc.CallStream(ctx, in)
	if err != nil {
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil, status.Error(codes.Internal, "the plugin ended the call's stream without a response")
		}
		if err != nil {
			return nil, err
		}
		switch e := ev.GetEvent().(type) {
		case *CallEvent_Progress:
			if p != nil {
				p(e.Progress.GetProgress(), e.Progress.GetTotal(), e.Progress.GetMessage())
			}
		case *CallEvent_Output:
			if o == nil {
				return nil, status.Error(codes.Internal, "the plugin streamed output the host did not ask for")
			}
			if err := o(e.Output.GetStderr(), e.Output.GetData()); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		case *CallEvent_Response:
			return e.Response, nil
		}
	}
}

// fromStatus maps a gRPC error back to a toolhost error: the code the plugin
// sent, timeout or cancelled when the caller's context ended, plugin_exited
// when the connection is gone.
func fromStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			return &toolhost.Error{Code: toolhost.Code(info.GetReason()), Message: st.Message()}
		}
	}
	switch {
	case ctx.Err() != nil:
		return toolhost.Errorf(toolhost.CodeOf(ctx.Err()), "plugin call: %w", ctx.Err())
	case st.Code() == codes.DeadlineExceeded:
		return toolhost.Errorf(toolhost.CodeTimeout, "%s: %w", st.Message(), context.DeadlineExceeded)
	case st.Code() == codes.Canceled:
		return toolhost.Errorf(toolhost.CodeCancelled, "%s: %w", st.Message(), context.Canceled)
	case st.Code() == codes.Unavailable:
		return toolhost.Errorf(toolhost.CodePluginExited, "plugin unreachable: %s", st.Message())
	}
	return toolhost.Errorf(toolhost.CodeInternal, "plugin: %s", st.Message())
}
