// An MCP server of the 2026-07-28 era, built on the TypeScript SDK v2
// (@modelcontextprotocol/server), for the tests of mcp_server modules. It
// serves both eras, as the SDK's serving entries do: a client that sends
// server/discover gets 2026-07-28, one that sends initialize gets 2025.
//
//   node modern.mjs stdio   serveStdio on stdin and stdout
//   node modern.mjs http [PORT]
//                           createMcpHandler on 127.0.0.1, PORT or a free
//                           one; the endpoint's URL is the first line on
//                           stdout
//
// The SDK comes from the npm cache directory TOOLHOST_NPM_DIR, where the
// tests install it (ESM ignores NODE_PATH, so it is required from there).
// Tools:
//   echo {text}   the text
//   era           the era of the server instance that answered (modern or
//                 legacy) and the protocol version the request claimed
//   slow          a progress notification (1 of 2, "halfway"), then waits
//                 for the call's cancellation (60 s at most) and appends
//                 "cancelled" to the file TOOLHOST_TEST_CANCELLED names
//   add_tool      adds the tool "added" (answering "here") and announces
//                 the change: notifications/tools/list_changed, which the SDK
//                 delivers to subscriptions/listen streams in the 2026 era
//   big {lines}   that many numbered lines
// With TOOLHOST_TEST_TTL_MS set, the server announces no list changes
// (tools.listChanged false) and gives its tools/list results that ttlMs.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const npmDir = process.env.TOOLHOST_NPM_DIR;
if (!npmDir) {
  throw new Error('TOOLHOST_NPM_DIR is not set');
}
const require = createRequire(path.join(npmDir, 'node_modules', '/'));
const { McpServer, createMcpHandler } = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');
const z = require('zod');

const mode = process.argv[2];
let added = false; // add_tool was called: every instance from now on has "added"
let announce = () => {}; // tells connected clients that the tools changed

const text = (t) => ({ content: [{ type: 'text', text: t }] });

function addedTool(server) {
  server.registerTool('added', { description: 'Added by add_tool.' }, async () => text('here'));
}

const ttl = process.env.TOOLHOST_TEST_TTL_MS;
const options = ttl === undefined
  ? { capabilities: { tools: { listChanged: true } } }
  : { capabilities: { tools: { listChanged: false } }, cacheHints: { 'tools/list': { ttlMs: Number(ttl), cacheScope: 'public' } } };

function factory(ctx) {
  const server = new McpServer({ name: 'modern-test-server', title: 'A 2026 test server', version: '2.4.0-test' }, options);
  server.registerTool('echo', { description: 'Say the text back.', inputSchema: z.object({ text: z.string() }) },
    async ({ text: t }) => text(t));
  server.registerTool('era', { description: 'Say which era answered.' }, async (c) =>
    text(JSON.stringify({ era: ctx.era, protocolVersion: c.mcpReq.envelope?.['io.modelcontextprotocol/protocolVersion'] ?? null })));
  server.registerTool('slow', { description: 'Report progress, then wait to be cancelled.' }, async (c) => {
    const token = c.mcpReq._meta?.progressToken;
    if (token !== undefined) {
      await c.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2, message: 'halfway' } });
    }
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 60000);
      c.mcpReq.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        if (process.env.TOOLHOST_TEST_CANCELLED) {
          fs.appendFileSync(process.env.TOOLHOST_TEST_CANCELLED, 'cancelled\n');
        }
        resolve();
      });
    });
    return text('done waiting');
  });
  server.registerTool('add_tool', { description: 'Add the tool "added".' }, async () => {
    if (!added) {
      added = true;
      announce(server);
    }
    return text('added');
  });
  server.registerTool('big', { description: 'Many lines.', inputSchema: z.object({ lines: z.number() }) },
    async ({ lines }) => text(Array.from({ length: lines }, (_, i) => `line ${i + 1}`).join('\n')));
  if (added) {
    addedTool(server);
  }
  return server;
}

if (mode === 'stdio') {
  // One instance is pinned to the connection: the tool registered on it
  // makes the SDK send notifications/tools/list_changed (to the listen
  // subscriptions in the 2026 era, unsolicited in 2025).
  announce = (server) => addedTool(server);
  serveStdio(factory);
} else if (mode === 'http') {
  // An instance per request: later ones have the tool; the handler's bus
  // tells the open subscriptions/listen streams.
  const handler = createMcpHandler(factory);
  announce = () => handler.notify.toolsChanged();
  const server = http.createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const chunk of req) {
        chunks.push(chunk);
      }
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      }
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
      const response = await handler.fetch(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body, signal: abort.signal }));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.flushHeaders();
      if (response.body) {
        for await (const chunk of response.body) {
          res.write(chunk);
        }
      }
      res.end();
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(500);
      }
      res.end(String(err));
    }
  });
  server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
    process.stdout.write(`http://127.0.0.1:${server.address().port}/mcp\n`);
  });
} else {
  throw new Error(`mode ${mode}: want stdio or http`);
}
