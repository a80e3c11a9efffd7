limits {
  timeout = "0s"
}

plugin "a" {
  path          = "a"
  start_timeout = "10"
}

plugin "b" {
  path          = "b"
  start_timeout = "-1s"
}
