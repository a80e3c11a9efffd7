package config_test

import (
	"errors"
	"fmt"

	"github.com/toolhost/toolhost/config"
)

// noEnv keeps the examples' output the same whatever TOOLHOST_* variables
// the environment holds.
var noEnv = &config.Options{Getenv: func(string) string { return "" }}

// A config parsed from a string: a module and a role, with the defaults
// filled in and relative paths resolved against the file's directory.
func ExampleParse() {
	src := `
plugin "notes" {
  path = "notes-plugin"
  config {
    dir = "notes"
  }
  tool "delete_note" {
    requires_approval = true
  }
}

role "writer" {
  description = "Keeps the notes."
  tool_groups = ["notes"]
  rule "no-drafts" {
    tools  = ["delete_note"]
    when   = "args.title.startsWith(\"draft\")"
    action = "deny"
    reason = "drafts are kept"
  }
  limit "delete_note" {
    calls = 10
    per   = "1h"
  }
}
`
	cfg, err := config.Parse([]byte(src), "/etc/toolhost/config.hcl", noEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := cfg.Plugins[0]
	fmt.Println(p.Kind, p.Name, p.Path, string(p.Config), p.Restart)
	fmt.Println(p.Tools["delete_note"].RequiresApproval)
	r := cfg.Roles[0]
	fmt.Println(r.Name, r.ToolGroups, r.Rules[0].Name, r.Rules[0].Action, r.Limits[0].Calls, r.Limits[0].Per)
	fmt.Println(cfg.Listen, cfg.DataDir)
	// Output:
	// plugin notes /etc/toolhost/bin/plugins/notes-plugin {"dir":"notes"} on-failure
	// true
	// writer [notes] no-drafts deny 10 1h0m0s
	// 127.0.0.1:8741 /etc/toolhost/data
}

// Every problem in a file is reported at once, each at its line and column.
func ExampleDiagnostics() {
	src := `
role "root" {}
role "writer" {
  tool_groups = "notes"
}
`
	_, err := config.Parse([]byte(src), "config.hcl", noEnv)
	var ds config.Diagnostics
	if errors.As(err, &ds) {
		fmt.Println(len(ds), "problems:")
		fmt.Println(err)
	}
	// Output:
	// 2 problems:
	// config.hcl:2,6: Reserved role name: The root role always exists and cannot be declared; choose another name.
	// config.hcl:4,17: Incorrect attribute value type: Inappropriate value for attribute "tool_groups": list of string required, but have string.
}
