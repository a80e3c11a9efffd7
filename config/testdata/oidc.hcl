listen = "0.0.0.0:8741"

auth {
  allowed_hosts = ["toolhost.example.com"]
  oidc {
    issuer          = "https://idp.example.com/realms/tools"
    audience        = "https://toolhost.example.com"
    roles_claim     = "realm_access.roles"
    scopes_claim    = "scp"
    required_scopes = ["toolhost"]
    admin_role      = "toolhost-admin"
    admin_scope     = "toolhost:admin"
    clock_skew      = "30s"
    algorithms      = ["RS256", "ES256"]
  }
}
