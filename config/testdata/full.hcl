# Every attribute toolhost understands.
listen     = "0.0.0.0:9000"
data_dir   = "var/data"
plugin_dir = "/opt/toolhost/plugins"

limits {
  timeout          = "1m30s"
  max_output_lines = 500
  max_output_bytes = 65536
}

builtin "workspace" {
  config {
    roots = ["/tmp/ws"]
  }
}

builtin "command" {
  path          = "/usr/libexec/toolhost/command"
  args          = ["--sandbox"]
  env           = { SHELL = "/bin/sh" }
  restart       = "always"
  max_restarts  = 0
  start_timeout = "2s"
}

plugin "notes" {
  path          = "notes"
  args          = ["-v", "--color=never"]
  env           = { NOTES_DIR = "/tmp/notes", _DEBUG = "1" }
  sha256        = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"
  restart       = "never"
  max_restarts  = 3
  start_timeout = "500ms"
  config {
    greeting = "hi"
    count    = 3
  }
}

plugin "fetch-2" {
  path = "../tools/fetch"
}

mcp {
  session_idle_timeout        = "10m"
  max_sessions_per_credential = 20
}
