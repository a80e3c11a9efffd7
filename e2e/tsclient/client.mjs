// An MCP client built on the official TypeScript SDK, driven by a Go test
// (e2e/tsclient_test.go) one step at a time.
//
//   node client.mjs http URL          streamable HTTP, the bearer token in TOOLHOST_TOKEN
//   node client.mjs stdio CMD ARGS... CMD spawned with StdioClientTransport
//
// The SDK and ajv come from the npm cache directory TOOLHOST_NPM_DIR, where
// scripts/test installs them (ESM ignores NODE_PATH, so they are imported by
// absolute path). The client connects, prints one JSON line
// {"ok": true, "instructions": ..., "serverVersion": ...}, then reads one JSON
// request a line from stdin and answers each with one JSON line on stdout:
//
//   {"op": "tools"}                              the tools as listed (and cached by the SDK)
//   {"op": "call", "name", "arguments", "progress": bool}
//       the result, the progress notifications received (each with at, the
//       milliseconds since the call began), the SDK's errors meanwhile, and,
//       when the listed tool has an outputSchema, ajv's verdict on
//       structuredContent
//   {"op": "start", "id", "name", "arguments"}  starts a call and answers at once
//   {"op": "abort", "id"}                       aborts it (the SDK sends
//       notifications/cancelled) and answers with how the call ended
//   {"op": "ping"}
//
// An answer is {"ok": true, ...} or {"ok": false, "error": "..."}. Stdin's
// end closes the client.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const npmDir = process.env.TOOLHOST_NPM_DIR;
if (!npmDir) {
  throw new Error('TOOLHOST_NPM_DIR is not set');
}
const sdkDir = path.join(npmDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const sdk = (file) => import(pathToFileURL(path.join(sdkDir, file)).href);
const { Client } = await sdk('client/index.js');
const require = createRequire(path.join(npmDir, 'node_modules', '/'));
const addFormats = require('ajv-formats').default;

const [transportName, ...rest] = process.argv.slice(2);
let transport;
if (transportName === 'http') {
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOOLHOST_TOKEN}` } },
  });
} else if (transportName === 'stdio') {
  const { StdioClientTransport } = await sdk('client/stdio.js');
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, cwd: process.cwd(), stderr: 'inherit' });
} else {
  throw new Error(`transport ${transportName}: want http or stdio`);
}

const client = new Client({ name: 'toolhost-e2e-ts', version: '1.0.0' });
// What the SDK reports outside a request's answer (a progress notification
// for a token it no longer knows, say); each call answers with the ones
// reported while it ran.
let errors = [];
client.onerror = (err) => errors.push(String(err?.message ?? err));
const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
await client.connect(transport);
reply({ ok: true, instructions: client.getInstructions(), serverVersion: client.getServerVersion() });

// validate checks data against schema with an ajv of the schema's draft,
// independently of the SDK's own check.
function validate(schema, data) {
  const draft2020 = String(schema.$schema ?? '').includes('2020-12');
  const Ajv = draft2020 ? require('ajv/dist/2020').default : require('ajv').default;
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  const check = ajv.compile(schema);
  const valid = check(data);
  return { valid, errors: check.errors ? ajv.errorsText(check.errors) : '', draft2020 };
}

let tools = new Map();
const running = new Map(); // id → {controller, done}

async function handle(req) {
  switch (req.op) {
    case 'tools': {
      const res = await client.listTools();
      tools = new Map(res.tools.map((t) => [t.name, t]));
      return { tools: res.tools };
    }
    case 'call': {
      const progress = [];
      errors = [];
      const start = performance.now();
      const options = req.progress ? { onprogress: (p) => progress.push({ ...p, at: Math.round(performance.now() - start) }) } : {};
      let result, sdkError;
      try {
        result = await client.callTool({ name: req.name, arguments: req.arguments ?? {} }, undefined, options);
      } catch (err) {
        sdkError = String(err?.message ?? err);
      }
      const out = { result, sdkError, progress, errors };
      const schema = tools.get(req.name)?.outputSchema;
      if (schema && result?.structuredContent !== undefined) {
        out.ajv = validate(schema, result.structuredContent);
      }
      return out;
    }
    case 'start': {
      const controller = new AbortController();
      const done = client
        .callTool({ name: req.name, arguments: req.arguments ?? {} }, undefined, { signal: controller.signal })
        .then((result) => ({ result }), (err) => ({ callError: String(err?.message ?? err) }));
      running.set(req.id, { controller, done });
      return {};
    }
    case 'abort': {
      const call = running.get(req.id);
      if (!call) {
        throw new Error(`no call ${req.id}`);
      }
      running.delete(req.id);
      call.controller.abort('the e2e test aborts it');
      return await call.done;
    }
    case 'ping':
      await client.ping();
      return {};
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  try {
    reply({ ok: true, ...(await handle(JSON.parse(line))) });
  } catch (err) {
    reply({ ok: false, error: String(err?.stack ?? err) });
  }
}
await client.close();
