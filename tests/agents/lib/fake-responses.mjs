// A scripted fake of the OpenAI Responses API on loopback, for running the real Codex CLI
// offline (its custom model provider pointed here). No dependencies.
//
//   const api = await startFakeResponses([toolSearch('pcmail inbox'), mcpCall('pcmail', 'inbox', {}), text('done')]);
//   ... codex exec -c model_providers.fake.base_url=<api.url>/v1 ...
//   api.turns      // request bodies of POST /v1/responses, in order (each one consumed a script entry)
//
// Each request is answered from the script: `text(t)` (an assistant message), `call(name, args)`
// (a function call), `mcpCall(server, tool, args)` (Codex calls MCP tools by namespace
// `mcp__<server>`), `toolSearch(query)` (Codex defers MCP tools until the model searches for
// them), `patch(text)` (its freeform `apply_patch` tool), or a function `(body) => entry`.
// A used-up script answers `text('ok')`. Answers stream as SSE, as the real API does.

import http from 'node:http';

export const text = (t) => ({ kind: 'text', text: t });
export const call = (name, args, namespace) => ({ kind: 'function_call', name, args, namespace });
export const mcpCall = (server, tool, args) => call(tool, args, `mcp__${server}`);
export const toolSearch = (query) => ({ kind: 'tool_search', query });
export const patch = (input) => ({ kind: 'custom', name: 'apply_patch', input });

let nextId = 1;

function item(entry) {
  const id = nextId++;
  switch (entry.kind) {
    case 'text':
      return { type: 'message', role: 'assistant', id: `msg_${id}`, content: [{ type: 'output_text', text: entry.text }] };
    case 'function_call':
      return {
        type: 'function_call', id: `fc_${id}`, call_id: `call_${id}`, name: entry.name,
        ...(entry.namespace ? { namespace: entry.namespace } : {}), arguments: JSON.stringify(entry.args ?? {}),
      };
    case 'tool_search':
      return {
        type: 'tool_search_call', id: `ts_${id}`, call_id: `call_${id}`, execution: 'client', status: 'completed',
        arguments: { query: entry.query, limit: 20 },
      };
    case 'custom':
      return { type: 'custom_tool_call', id: `ctc_${id}`, call_id: `call_${id}`, name: entry.name, input: entry.input };
    default:
      throw new Error(`fake Responses API: unknown script entry ${JSON.stringify(entry)}`);
  }
}

export async function startFakeResponses(script = []) {
  const queue = [...script];
  const requests = [];
  const turns = [];
  const errors = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch { body = raw; }
      const path = req.url.split('?')[0];
      requests.push({ method: req.method, path, body });
      if (req.method === 'POST' && path.endsWith('/responses')) {
        turns.push(body);
        let next = queue.length ? queue.shift() : text('ok');
        if (typeof next === 'function') {
          try { next = next(body); } catch (e) { errors.push(e); next = text(`fake API: script error: ${e.message}`); }
        }
        const rid = `resp_${nextId++}`;
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const ev = (e) => res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
        ev({ type: 'response.created', response: { id: rid } });
        ev({ type: 'response.output_item.done', item: item(next) });
        ev({ type: 'response.completed', response: { id: rid, usage: {
          input_tokens: 10, input_tokens_details: null, output_tokens: 5, output_tokens_details: null, total_tokens: 15,
        } } });
        res.end();
        return;
      }
      // Anything else (model lists, telemetry): answered at once so nothing waits on retries.
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `fake Responses API: no ${path}` } }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    turns,
    errors,
    script: (...more) => { queue.push(...more); },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}

/** Every text in a request's `input` (instructions, messages, tool outputs), flattened. */
export function inputTexts(body) {
  const out = [];
  const walk = (v) => {
    if (typeof v === 'string') out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const k of ['text', 'output', 'content', 'instructions']) if (v[k] !== undefined) walk(v[k]);
    }
  };
  walk(body?.instructions);
  walk(body?.input);
  return out.join('\n');
}

/** The output Codex sent back for the call with `callId` (a function or custom tool call), as text. */
export function callOutput(body, callId) {
  const o = (body?.input ?? []).find((i) => i.call_id === callId && /_output$/.test(i.type) && i.type !== 'tool_search_output');
  if (!o) return undefined;
  return typeof o.output === 'string' ? o.output : inputTexts({ input: [o] });
}

/** The call ids of the calls the model made, in order (`fc_…`/`ctc_…` items the fake answered). */
export function callIds(body) {
  return (body?.input ?? []).filter((i) => /_call$/.test(i.type)).map((i) => ({ type: i.type, name: i.name, callId: i.call_id }));
}
