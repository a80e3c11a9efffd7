package config

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolhost/toolhost/sandbox"
)

// TestSandboxTakesModuleNetwork: the network policy is said once, in a
// block's config {}: with network = "allowed", its sandbox's proxy applies
// the same rules, so that the module's process is held to what the
// operator wrote whatever the module does (it got the default rules before:
// any public host, no loopback). Without a proxy, and for the command
// module (whose sandbox is its commands'), nothing is taken.
func TestSandboxTakesModuleNetwork(t *testing.T) {
	src := `
plugin "chrome" {
  path = "chrome"
  config {
    allow_hosts   = ["127.0.0.1", "docs.example.com"]
    deny_hosts    = ["169.254.169.254"]
    allow_private = false
  }
  sandbox {
    network = "allowed"
  }
}
plugin "quiet" {
  path = "quiet"
  config {
    allow_hosts = ["127.0.0.1"]
  }
  sandbox {}
}
plugin "own-rules" {
  path = "own"
  sandbox {
    network     = "allowed"
    allow_hosts = ["mirror.example.com"]
  }
}
builtin "command" {
  sandbox {
    network = "allowed"
  }
}
`
	cfg, err := Parse([]byte(src), filepath.Join(t.TempDir(), "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	confined := map[string]*sandbox.Policy{}
	for i := range cfg.Plugins {
		confined[cfg.Plugins[i].Name] = cfg.Confinement(&cfg.Plugins[i])
	}
	if c := confined["chrome"]; !slices.Equal(c.AllowHosts, []string{"127.0.0.1", "docs.example.com"}) ||
		!slices.Equal(c.DenyHosts, []string{"169.254.169.254"}) || c.AllowPrivate || c.Network != sandbox.NetworkAllowed {
		t.Errorf("chrome's sandbox = %+v, want its config's rules", c)
	}
	if p := cfg.Plugins[0].Sandbox; len(p.AllowHosts) != 0 {
		t.Errorf("the block's sandbox was changed: %+v", p)
	}
	if c := confined["quiet"]; len(c.AllowHosts) != 0 || c.Validate() != nil {
		t.Errorf("a sandbox without network took rules: %+v", c)
	}
	if c := confined["own-rules"]; !slices.Equal(c.AllowHosts, []string{"mirror.example.com"}) {
		t.Errorf("a sandbox's own rules = %+v", c)
	}
	if c := confined["command"]; len(c.AllowHosts) != 0 {
		t.Errorf("the command module's sandbox = %+v", c)
	}
}
