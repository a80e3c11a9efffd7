plugin "notes" {
  path = "notes"
  env = {
    "1ST"   = "x"
    "A-B"   = "y"
    OK      = "z"
  }
}
