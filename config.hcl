# The default deployment: `scripts/run` builds everything and serves this file.
# Relative paths resolve against this file's directory. See README.md for the
# reference.

listen     = "127.0.0.1:8741"  # TOOLHOST_LISTEN overrides
data_dir   = "data"            # TOOLHOST_DATA_DIR overrides
plugin_dir = "bin/plugins"     # TOOLHOST_PLUGIN_DIR overrides
# Agents work here, and nowhere that holds what the host trusts: the host
# refuses a config whose workspace, module roots or sandbox read_write paths
# hold this file, data_dir, plugin_dir or a module's executable.
workspace  = "workspace"       # TOOLHOST_WORKSPACE overrides

# Every module runs in a sandbox (bubblewrap + Landlock) unless its block says
# sandbox = "off": the system read-only, no host secrets, no data_dir, no
# network unless its block allows it. A sandbox { } block loosens it.

limits {
  timeout          = "30s"
  max_output_lines = 2000
  max_output_bytes = 51200
}

# The execution pipeline every call goes through.
executor {
  mode               = "sequential"  # batches: sequential | concurrent
  max_parallel       = 4
  approver           = "queue"       # queue (decide in the page or POST /api/approvals/{id}) | approve | deny
  approval_timeout   = "5m"          # a pending approval is denied after this
  idempotency_window = "24h"         # a repeated call id replays its result for this long
}

# First-party modules with reserved ids.
builtin "workspace" {
  # Without roots it works in the workspace above, which it alone may write.
  config {}
}

builtin "command" {
  config {
    timeout_seconds = 60
  }
  limits {
    timeout = "60s"          # this group's calls may run longer than the global 30s
  }
  # Every command runs in a sandbox: the system read-only, the workspace
  # read-write, the data directory hidden, no network. Loosen it here, e.g.:
  # sandbox {
  #   network     = "allowed"                  # through the network policy's proxy
  #   allow_hosts = ["mirror.example.com", "*.pkg.example.com"]
  # }
  # tool "run_command" { requires_approval = true }   # ask a person first
}

builtin "network" {
  # By default loopback, private, link-local and metadata addresses are refused
  # (the host's own API included); allow_hosts, deny_hosts and allow_private
  # change that, with the same keys in the chrome block.
  config {}
}

# Chromium starts on the first call; without it the tools say what to install.
# Every request of the browser goes through the same network policy twice:
# the plugin's own proxy, then the sandbox's, which applies the same rules.
# Say them once, in a config block here: e.g. a local development server:
#   config {
#     allow_hosts = ["127.0.0.1"]
#   }
plugin "chrome" {
  path    = "chrome"
  restart = "on-failure"
  sandbox {
    network = "allowed"      # the sandbox's proxy is the only way out
    limits {
      memory_mb = -1         # Chromium reserves far more address space than it uses
      processes = 2048       # and runs many threads
    }
  }
}

# Every HTTP route but /healthz needs a token, loopback included: the admin
# token is generated into data/admin.token (`toolhost token -url` prints the
# page's address with it); `toolhost tokens create -role R` makes role tokens.
# auth {
#   allowed_hosts = ["toolhost.example.com"]   # a reverse proxy's name
# }

# GET /metrics (Prometheus) needs the admin token or a metrics token
# (`toolhost tokens create -metrics`), unless public; see docs/operating.md.
# metrics {
#   public = true
# }

# Roles choose tool groups: an agent sees and may call only its role's tools.
# Roles declared here are read-only at run time: edit the block and restart
# `toolhost serve` (the file is read at start only). The page's New role,
# `toolhost roles create` and POST /api/roles make editable ones; a role's
# tokens are made on its page or with `toolhost tokens create`. The root role
# (org_management) always exists.
role "developer" {
  description = "Reads, writes and runs code in the workspace."
  prompt      = "You are a careful software developer."
  tool_groups = ["workspace", "command"]
}

role "researcher" {
  description = "Reads the web and the workspace; changes nothing."
  tool_groups = ["chrome", "workspace"]
  tools {
    read_only = true   # only the tools marked read-only (readOnlyHint): no write_file, edit_file, click …
  }
}

# Agents (toolhost run, POST /api/agents, the page's Agents view) ask a model
# for each step. The default is a scripted model, so that the demo runs
# offline: `bin/toolhost run -role root "Write a haiku"`. Point agents at any
# OpenAI-compatible server with the second block and `provider = "openai"`
# (or `toolhost run -provider openai`).
model "demo" {
  type   = "scripted"
  script = "demo/agents.json"
}

model "openai" {
  type     = "openai"
  base_url = env("OPENAI_BASE_URL")   # e.g. a local server's http://127.0.0.1:11434/v1
  model    = env("OPENAI_MODEL")
  api_key  = env("OPENAI_API_KEY")
  protocol = "native"                 # "json" for models without function calling
}

runtime {
  provider        = "demo"
  max_turns       = 50       # model calls per task
  max_wall_time   = "10m"    # per task
  max_tokens      = 1000000  # per task
  context_budget  = 128000
  no_progress     = 3        # the same tool call this many times in a row stops the agent
  max_bad_outputs = 3        # unusable replies in a row (each reported back first)
}

# Optional tools are hidden unless allowed; deny hides any tool. Entries name a
# tool, a group, or "group:plugins" (every third-party tool).
tools {
  allow = []
  deny  = []
}

# A third-party module, built by scripts/build from examples/notes:
# plugin "notes" {
#   path = "notes"
#   config {
#     max_notes = 100
#   }
# }
