# The sandbox block's keys, and sandbox = "off".
builtin "command" {
  sandbox {
    read_write = ["work", "/srv/shared"]
    read_only  = ["lib/../refs"]
    network    = "allowed"
    allow_hosts = ["example.com", "*.pkg.example.com"]
    deny_hosts  = ["bad.example.com"]
    limits {
      processes    = 64
      memory_mb    = 1024
      cpu_seconds  = -1
      file_size_mb = 10
      open_files   = 256
    }
  }
}

builtin "workspace" {}

plugin "notes" {
  path = "notes"
  sandbox {}
}

plugin "legacy" {
  path    = "legacy"
  sandbox = "off"
}

plugin "browser" {
  path = "browser"
  sandbox {
    network = "host"
  }
}
