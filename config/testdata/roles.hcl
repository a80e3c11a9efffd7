tools {
  allow = ["group:plugins", "memory_search"]
  deny  = ["run_command"]
}

role "developer" {
  description = "Writes and runs code."
  prompt      = "You are a careful developer."
  tool_groups = ["workspace", "command", "workspace"]
  tools {
    allow = ["notes"]
    deny  = ["http_request"]
  }
}

role "tester" {
  tool_groups = []
}

role "generalist" {
  description = "Every group."
}

role "researcher" {
  description = "Reads only."
  tool_groups = ["workspace", "chrome"]
  tools {
    read_only = true
  }
}
