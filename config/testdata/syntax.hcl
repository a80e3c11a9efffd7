listen = "127.0.0.1:8741"

plugin "notes" {
  path = "notes"
