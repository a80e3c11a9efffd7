auth {
  oidc {
    issuer          = "http://idp.example.com"
    roles_claim     = "realm_access..roles"
    required_scopes = ["two words"]
    clock_skew      = "10m"
    algorithms      = ["HS256"]
  }
  oidc {
    issuer   = "https://idp.example.com"
    audience = "https://toolhost.example.com#frag"
  }
}
