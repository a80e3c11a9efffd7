role "root" {}

role "has space" {}

role "dev" {
  tool_groups = ["Workspace"]
  colour      = "blue"
  tools {
    allow     = ["group:everything"]
    read_only = "maybe"
  }
}

role "dev" {
  tool_groups = "workspace"
}

tools {
  read_only = true
}
tools {}
