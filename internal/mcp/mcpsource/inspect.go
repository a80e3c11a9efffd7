package mcpsource

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
)

// Inspection is what an MCP server would give as a group.
type Inspection struct {
	// Group is the group as an mcp_server block would register it.
	Group *toolhost.GroupSpec `json:"group"`
	// Names maps each tool name an agent would see to the server's own.
	Names map[string]string `json:"names"`
	// Refused are the server's tools that would not be offered, and why.
	Refused []string `json:"refused,omitempty"`
}

// Inspect starts the MCP server argv (a stdio command) or url (streamable
// HTTP), lists its tools as an mcp_server block with the tool prefix would,
// and stops it. `toolhost mcp inspect` and `mcp import` show what a server
// would give before a block loads it.
func Inspect(ctx context.Context, argv []string, url, prefix string, logger hclog.Logger) (*Inspection, error) {
	opts := Options{ID: "inspect", URL: url, ToolPrefix: prefix, Logger: logger, StartTimeout: 30 * time.Second}
	if len(argv) > 0 {
		opts.Command, opts.Args = argv[0], argv[1:]
	}
	srv, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	spec, err := srv.Describe(ctx, &toolhost.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	return &Inspection{Group: spec, Names: srv.Names(), Refused: srv.Refused()}, nil
}
