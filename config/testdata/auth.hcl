listen = "0.0.0.0:8741"

auth {
  token = "s3cret-token"
}
