store {
  quota      = "1 GiG"
  role_quota = "-5MiB"
}
