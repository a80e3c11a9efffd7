package protocol

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// reporter is a provider whose tool reports three steps of progress.
type reporter struct{}

func (reporter) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	return &toolhost.GroupSpec{ID: "r"}, nil
}
func (reporter) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }
func (reporter) Call(ctx context.Context, _ *toolhost.CallRequest) (*toolhost.Result, error) {
	if p := toolhost.ProgressFrom(ctx); p != nil {
		for i, step := range []string{"a", "b", "c"} {
			p(float64(i+1), 3, step)
		}
	}
	return &toolhost.Result{OK: true, Stdout: "done"}, nil
}

// minor3 is a plugin built before protocol minor 4: it has no CallStream.
type minor3 struct {
	pb.ToolGroupServer
	streams *int
}

func (m minor3) CallStream(*pb.CallRequest, grpc.ServerStreamingServer[pb.CallEvent]) error {
	*m.streams++
	return pb.UnimplementedToolGroupServer{}.CallStream(nil, nil)
}

// dial serves srv on a unix socket and returns a client of it.
func dial(t *testing.T, srv pb.ToolGroupServer) *Client {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "plugin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterToolGroupServer(s, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return NewClient(conn)
}

// TestCallStreamCarriesProgress: a caller that wants progress gets the
// tool's reports, in order, then the result; a plugin older than protocol
// minor 4 answers the same call without them, and is asked through
// CallStream only once.
func TestCallStreamCarriesProgress(t *testing.T) {
	var got []string
	ctx := toolhost.WithProgress(context.Background(), func(done, total float64, msg string) {
		if total != 3 {
			t.Errorf("total %v", total)
		}
		got = append(got, msg)
	})
	req := &toolhost.CallRequest{Tool: "x"}

	res, err := dial(t, &server{impl: reporter{}}).Call(ctx, req)
	if err != nil || res.Stdout != "done" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("progress %q, want a, b, c", got)
	}

	got, streams := nil, 0
	old := dial(t, minor3{ToolGroupServer: &server{impl: reporter{}}, streams: &streams})
	for range 2 {
		if res, err := old.Call(ctx, req); err != nil || res.Stdout != "done" {
			t.Fatalf("old plugin: result %+v, %v", res, err)
		}
	}
	if len(got) != 0 || streams != 1 {
		t.Errorf("old plugin: progress %q, %d CallStream attempts, want none and 1", got, streams)
	}
}
