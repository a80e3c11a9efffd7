plugin "bad-network" {
  path = "a"
  sandbox {
    network = "internet"
  }
}

plugin "unknown-key" {
  path = "b"
  sandbox {
    read_write = ["."]
    mounts     = ["/"]
    limits {
      threads = 4
    }
  }
}

plugin "both" {
  path    = "c"
  sandbox = "off"
  sandbox {}
}

plugin "rules-without-allowed" {
  path = "d"
  sandbox {
    allow_private = true
  }
}

plugin "on" {
  path    = "e"
  sandbox = "on"
}

plugin "bad-types" {
  path = "f"
  sandbox {
    read_only = "/etc"
    limits {
      memory_mb = 1.5
    }
  }
}

plugin "bad-host" {
  path = "g"
  sandbox {
    network    = "allowed"
    deny_hosts = ["http://x/"]
  }
}

plugin "empty-path" {
  path = "h"
  sandbox {
    read_write = [""]
  }
}
