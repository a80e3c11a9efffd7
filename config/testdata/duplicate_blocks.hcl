limits {
  timeout = "1s"
}

limits {
  timeout = "2s"
}

plugin "notes" {
  path = "notes"
  config {
    a = 1
  }
  config {
    b = 2
  }
}
