auth {
  disabled = true
  oidc {
    issuer   = "https://idp.example.com"
    audience = "http://127.0.0.1:8741"
  }
}
