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

plugin "fs" {
  path = "fs"
}
