store {
  quota      = "off"
  role_quota = 1048576
}
