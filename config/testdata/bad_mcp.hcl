mcp_server "neither" {
}

mcp_server "both" {
  command = "npx"
  url     = "https://mcp.example.com/mcp"
}

mcp_server "http-with-process" {
  url  = "https://mcp.example.com/mcp"
  args = ["x"]
  sandbox {}
}

mcp_server "stdio-with-headers" {
  command = "npx"
  headers = { X = "y" }
}

mcp_server "bad-url" {
  url = "file:///etc/passwd"
}

mcp_server "bad-prefix" {
  command     = "npx"
  tool_prefix = "Fs-"
  config {}
}

mcp_server "fs" {
  command = "npx"
}

mcp_server "bad-requests" {
  command         = "npx"
  client_requests = ["logging", "smapling"]
}

mcp_server "twice" {
  command         = "npx"
  client_requests = ["sampling", "sampling"]
}

plugin "not-mcp" {
  path            = "x"
  client_requests = ["sampling"]
}

plugin "fs" {
  path = "fs"
}
