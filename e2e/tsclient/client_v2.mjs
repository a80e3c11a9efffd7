// An MCP client built on the TypeScript SDK v2 (@modelcontextprotocol/client)
// and its tasks extension (@modelcontextprotocol/ext-tasks), driven by a Go
// test (e2e/tsclientv2_test.go) one step at a time, as client.mjs is for
// SDK 1.x.
//
//   node client_v2.mjs MODE http URL          streamable HTTP, the bearer token in TOOLHOST_TOKEN
//   node client_v2.mjs MODE stdio CMD ARGS... CMD spawned with StdioClientTransport
//
// MODE is the SDK's versionNegotiation: legacy (the plain 2025 initialize),
// auto (server/discover first, falling back to initialize) or a protocol
// version to pin (2026-07-28). The client declares the elicitation
// capability (form mode) and answers every elicitation with accept, filling
// the requested form with approving values; over 2026-07-28 the SDK meets an
// input_required result through the same handler (multi-round-trip
// requests) and retries the call.
//
// The packages come from the npm cache directory TOOLHOST_NPM_DIR (ESM
// ignores NODE_PATH, so they are imported by absolute path). The client
// connects, prints one JSON line {"ok": true, "instructions", "serverVersion",
// "era", "protocolVersion", "serverCapabilities"}, then reads one JSON request
// a line from stdin and answers each with one JSON line on stdout:
//
//   {"op": "tools"}                              the tools as listed
//   {"op": "call", "name", "arguments", "progress": bool}
//       the result (or what the SDK threw), the progress notifications, the
//       elicitations answered meanwhile, the SDK's errors meanwhile
//   {"op": "start", "id", "name", "arguments"}  starts a call and answers at once
//   {"op": "abort", "id"}                       aborts it and answers with how it ended
//   {"op": "task", "id", "name", "arguments", "timeoutMs"?}
//       calls the tool through ext-tasks, requiring a task (each of its
//       requests bounded by timeoutMs when given); answers with the
//       execution's kind and task id
//   {"op": "settle", "id", "timeoutMs"?}        waits for that task's outcome (at most
//       timeoutMs when given: then an answer {ok: false} saying it gave up)
//   {"op": "cancel", "id", "timeoutMs"?}        cancels it (tasks/cancel), then its outcome
//   {"op": "snapshot", "id"}                    one tasks/get of that task, through a
//       controller of its own: {task: {taskId, status, statusMessage}}, or
//       {snapshotError} when the server answered an error
//   {"op": "wire", "since"}                     what went over the wire since entry `since`:
//       {dir: "out"|"in", msg} for JSON-RPC messages, {dir: "http", ...} for
//       the HTTP requests (their MCP headers) and responses (status, type)
//   {"op": "hello"}                             the connect line's fields again
//   {"op": "alive"}                             ping, or server/discover in 2026-07-28 (which has no ping)
//
// An answer is {"ok": true, ...} or {"ok": false, "error": "..."}. Stdin's
// end closes the client.
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const npmDir = process.env.TOOLHOST_NPM_DIR;
if (!npmDir) {
  throw new Error('TOOLHOST_NPM_DIR is not set');
}
const load = (rel) => import(pathToFileURL(path.join(npmDir, 'node_modules', rel)).href);
const sdk = await load('@modelcontextprotocol/client/dist/index.mjs');
const tasks = await load('@modelcontextprotocol/ext-tasks/dist/client/index.js');
const { Client, StreamableHTTPClientTransport } = sdk;

const [mode, transportName, ...rest] = process.argv.slice(2);
const negotiation = mode === 'legacy' || mode === 'auto' ? { mode } : { mode: { pin: mode } };

// The wire, as the client sees it.
const wire = [];
const headerNames = ['mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id', 'accept', 'content-type', 'last-event-id'];
async function recordingFetch(url, init = {}) {
  const headers = new Headers(init.headers);
  const entry = { dir: 'http', method: init.method ?? 'GET', headers: {} };
  for (const name of headerNames) {
    if (headers.has(name)) entry.headers[name] = headers.get(name);
  }
  if (typeof init.body === 'string') {
    try {
      entry.body = JSON.parse(init.body);
    } catch {
      entry.body = init.body;
    }
  }
  wire.push(entry);
  const res = await fetch(url, init);
  entry.status = res.status;
  entry.responseType = res.headers.get('content-type');
  entry.responseSession = res.headers.get('mcp-session-id');
  return res;
}

