# The default deployment: `scripts/run` builds everything and serves this file.
# Relative paths resolve against this file's directory, which is also the
# working directory of every plugin. See README.md for the reference.

listen     = "127.0.0.1:8741"  # TOOLHOST_LISTEN overrides
data_dir   = "data"            # TOOLHOST_DATA_DIR overrides
plugin_dir = "bin/plugins"     # TOOLHOST_PLUGIN_DIR overrides

limits {
  timeout          = "30s"
  max_output_lines = 2000
  max_output_bytes = 51200
}

# First-party modules with reserved ids.
builtin "workspace" {
  # Without roots the workspace is this directory.
  config {}
}

builtin "command" {
  config {
    timeout_seconds = 60
  }
}

# Chromium starts on the first call; without it the tools say what to install.
plugin "chrome" {
  path    = "chrome"
  restart = "on-failure"
}

# A third-party module, built by scripts/build from examples/notes:
# plugin "notes" {
#   path = "notes"
#   config {
#     max_notes = 100
#   }
# }
