builtin "workspace" {}

plugin "notes" {
  path = "notes"
}

plugin "notes" {
  path = "notes2"
}

plugin "workspace" {
  path = "ws"
}
