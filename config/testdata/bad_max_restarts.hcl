plugin "notes" {
  path         = "notes"
  max_restarts = -1
}
