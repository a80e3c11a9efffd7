role "root" {}

role "has space" {}

role "dev" {
  tool_groups = ["Workspace"]
  colour      = "blue"
  tools {
    allow = ["group:everything"]
  }
}

role "dev" {
  tool_groups = "workspace"
}

tools {}
tools {}
