plugin "notes" {
  path    = "notes"
  restart = "sometimes"
}
