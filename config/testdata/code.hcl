# Code mode's bounds: the config's for every role, a role's over them.
code {
  steps    = 500000
  timeout  = "2m"
  memory   = "128MiB"
  calls    = 20
  output   = "16KiB"
  parallel = 8
}

role "scripter" {
  tool_groups = ["workspace", "code"]
  code {
    calls  = 5
    output = 4096
  }
}
