store {
  quota      = "2GiB"
  role_quota = "300MB"
}
