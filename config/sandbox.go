package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/toolhost/toolhost/sandbox"
)

var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "read_write"}, {Name: "read_only"}, {Name: "network"},
		{Name: "allow_hosts"}, {Name: "deny_hosts"}, {Name: "allow_private"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "limits"}},
}

var sandboxLimitsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "processes"}, {Name: "memory_mb"}, {Name: "cpu_seconds"}, {Name: "file_size_mb"}, {Name: "open_files"},
}}

// sandbox decodes a plugin or builtin block's sandbox: a `sandbox { ... }`
// block, or the attribute sandbox = "off"; nil when there is neither.
func (d *decoder) sandbox(content *hcl.BodyContent) *sandbox.Policy {
	var off *sandbox.Policy
	attr(d, content.Attributes, "sandbox", &off, sandboxOff)
	blk := d.onlyBlock(content.Blocks.OfType("sandbox"))
	if blk == nil {
		return off
	}
	p := d.sandboxBlock(blk)
	if a, ok := content.Attributes["sandbox"]; ok {
		d.fail(a.Range, "Conflicting sandbox settings",
			fmt.Sprintf("sandbox = ... and the sandbox block at %s contradict each other: keep one.", position(blk.DefRange)))
		return nil
	}
	return p
}

// sandboxBlock decodes a `sandbox { ... }` block and checks the policy as a
// whole once its attributes are valid.
func (d *decoder) sandboxBlock(blk *hcl.Block) *sandbox.Policy {
	before := len(d.diags)
	p := &sandbox.Policy{}
	content, diags := blk.Body.Content(sandboxSchema)
	d.add(diags)
	attrs := content.Attributes
	attr(d, attrs, "read_write", &p.ReadWrite, d.paths)
	attr(d, attrs, "read_only", &p.ReadOnly, d.paths)
	attr(d, attrs, "network", &p.Network, networkMode)
	attr(d, attrs, "allow_hosts", &p.AllowHosts, asIs)
	attr(d, attrs, "deny_hosts", &p.DenyHosts, asIs)
	attr(d, attrs, "allow_private", &p.AllowPrivate, asIs)
	if lim := d.onlyBlock(content.Blocks.OfType("limits")); lim != nil {
		content, diags := lim.Body.Content(sandboxLimitsSchema)
		d.add(diags)
		l := &p.Limits
		for _, f := range []struct {
			name string
			dst  *int
		}{{"processes", &l.Processes}, {"memory_mb", &l.MemoryMB}, {"cpu_seconds", &l.CPUSeconds}, {"file_size_mb", &l.FileSizeMB}, {"open_files", &l.OpenFiles}} {
			attr(d, content.Attributes, f.name, f.dst, asIs)
		}
	}
	if len(d.diags) == before {
		if err := p.Validate(); err != nil {
			d.fail(blk.DefRange, "Invalid sandbox block", strings.TrimPrefix(err.Error(), "sandbox: ")+".")
		}
	}
	return p
}

// sandboxOff accepts the one value the sandbox attribute may have.
func sandboxOff(s string) (*sandbox.Policy, error) {
	if s != "off" {
		return nil, fmt.Errorf(`%q is not "off": write a sandbox { ... } block to configure the sandbox, or sandbox = "off" to run the module unconfined`, s)
	}
	return &sandbox.Policy{Off: true}, nil
}

// networkMode accepts the networks of a sandbox.
func networkMode(s string) (sandbox.Network, error) {
	s, err := oneOf(string(sandbox.NetworkNone), string(sandbox.NetworkAllowed), string(sandbox.NetworkHost))(s)
	return sandbox.Network(s), err
}

// paths resolves each of a list of paths against the file's directory.
func (d *decoder) paths(ps []string) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		var err error
		if out[i], err = d.path(p); err != nil {
			return nil, errors.New("a path in the list is empty")
		}
	}
	return out, nil
}
