lisen = "127.0.0.1:1"

server {}

plugin "notes" {
  path    = "notes"
  command = "notes"
}

plugin {
  path = "unnamed"
}

builtin "workspace" "extra" {}
