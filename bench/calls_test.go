package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// TestCheckEra: a session runs in its era or the path is refused, the
// client's silent fallback from 2026-07-28 to 2025-11-25 (a stateful
// go-sdk HTTP handler refuses the former) included.
func TestCheckEra(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	get := func(*http.Request) *mcp.Server { return srv }
	stateful := httptest.NewServer(mcp.NewStreamableHTTPHandler(get, nil))
	defer stateful.Close()
	stateless := httptest.NewServer(mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer stateless.Close()
	for _, tc := range []struct {
		name, url, version string
		wantErr            string // "" when the era holds
	}{
		{"2025 session", stateful.URL, mcpversion.Legacy, ""},
		{"2026 on a stateful handler falls back", stateful.URL, mcpversion.Stateless, `the server answered "2025-11-25"`},
		{"2026 sessionless", stateless.URL, mcpversion.Stateless, ""},
		{"2025 without a session id", stateless.URL, mcpversion.Legacy, "want one before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &mcp.StreamableClientTransport{Endpoint: tc.url}
			sess, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), tr, noopIn(tc.version).opts)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			err = checkEra(sess, tr, tc.version)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("checkEra: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
