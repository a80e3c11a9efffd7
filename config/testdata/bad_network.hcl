# With network = "allowed", the sandbox's proxy applies the config block's
# allow_hosts, deny_hosts and allow_private: said twice, they are refused,
# and so are rules the proxy could not apply.
plugin "twice" {
  path = "a"
  config {
    allow_hosts = ["127.0.0.1"]
  }
  sandbox {
    network     = "allowed"
    allow_hosts = ["127.0.0.1"]
  }
}

plugin "wrong-type" {
  path = "b"
  config {
    deny_hosts = "10.0.0.0/8"
  }
  sandbox {
    network = "allowed"
  }
}

plugin "bad-entry" {
  path = "c"
  config {
    allow_hosts = ["not a host"]
  }
  sandbox {
    network = "allowed"
  }
}

# Without network = "allowed" the sandbox has no proxy: the module's own
# rules are its business.
plugin "no-network" {
  path = "d"
  config {
    allow_hosts = ["not a host"]
  }
  sandbox {}
}
