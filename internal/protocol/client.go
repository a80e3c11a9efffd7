package protocol

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client is a toolhost.Provider that calls a plugin over gRPC.
type Client struct {
	rpc      pb.ToolGroupClient
	noStream atomic.Bool // the plugin predates CallStream (protocol minor 4)
}

var _ toolhost.Provider = (*Client)(nil)

// NewClient returns a Provider calling the ToolGroup service on conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: pb.NewToolGroupClient(conn)}
}

// Describe asks the plugin for its group. A spec larger than the limit
// (4 MiB on the wire) is refused with invalid_group_def.
func (c *Client) Describe(ctx context.Context, req *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	resp, err := c.rpc.Describe(ctx, &pb.DescribeRequest{ProtocolMinor: protocolMinor, Context: contextToProto(req.Context)},
		grpc.MaxCallRecvMsgSize(maxSpecBytes))
	if status.Code(err) == codes.ResourceExhausted {
		return nil, toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group spec is larger than the limit of %d bytes: %v", maxSpecBytes, status.Convert(err).Message())
	}
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	return groupFromProto(resp.GetGroup()), nil
}

// Configure passes the configuration to the plugin.
func (c *Client) Configure(ctx context.Context, req *toolhost.ConfigureRequest) error {
	_, err := c.rpc.Configure(ctx, &pb.ConfigureRequest{ProtocolMinor: protocolMinor, Config: req.Config, HostPaths: req.HostPaths,
		Sandbox: sandboxToProto(req.Sandbox)})
	return fromStatus(ctx, err)
}

// Call runs one tool in the plugin. When ctx carries a Progress
// (toolhost.WithProgress), the plugin's progress reports reach it, unless
// the plugin predates protocol minor 4; when it carries an Output
// (toolhost.WithOutput), the output the plugin streams reaches it, unless
// the plugin predates minor 6 (the result carries it then).
func (c *Client) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	in := &pb.CallRequest{ProtocolMinor: protocolMinor, Tool: req.Tool, Arguments: req.Arguments, Context: contextToProto(req.Context)}
	var began time.Time // of a traced call, whose spans come back
	if injectTrace(ctx, in.Context) {
		began = time.Now()
	}
	var (
		resp     *pb.CallResponse
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
func (c *Client) callStream(ctx context.Context, in *pb.CallRequest, p toolhost.Progress, o toolhost.Output) (*pb.CallResponse, error) {
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
		case *pb.CallEvent_Progress:
			if p != nil {
				p(e.Progress.GetProgress(), e.Progress.GetTotal(), e.Progress.GetMessage())
			}
		case *pb.CallEvent_Output:
			if o == nil {
				return nil, status.Error(codes.Internal, "the plugin streamed output the host did not ask for")
			}
			if err := o(e.Output.GetStderr(), e.Output.GetData()); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		case *pb.CallEvent_Response:
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
