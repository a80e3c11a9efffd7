package host

import (
	"slices"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
)

// selfConfined names the builtin modules that confine the processes they
// start themselves: their block's sandbox is sent to them
// (ConfigureRequest.Sandbox) rather than applied to their own process,
// which must stay free to make sandboxes.
var selfConfined = map[string]bool{"command": true}

// confinesOwn reports whether the block's module applies its sandbox itself.
func confinesOwn(p *config.Plugin) bool {
	return p.Kind == config.KindBuiltin && selfConfined[p.Name]
}

// sandboxOf is the sandbox the block's process runs in: its policy with the
// host's paths hidden; nil without a sandbox block, with sandbox = "off",
// and for a module that confines what it starts itself.
func (h *Host) sandboxOf(p *config.Plugin) *sandbox.Policy {
	if p.Sandbox == nil || p.Sandbox.Off || confinesOwn(p) {
		return nil
	}
	pol := *p.Sandbox
	pol.Hidden = append(slices.Clone(pol.Hidden), h.hostPaths()...)
	return &pol
}

// moduleSandbox is the sandbox sent to the block's module
// (ConfigureRequest.Sandbox): its block's, for a module that confines what
// it starts; nil for the others.
func moduleSandbox(p *config.Plugin) *sandbox.Policy {
	if confinesOwn(p) {
		return p.Sandbox
	}
	return nil
}

// logSandboxes says at start how each block is confined: a warning for a
// plugin block without a sandbox, for sandbox = "off" and for each way a
// sandbox is looser than the default; and once, at info level, what
// sandbox this machine gives, when a block is sandboxed or a module
// sandboxes what it starts. Builtin blocks without a sandbox block are
// first-party: no warning.
func (h *Host) logSandboxes() {
	status := false
	for i := range h.cfg.Plugins {
		p := &h.cfg.Plugins[i]
		log := h.log.With("plugin", p.Name)
		switch {
		case p.Sandbox != nil:
			for _, l := range p.Sandbox.Loosened() {
				log.Warn("sandbox: " + l)
			}
			status = status || !p.Sandbox.Off
		case p.Kind == config.KindPlugin:
			log.Warn(`sandbox: runs unconfined: confine it with a sandbox { } block, or write sandbox = "off" to run it so on purpose`)
		}
		status = status || confinesOwn(p)
	}
	if status {
		h.log.Info("sandbox", "status", sandbox.Status())
	}
}
