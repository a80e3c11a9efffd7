// A real OpenID provider for the tests: npm's oidc-provider on loopback,
// with client-credentials clients and resource indicators whose access
// tokens are JWTs (RFC 9068) for the resource the client names.
//
// Run as `node provider.mjs` with NODE_PATH unused: the test passes the
// package's directory in OIDC_PROVIDER. Its stdin is JSON lines: the first
//   {"port": N, "clients": [{"id", "secret", "roles": [...], "scope"}],
//    "jwks": {"keys": [private JWKs]}, "ttl": seconds}
// starts the provider on 127.0.0.1:N (0: any port) and prints
// "issuer URL" on stdout; each later {"jwks": {...}} rotates its keys
// (a new Provider, the old keys no longer published). It exits when stdin
// ends, with the test. GET /test/jwks-fetches answers how many times its
// key set was fetched.
import http from 'node:http';
import readline from 'node:readline';

const { default: Provider } = await import(process.env.OIDC_PROVIDER);

let conf, issuer, provider, fetches = 0;

function build(jwks) {
  const roles = Object.fromEntries(conf.clients.map((c) => [c.id, c.roles]));
  const p = new Provider(issuer, {
    clients: conf.clients.map((c) => ({
      client_id: c.id,
      client_secret: c.secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'ES256',
      scope: c.scope,
    })),
    jwks,
    scopes: ['openid', 'toolhost', 'toolhost:admin'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (ctx, resource) => ({
          scope: 'toolhost toolhost:admin',
          audience: resource,
          accessTokenTTL: conf.ttl || 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
    extraTokenClaims: (ctx, token) => ({ toolhost_roles: roles[token.clientId] }),
  });
  p.on('server_error', (ctx, err) => console.error('oidc-provider:', err));
  return p;
}

const server = http.createServer((req, res) => {
  if (req.url === '/test/jwks-fetches') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ count: fetches }));
    return;
  }
  if (req.url === '/jwks') fetches++;
  provider.callback()(req, res);
});

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const msg = JSON.parse(line);
  if (!conf) {
    conf = msg;
    await new Promise((ok) => server.listen(conf.port, '127.0.0.1', ok));
    issuer = `http://127.0.0.1:${server.address().port}`;
    provider = build(msg.jwks);
    console.log(`issuer ${issuer}`);
  } else {
    provider = build(msg.jwks);
    console.log('rotated');
  }
}
process.exit(0);
