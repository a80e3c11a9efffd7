auth {
  allowed_hosts = ["https://toolhost.example", "*.example.com", "host:8741"]
  disabled      = "maybe"
}
