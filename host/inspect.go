package host

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcpsource"
	"github.com/toolhost/toolhost/internal/protocol"
)

// Inspect starts the plugin executable at path, configures it with cfg (a
// JSON object; empty means {}), describes its group and stops it, registering
// nothing. The spec is returned even when it breaks the protocol's limits,
// together with the error saying how.
func Inspect(ctx context.Context, path string, cfg json.RawMessage, logger hclog.Logger) (*toolhost.GroupSpec, error) {
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	proc, err := protocol.Launch(protocol.Options{Path: path, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer proc.Stop()
	if err := proc.Provider.Configure(ctx, &toolhost.ConfigureRequest{Config: cfg}); err != nil {
		return nil, err
	}
	spec, err := proc.Provider.Describe(ctx, &toolhost.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	return spec, protocol.ValidateGroup(spec)
}

// MCPInspection is what an MCP server would give as a group.
type MCPInspection struct {
	// Group is the group as an mcp_server block would register it.
	Group *toolhost.GroupSpec `json:"group"`
	// Names maps each tool name an agent would see to the server's own.
	Names map[string]string `json:"names"`
	// Refused are the server's tools that would not be offered, and why.
	Refused []string `json:"refused,omitempty"`
}

// InspectMCP starts the MCP server argv (a stdio command) or url (streamable
// HTTP), lists its tools as an mcp_server block with the tool prefix would,
// and stops it, registering nothing.
func InspectMCP(ctx context.Context, argv []string, url, prefix string, logger hclog.Logger) (*MCPInspection, error) {
	opts := mcpsource.Options{ID: "inspect", URL: url, ToolPrefix: prefix, Logger: logger, StartTimeout: 30 * time.Second}
	if len(argv) > 0 {
		opts.Command, opts.Args = argv[0], argv[1:]
	}
	srv, err := mcpsource.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	spec, err := srv.Describe(ctx, &toolhost.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	return &MCPInspection{Group: spec, Names: srv.Names(), Refused: srv.Refused()}, nil
}
