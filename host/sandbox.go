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

// sandboxOf is the sandbox the block's process runs in: its confinement
// (config.Config.Confinement: the block's sandbox, else a default that
// confines it) with the host's paths hidden; nil with sandbox = "off", for
// an HTTP mcp_server, and for a module that confines what it starts itself.
func (h *Host) sandboxOf(p *config.Plugin) *sandbox.Policy {
	conf := h.cfg.Confinement(p)
	if conf == nil || conf.Off || confinesOwn(p) {
		return nil
	}
	pol := *conf
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

// logSandboxes says at start how a sandbox block is looser than the
// default, for each block that has one: a warning for what lets a module
// out of its confinement (the host's network; sandbox = "off" is said at
// each launch instead, see warnUnconfined), and at info level the limits
// it lifts, which the block chose on purpose (config.hcl lifts chrome's
// memory_mb). Once, at info level, it says what sandbox this machine gives
// when any module runs confined. Blocks without a sandbox block run in
// their default confinement, said nowhere.
func (h *Host) logSandboxes() {
	status := false
	for i := range h.cfg.Plugins {
		p := &h.cfg.Plugins[i]
		if p.Sandbox != nil && !p.Sandbox.Off {
			log := h.log.With("plugin", p.Name)
			for _, l := range p.Sandbox.Loosened() {
				log.Warn("sandbox: " + l)
			}
			for _, name := range p.Sandbox.Unlimited() {
				log.Info("sandbox: no " + name + " limit, as its block says")
			}
		}
		status = status || h.sandboxOf(p) != nil || confinesOwn(p)
	}
	if status {
		h.log.Info("sandbox", "status", sandbox.Status())
	}
}

// warnUnconfined says, at each launch of a module whose block says
// sandbox = "off", that it runs unconfined.
func (s *supervisor) warnUnconfined() {
	if s.h.cfg.Unconfined(&s.cfg) {
		s.h.log.With("plugin", s.cfg.Name).Warn(`sandbox: starts unconfined (sandbox = "off"): it can read and write whatever the host can`)
	}
}
