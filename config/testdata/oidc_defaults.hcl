auth {
  oidc {
    issuer   = "http://127.0.0.1:9000"
    audience = "http://127.0.0.1:8741"
  }
}
