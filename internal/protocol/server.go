package protocol

import (
	"context"
	"errors"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorDomain marks a gRPC status detail as carrying a toolhost code.
const errorDomain = "toolhost"

// Register serves p as the ToolGroup service on s.
func Register(s *grpc.Server, p toolhost.Provider) { pb.RegisterToolGroupServer(s, &server{impl: p}) }

// server is the ToolGroup service of a plugin: it calls its provider.
type server struct {
	pb.UnimplementedToolGroupServer
	impl toolhost.Provider
}

func (s *server) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	spec, err := s.impl.Describe(ctx, &toolhost.DescribeRequest{Context: contextFromProto(req.GetContext())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeResponse{Group: groupToProto(spec)}, nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	box, err := sandboxFromProto(req.GetSandbox())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.Configure(ctx, &toolhost.ConfigureRequest{Config: req.GetConfig(), HostPaths: req.GetHostPaths(), Sandbox: box}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ConfigureResponse{}, nil
}

// Call runs a call; a traced one (protocol minor 5) runs under the
// handler's span, a child of the host's dispatch span, and its spans go
// back with the response.
func (s *server) Call(ctx context.Context, req *pb.CallRequest) (*pb.CallResponse, error) {
	end := func(string) []*pb.Span { return nil }
	if tctx, ok := extractTrace(ctx, req.GetContext()); ok {
		ctx, end = pluginTracing().begin(tctx, req.GetTool())
	}
	res, err := s.impl.Call(ctx, &toolhost.CallRequest{
		Tool: req.GetTool(), Arguments: req.GetArguments(), Context: contextFromProto(req.GetContext()),
	})
	if err == nil {
		var out *pb.Result
		if out, err = resultToProto(res); err == nil {
			var failed string
			if !res.OK && res.Error != nil {
				failed = string(res.Error.Code) + ": " + res.Error.Message
			} else if !res.OK {
				failed = "the tool failed"
			}
			return &pb.CallResponse{Result: out, Spans: end(failed)}, nil
		}
	}
	end(err.Error())
	return nil, toStatus(err)
}

// CallStream runs a call as Call does, with a Progress in its context that
// sends the tool's reports on the stream ahead of the response, and, when
// the host takes it so (stream_output), an Output that sends its output.
func (s *server) CallStream(req *pb.CallRequest, stream grpc.ServerStreamingServer[pb.CallEvent]) error {
	var (
		mu   sync.Mutex
		done bool
	)
	ctx := toolhost.WithProgress(stream.Context(), func(progress, total float64, message string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = stream.Send(&pb.CallEvent{Event: &pb.CallEvent_Progress{Progress: &pb.Progress{Progress: progress, Total: total, Message: message}}})
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
				if err := stream.Send(&pb.CallEvent{Event: &pb.CallEvent_Output{Output: &pb.Output{Stderr: stderr, Data: p[:n]}}}); err != nil {
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
	return stream.Send(&pb.CallEvent{Event: &pb.CallEvent_Response{Response: resp}})
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
