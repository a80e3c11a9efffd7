// An MCP client built on the official TypeScript SDK (1.x) that signs in
// the standard way: node client.mjs URL CLIENT_ID CLIENT_SECRET. It
// connects to URL without a token, follows the 401's resource metadata to
// the authorization server, gets a client-credentials token for the
// resource (ClientCredentialsProvider), then prints one JSON line
// {"tools": [names]} and exits; on failure {"error": "..."} and exit 1.
// The SDK comes from the npm cache directory TOOLHOST_NPM_DIR (ESM ignores
// NODE_PATH, so it is imported by absolute path).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const sdk = path.join(process.env.TOOLHOST_NPM_DIR, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const load = (rel) => import(pathToFileURL(path.join(sdk, rel)).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { ClientCredentialsProvider } = await load('client/auth-extensions.js');

const [url, clientId, clientSecret] = process.argv.slice(2);
try {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope: 'toolhost' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  const client = new Client({ name: 'oidc-ts-client', version: '1.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  console.log(JSON.stringify({ tools: tools.map((t) => t.name) }));
  await client.close();
} catch (err) {
  console.log(JSON.stringify({ error: String(err?.stack ?? err) }));
  process.exit(1);
}
