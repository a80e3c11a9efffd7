package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// toolPrefixRE is what a tool_prefix may be: the start of a tool name.
var toolPrefixRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// mcpServer decodes an mcp_server block: a stdio server (command, args,
// env, sandbox) or an HTTP one (url, headers), never both.
func (d *decoder) mcpServer(blk *hcl.Block, declared map[string]hcl.Range) Plugin {
	p, content := d.module(blk, declared)
	attrs := content.Attributes
	attr(d, attrs, "command", &p.Path, d.command)
	attr(d, attrs, "url", &p.URL, httpURL)
	attr(d, attrs, "headers", &p.Headers, asIs)
	attr(d, attrs, "description", &p.Description, asIs)
	attr(d, attrs, "tool_prefix", &p.ToolPrefix, toolPrefix)
	attr(d, attrs, "client_requests", &p.ClientRequests, clientRequests)
	command, hasURL := attrs["command"], attrs["url"]
	switch {
	case command == nil && hasURL == nil:
		d.fail(blk.DefRange, "Missing command or url",
			"An mcp_server needs command (a stdio server) or url (a streamable HTTP server).")
	case command != nil && hasURL != nil:
		d.fail(hasURL.Range, "Conflicting command and url", "An mcp_server is either a stdio command or an HTTP url, not both.")
	case hasURL != nil:
		for _, a := range []string{"args", "env", "sandbox"} {
			if at, ok := attrs[a]; ok {
				d.fail(at.Range, "Not for an HTTP server", fmt.Sprintf("%s applies to a stdio server (command), which has a process.", a))
			}
		}
		if blks := content.Blocks.OfType("sandbox"); len(blks) > 0 {
			d.fail(blks[0].DefRange, "Not for an HTTP server", "An HTTP server has no process here to confine.")
		}
	case attrs["headers"] != nil:
		d.fail(attrs["headers"].Range, "Not for a stdio server", "headers are sent to an HTTP server (url).")
	}
	return p
}

// What an mcp_server may ask of the client that made a call, while the call
// runs, in its block's client_requests.
const (
	// ClientRequestLogging forwards the server's notifications/message.
	ClientRequestLogging = "logging"
	// ClientRequestElicitation forwards its elicitation/create requests.
	ClientRequestElicitation = "elicitation"
	// ClientRequestSampling forwards its sampling/createMessage requests:
	// a use of the client's model, at the client's cost, with a prompt the
	// server wrote. Never on unless the block says so.
	ClientRequestSampling = "sampling"
	// ClientRequestRoots forwards its roots/list requests: the client's
	// roots are paths on the client's machine, which a server beside the
	// host cannot reach, so toolhost answers with no roots unless the block
	// says so.
	ClientRequestRoots = "roots"
)

// MCPClientRequests returns what an mcp_server may ask of the client that
// made a call: its block's client_requests, or logging and elicitation
// when the block does not say.
func (p *Plugin) MCPClientRequests() []string {
	if p.ClientRequests == nil {
		return []string{ClientRequestLogging, ClientRequestElicitation}
	}
	return p.ClientRequests
}

// clientRequests accepts a list of what a server may ask of a client, each
// named once; an empty list forwards nothing.
func clientRequests(list []string) ([]string, error) {
	out := []string{}
	for _, r := range list {
		switch r {
		case ClientRequestLogging, ClientRequestElicitation, ClientRequestSampling, ClientRequestRoots:
		default:
			return nil, fmt.Errorf("%q is not one of %q, %q, %q and %q", r, ClientRequestLogging, ClientRequestElicitation, ClientRequestSampling, ClientRequestRoots)
		}
		if slices.Contains(out, r) {
			return nil, fmt.Errorf("%q is named twice", r)
		}
		out = append(out, r)
	}
	return out, nil
}

// command keeps a bare program name for a PATH lookup at start and
// resolves a path against the file's directory.
func (d *decoder) command(s string) (string, error) {
	if !strings.Contains(s, "/") {
		return nonEmpty(s)
	}
	return d.path(s)
}

// httpURL accepts an absolute http or https URL.
func httpURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http or https URL", s)
	}
	return s, nil
}

// toolPrefix accepts the start of a tool name.
func toolPrefix(s string) (string, error) {
	if !toolPrefixRE.MatchString(s) {
		return "", fmt.Errorf("%q must start with a lower-case letter and continue with up to 31 lower-case letters, digits or '_'", s)
	}
	return s, nil
}
