auth {
  token = "s3cret"
}
