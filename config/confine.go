package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox"
)

// moduleLimits are the limits of a default module sandbox: the sandbox
// package's defaults, but no CPU time limit, since a module's process
// lives as long as the host and its CPU time only grows.
var moduleLimits = sandbox.Limits{CPUSeconds: -1}

// Confinement is the sandbox that block p's module process runs in: the
// block's own sandbox when it has one (Off for sandbox = "off"), else a
// default that confines it, so that a block which says nothing runs
// confined:
//   - the workspace builtin may write its roots, in its block's sandbox
//     too;
//   - the network builtin shares the host's network, whose every dial its
//     own network policy checks on the resolved address, and sees no files
//     but the system's;
//   - a plugin, and an mcp_server's command, see the system read-only and
//     their executable, with no network.
//
// A block's own sandbox has no CPU time limit unless it names one, as a
// module's process lives as long as the host. With network = "allowed" and
// no network rules of its own, its proxy applies those of the block's
// config {} (allow_hosts, deny_hosts, allow_private: see moduleNetwork), so
// that the one policy the operator wrote holds the module's process too,
// whatever the module does with it. Confinement is nil for an
// HTTP mcp_server (no process of the host's), and the command builtin's is
// its block's as written: that module confines the commands it runs with
// it, or with its own default when nil.
func (c *Config) Confinement(p *Plugin) *sandbox.Policy {
	workspace := p.Kind == KindBuiltin && p.Name == "workspace"
	switch {
	case p.Kind == KindBuiltin && p.Name == "command", p.Sandbox != nil && p.Sandbox.Off:
		return p.Sandbox // the command module's is for its commands
	case p.Sandbox != nil:
		pol := *p.Sandbox
		if pol.Limits.CPUSeconds == 0 { // a module's process lives as long as the host
			pol.Limits.CPUSeconds = moduleLimits.CPUSeconds
		}
		if pol.Network == sandbox.NetworkAllowed && !namesNetwork(pol.Config) {
			if rules, ok, err := moduleNetwork(p.Config); ok && err == nil {
				pol.Config = rules
			}
		}
		if workspace {
			pol.ReadWrite = append(slices.Clone(pol.ReadWrite), moduleRoots(p.Config, c.moduleDir())...)
		}
		return &pol
	case p.Kind == KindMCP && p.URL != "":
		return nil
	}
	pol := &sandbox.Policy{Limits: moduleLimits}
	switch {
	case workspace:
		pol.ReadWrite = moduleRoots(p.Config, c.moduleDir())
	case p.Kind == KindBuiltin && p.Name == "network":
		pol.Network = sandbox.NetworkHost
	case p.Kind == KindMCP && filepath.IsAbs(p.Path):
		pol.ReadOnly = []string{p.Path}
	}
	return pol
}

// moduleNetwork is the network policy a module's config {} (JSON) states:
// its allow_hosts, deny_hosts and allow_private, the keys of every module
// that reaches the network (netpolicy.Config). ok reports whether it names
// any of them; err, a value of the wrong type.
func moduleNetwork(raw json.RawMessage) (rules netpolicy.Config, ok bool, err error) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil {
		return rules, false, nil // not an object: it names no key
	}
	for _, k := range []string{"allow_hosts", "deny_hosts", "allow_private"} {
		_, named := keys[k]
		ok = ok || named
	}
	if ok {
		err = json.Unmarshal(raw, &rules)
	}
	return rules, ok, err
}

// namesNetwork reports whether c says anything: a policy that differs from
// the default.
func namesNetwork(c netpolicy.Config) bool {
	return len(c.AllowHosts) > 0 || len(c.DenyHosts) > 0 || c.AllowPrivate
}

// Unconfined reports whether block p's module process runs outside any
// sandbox: it says sandbox = "off".
func (c *Config) Unconfined(p *Plugin) bool {
	pol := c.Confinement(p)
	return pol != nil && pol.Off
}

// moduleDir is a module process's working directory: the config file's
// directory, or the host's own for a Config built in code.
func (c *Config) moduleDir() string {
	if c.File != "" {
		return filepath.Dir(c.File)
	}
	wd, _ := os.Getwd()
	return wd
}

// writablePaths is what block p's module may write: its sandbox's
// read_write paths, and for the first-party modules that agents write
// through, their roots and workdir (the command module's commands write
// there whatever its own process's confinement).
func (c *Config) writablePaths(p *Plugin) []string {
	var out []string
	if _, ok := workspaceKeys[p.Name]; ok && p.Kind == KindBuiltin {
		out = moduleRoots(p.Config, c.moduleDir())
	}
	if pol := c.Confinement(p); pol != nil && !pol.Off {
		for _, rw := range pol.ReadWrite {
			if !slices.Contains(out, rw) {
				out = append(out, rw)
			}
		}
	}
	return out
}
