store {
  quota      = "lots"
  role_quota = 0
}
