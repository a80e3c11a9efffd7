store {
  agent_retention = "500ms"
}
