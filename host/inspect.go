package host

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
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
