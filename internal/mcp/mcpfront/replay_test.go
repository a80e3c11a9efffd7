package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replayed returns what After yields for a stream, and its error.
func replayed(s *replayStore, session, stream string, index int) ([]string, error) {
	var out []string
	for d, err := range s.After(context.Background(), session, stream, index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	return out, nil
}

// TestReplayStoreBounded: the store keeps the messages of the latest
// streams within its bytes and streams, dropping the oldest stream whole;
// a dropped stream cannot be replayed, and what it sends later is not kept
// (Append fails, so the SDK counts a message delivered only when it reached
// the client); a closed session's streams are gone.
func TestReplayStoreBounded(t *testing.T) {
	ctx := context.Background()
	s := newReplayStore(10, 3)
	_ = s.Open(ctx, "a", "1")
	for _, m := range []string{"", "abc", "de"} {
		if err := s.Append(ctx, "a", "1", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := replayed(s, "a", "1", 0); err != nil || fmt.Sprint(got) != "[abc de]" {
		t.Errorf("after the priming event: %q, %v", got, err)
	}
	// More bytes than the bound: the oldest stream goes.
	_ = s.Open(ctx, "b", "1")
	if err := s.Append(ctx, "b", "1", []byte("123456")); err != nil {
		t.Fatal(err)
	}
	if _, err := replayed(s, "a", "1", 0); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Errorf("the dropped stream: %v, want ErrEventsPurged", err)
	}
	if err := s.Append(ctx, "a", "1", []byte("f")); err == nil {
		t.Error("a message of a dropped stream was taken")
	}
	if s.bytes != 6 {
		t.Errorf("%d bytes kept, want 6", s.bytes)
	}
	// More streams than the bound: the oldest goes.
	for _, id := range []string{"2", "3", "4"} {
		_ = s.Open(ctx, "b", id)
	}
	if s.order.Len() != 3 {
		t.Errorf("%d streams kept, want 3", s.order.Len())
	}
	if _, err := replayed(s, "b", "1", -1); err == nil {
		t.Error("the oldest stream of four is still kept")
	}
	if got, err := replayed(s, "b", "4", -1); err != nil || len(got) != 0 {
		t.Errorf("a new stream: %q, %v", got, err)
	}
	if err := s.SessionClosed(ctx, "b"); err != nil || len(s.streams) != 0 || s.order.Len() != 0 || s.bytes != 0 {
		t.Errorf("after b closed: %d sessions, %d streams (%v)", len(s.streams), s.order.Len(), err)
	}
}
