listen = "0.0.0.0:8741"

auth {
  token         = "s3cret-token-0123456789"
  allowed_hosts = ["ToolHost.example.", "10.0.0.5", "[::1]"]
}
