plugin "notes" {
  args = ["-v"]
}
