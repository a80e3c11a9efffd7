listen = "0.0.0.0:8741"

auth {
  disabled = true
}
