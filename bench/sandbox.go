package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// sandboxResult is `run_command true` through two command plugins, one
// confining its commands (the default) and one with sandbox = "off", the
// calls alternating between them.
type sandboxResult struct {
	Sandboxed, Plain []time.Duration
	Status           string // sandbox.Status()
}

// overhead is what the sandbox adds to a command at the median.
func (s *sandboxResult) overhead() time.Duration { return median(s.Sandboxed) - median(s.Plain) }

// measureSandbox makes n calls of run_command true to each plugin, after a
// few untimed ones.
func measureSandbox(ctx context.Context, root, tmp string, n int) (*sandboxResult, error) {
	start := func(policy *sandbox.Policy) (*protocol.Process, error) {
		proc, err := protocol.Launch(protocol.Options{Path: filepath.Join(root, "bin/plugins/command"), Dir: tmp})
		if err != nil {
			return nil, err
		}
		cfg := fmt.Appendf(nil, `{"workdir": %q}`, tmp)
		if err := proc.Provider.Configure(ctx, &toolhost.ConfigureRequest{Config: cfg, Sandbox: policy}); err != nil {
			proc.Stop()
			return nil, err
		}
		return proc, nil
	}
	confined, err := start(nil)
	if err != nil {
		return nil, err
	}
	defer confined.Stop()
	plain, err := start(&sandbox.Policy{Off: true})
	if err != nil {
		return nil, err
	}
	defer plain.Stop()
	req := &toolhost.CallRequest{Tool: "run_command", Arguments: []byte(`{"command":"true"}`)}
	call := func(p *protocol.Process) (time.Duration, error) {
		t := time.Now()
		res, err := p.Provider.Call(ctx, req)
		if err == nil && !res.OK {
			err = fmt.Errorf("run_command true: %s", res.Error.Message)
		}
		return time.Since(t), err
	}
	r := &sandboxResult{Status: sandbox.Status()}
	for i := range n + 5 {
		for _, p := range []struct {
			proc *protocol.Process
			into *[]time.Duration
		}{{confined, &r.Sandboxed}, {plain, &r.Plain}} {
			d, err := call(p.proc)
			if err != nil {
				return nil, err
			}
			if i >= 5 {
				*p.into = append(*p.into, d)
			}
		}
	}
	logf("  sandboxed p50 %s, unsandboxed p50 %s: overhead %s", fmtDur(median(r.Sandboxed)), fmtDur(median(r.Plain)), fmtDur(r.overhead()))
	return r, nil
}
