package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/server"
)

// Serving a host over HTTP: a host with one role and no modules, its
// server on a loopback port, and requests to the API with and without the
// admin token. A role from the config is read-only; one made through the
// API may name only groups the host has, and none means every group.
func Example() {
	const admin = "an-admin-token-of-32-characters!"
	cfg := &config.Config{
		Roles: []config.Role{{Name: "reader", Description: "Reads.", ToolGroups: []string{"notes"}}},
		Auth:  config.Auth{Token: admin},
	}
	h, err := host.New(cfg, nil) // no data directory: the store lives in a temporary one until Close
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.Start(context.Background()); err != nil {
		panic(err)
	}
	s, err := server.New(h, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s) // on 127.0.0.1
	defer srv.Close()

	do := func(method, path, token, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		fmt.Println(method, path, resp.StatusCode)
		if resp.StatusCode >= 400 {
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(out, &e); err != nil {
				panic(err)
			}
			fmt.Printf("  %s: %s\n", e.Error.Code, strings.TrimSpace(e.Error.Message))
			return
		}
		if path == "/api/roles" && method == "GET" {
			var roles []struct {
				Name       string   `json:"name"`
				ToolGroups []string `json:"toolGroups"`
				ReadOnly   bool     `json:"readOnly"`
			}
			if err := json.Unmarshal(out, &roles); err != nil {
				panic(err)
			}
			for _, r := range roles {
				fmt.Println(" ", r.Name, r.ToolGroups, r.ReadOnly)
			}
		}
	}
	do("GET", "/api/roles", "", "")
	do("POST", "/api/roles", admin, `{"name": "writer", "toolGroups": ["notes"]}`) // no module provides notes
	do("POST", "/api/roles", admin, `{"name": "writer", "description": "Writes."}`)
	do("GET", "/api/roles", admin, "")
	// Output:
	// GET /api/roles 401
	//   policy: the bearer token is not valid (never issued, or revoked)
	// POST /api/roles 400
	//   validation: toolGroups: unknown tool group(s) notes; the groups are:
	// POST /api/roles 201
	// GET /api/roles 200
	//   root [org_management] true
	//   reader [notes] true
	//   writer [] false
}
