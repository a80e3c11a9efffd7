role "developer" {
  tool_groups = ["workspace", "command"]
  rule "no_sudo" {
    tools  = ["run_command"]
    when   = "args.command.contains('sudo')"
    action = "deny"
    reason = "no sudo here"
  }
  rule "src_only" {
    tools  = ["write_file", "edit_file"]
    when   = "!path.clean(args.path).startsWith('src/')"
    action = "approve"
  }
  rule "reads" {
    tools  = ["group:workspace"]
    action = "allow"
  }
  rule "known_hosts" {
    tools  = ["http_request"]
    when   = "!(url.host(args.url) in ['example.com', 'docs.example.com'])"
    action = "deny"
  }
  limit "run_command" {
    calls = 5
    per   = "1m"
  }
  limit "group:workspace" {
    calls = 100
    per   = "1h"
  }
  limit "*" {
    calls = 1000
    per   = "24h"
  }
}
