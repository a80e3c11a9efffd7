executor {
  approve = "read_only"
}

mcp_server "fs" {
  command     = "node_modules/.bin/mcp-server-filesystem"
  args        = ["/srv/ws"]
  env         = { LOG = "debug", TOKEN = env("TOKEN") }
  restart     = "always"
  description = "Files of the shared workspace."
  tool_prefix = "fs_"
  sandbox {
    read_write = ["/srv/ws"]
  }
  tool "fs_write_file" {
    requires_approval = true
    title             = "Write a file"
    destructive       = true
    open_world        = false
  }
  limits {
    timeout = "20s"
  }
}

mcp_server "memory" {
  command         = "npx"
  client_requests = ["logging", "elicitation", "sampling"]
}

mcp_server "remote" {
  url     = "https://mcp.example.com/mcp"
  headers = { Authorization = "Bearer ${env("TOKEN")}" }
}

mcp_server "quiet" {
  command         = "npx"
  client_requests = []
}