let transport;
if (transportName === 'http') {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOOLHOST_TOKEN}` } },
    fetch: recordingFetch,
  });
} else if (transportName === 'stdio') {
  const { StdioClientTransport } = await load('@modelcontextprotocol/client/dist/stdio.mjs');
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, cwd: process.cwd(), stderr: 'inherit' });
} else {
  throw new Error(`transport ${transportName}: want http or stdio`);
}

// Raw requests for ext-tasks: the SDK's codecs do not carry the tasks
// extension's 2026-07-28 wire shapes (a tools/call answered with
// resultType "task", tasks/get, tasks/cancel), so ext-tasks asks its host
// for a dispatch below the SDK, as the Inspector does: the request goes out
// on the transport with an id of our own, and its response is taken off the
// transport before the SDK sees it.
const raw = new Map(); // id → resolve
let rawCounter = 0;
async function rawDispatch(request, options = {}) {
  const id = `e2e-raw-${++rawCounter}`;
  const message = { jsonrpc: '2.0', id, method: request.method, ...(request.params === undefined ? {} : { params: request.params }) };
  // The caller's signal, and the request's timeout (requestTimeoutMs) when
  // the call asked for one.
  const timeout = options.context?.requestTimeoutMs;
  const signals = [options.signal, timeout ? AbortSignal.timeout(timeout) : undefined].filter(Boolean);
  const signal = signals.length ? AbortSignal.any(signals) : undefined;
  return await new Promise((resolve, reject) => {
    const onAbort = () => {
      raw.delete(id);
      reject(signal.reason ?? new Error('aborted'));
    };
    if (signal) {
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
    }
    raw.set(id, (response) => {
      signal?.removeEventListener('abort', onAbort);
      resolve('error' in response ? { kind: 'error', error: response.error } : { kind: 'result', result: response.result });
    });
    transport.send(message).catch((err) => {
      raw.delete(id);
      reject(err);
    });
  });
}

// Tap the transport: what it sends, and what it hands the SDK (the raw
// dispatch's responses taken off first). The instance is patched, not
// subclassed, so the SDK still treats a StdioClientTransport as its own (it
// probes on a sibling process only for the base class).
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  wire.push({ dir: 'out', msg: message });
  return send(message, options);
};
let handler;
const tapped = (message, extra) => {
  wire.push({ dir: 'in', msg: message });
  if (typeof message?.id === 'string' && raw.has(message.id) && ('result' in message || 'error' in message)) {
    const resolve = raw.get(message.id);
    raw.delete(message.id);
    resolve(message);
    return;
  }
  handler?.(message, extra);
};
Object.defineProperty(transport, 'onmessage', {
  configurable: true,
  get: () => (handler ? tapped : undefined),
  set: (h) => {
    handler = h;
  },
});

const clientInfo = { name: 'toolhost-e2e-ts-v2', version: '1.0.0' };
const clientCapabilities = { elicitation: { form: {} } };
const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: negotiation });
let errors = [];
client.onerror = (err) => errors.push(String(err?.message ?? err));

// Elicitations: each is recorded and accepted, its form filled with
// approving values.
let elicitations = [];
function approving(schema) {
  const content = {};
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) {
    const options = prop.enum ?? prop.oneOf?.map((o) => o.const) ?? prop.items?.enum;
    if (options?.length) {
      const yes = options.find((o) => /^(approve|approved|allow|yes|accept|once)/i.test(String(o))) ?? options[0];
      content[name] = prop.type === 'array' ? [yes] : yes;
    } else if (prop.type === 'boolean') {
      content[name] = true;
    } else if (prop.type === 'number' || prop.type === 'integer') {
      content[name] = prop.default ?? prop.minimum ?? 0;
    } else if (prop.type === 'string') {
      content[name] = prop.default ?? 'approved by the e2e test';
    }
  }
  return content;
}
client.setRequestHandler('elicitation/create', async (request) => {
  const params = request.params;
  const answer = { action: 'accept', content: approving(params.requestedSchema) };
  elicitations.push({ params, answer });
  return answer;
});

const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const hello = () => ({
  instructions: client.getInstructions(),
  serverVersion: client.getServerVersion(),
  era: client.getProtocolEra(),
  protocolVersion: client.getNegotiatedProtocolVersion(),
  serverCapabilities: client.getServerCapabilities(),
  discovered: client.getDiscoverResult() !== undefined,
});
try {
  await client.connect(transport);
} catch (err) {
  // What failed, and what went over the wire until then.
  reply({ ok: false, error: String(err?.stack ?? err), data: err?.data, wire });
  process.exit(1);
}
reply({ ok: true, ...hello() });

let session; // ext-tasks' session, made at the first task
async function taskSession() {
  if (!session) {
    session = tasks.createTaskSessionFromClient(client, {
      endpointId: await tasks.createTaskSessionEndpointId('toolhost-e2e', { transport: transportName, target: rest }),
      tools: { currentTool: () => undefined },
      ...(client.getProtocolEra() === 'modern'
        ? {
            rawDispatch,
            v2RequestFraming: { protocolVersion: client.getNegotiatedProtocolVersion(), clientInfo, clientCapabilities },
          }
        : {}),
      onError: (err) => errors.push(String(err?.message ?? err)),
    });
  }
  return session;
}

// outcome is a task outcome as JSON.
function outcome(o) {
  return {
    status: o.status,
    result: o.status === 'completed' ? o.result : undefined,
    error: o.status === 'failed' ? String(o.error?.message ?? o.error) : undefined,
    task: o.task ? { taskId: o.task.taskId, status: o.task.status, statusMessage: o.task.statusMessage } : undefined,
  };
}

// settleOptions are the options of settle for a request that may bound
// the wait (timeoutMs).
function settleOptions(req) {
  return req.timeoutMs ? { signal: AbortSignal.timeout(req.timeoutMs) } : {};
}

const running = new Map(); // id → {controller, done}
const executions = new Map(); // id → ext-tasks execution

async function handle(req) {
  switch (req.op) {
    case 'tools': {
      const res = await client.listTools(undefined, { cacheMode: 'bypass' });
      return { tools: res.tools, ttlMs: res.ttlMs, cacheScope: res.cacheScope };
    }
    case 'call': {
      const progress = [];
      errors = [];
      elicitations = [];
      const start = performance.now();
      const options = req.progress ? { onprogress: (p) => progress.push({ ...p, at: Math.round(performance.now() - start) }) } : {};
      let result, sdkError;
      try {
        result = await client.callTool({ name: req.name, arguments: req.arguments ?? {} }, options);
      } catch (err) {
        sdkError = String(err?.message ?? err);
      }
      return { result, sdkError, progress, errors, elicitations };
    }
    case 'start': {
      const controller = new AbortController();
      const done = client
        .callTool({ name: req.name, arguments: req.arguments ?? {} }, { signal: controller.signal })
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
    case 'task': {
      const s = await taskSession();
      const execution = await s.callTool(req.name, req.arguments ?? {}, {
        task: { preference: 'require' },
        ...(req.timeoutMs ? { requestTimeoutMs: req.timeoutMs } : {}),
      });
      executions.set(req.id, execution);
      return { kind: execution.kind, taskId: execution.handle?.taskId };
    }
    case 'settle': {
      const execution = executions.get(req.id);
      if (!execution) {
        throw new Error(`no task ${req.id}`);
      }
      const { outcome: o } = await execution.settle(settleOptions(req));
      return { outcome: outcome(o) };
    }
    case 'cancel': {
      const execution = executions.get(req.id);
      if (!execution) {
        throw new Error(`no task ${req.id}`);
      }
      await execution.cancel();
      const { outcome: o } = await execution.settle(settleOptions(req));
      return { outcome: outcome(o) };
    }
    case 'snapshot': {
      const execution = executions.get(req.id);
      if (!execution) {
        throw new Error(`no task ${req.id}`);
      }
      const s = await taskSession();
      try {
        const view = await s.task(execution.handle.taskId).snapshot();
        return { task: { taskId: view.taskId, status: view.status, statusMessage: view.statusMessage } };
      } catch (err) {
        return { snapshotError: String(err?.message ?? err) };
      }
    }
    case 'wire':
      return { wire: wire.slice(req.since ?? 0), next: wire.length };
    case 'hello':
      return hello();
    case 'alive':
      // ping is gone from 2026-07-28 (the SDK refuses to send it there).
      await (client.getProtocolEra() === 'modern' ? client.discover() : client.ping());
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
await session?.close();
await client.close();
