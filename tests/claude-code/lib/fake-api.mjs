// A scripted fake of the Anthropic Messages API on loopback, for running the real Claude Code
// CLI offline. No dependencies.
//
//   const api = await startFakeApi([
//     text('Acking it.'),                              // turn 1: a text answer
//     toolUse('Bash', { command: 'pcmail ack m1' }),   // or a tool call
//   ]);
//   ... run claude with ANTHROPIC_BASE_URL=api.url ...
//   api.turns      // the request bodies that consumed a script turn, in order
//   api.requests   // every request: { method, path, body }
//   await api.close();
//
// A "turn" is a POST /v1/messages that carries `tools` (the conversation itself). Claude Code
// also makes side calls without tools (titles, topic checks, quota probes): those get a short
// text answer and do not consume the script. When the script is used up, turns get `text('ok')`.
// A script entry may also be a function `(body) => reply` to answer from what was received.

import fs from 'node:fs';
import http from 'node:http';

export const text = (t) => ({ kind: 'text', text: t });
export const toolUse = (name, input, id) => ({ kind: 'tool_use', name, input, id });

let nextId = 1;

/** True for a request that is the conversation (it offers tools), not a side call. */
export function isTurn(body) {
  return Array.isArray(body?.tools) && body.tools.length > 0;
}

export async function startFakeApi(script = []) {
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
      if (process.env.FAKE_API_DUMP) {
        // For writing a new scenario: every request, numbered, as the CLI sent it.
        fs.mkdirSync(process.env.FAKE_API_DUMP, { recursive: true });
        fs.writeFileSync(`${process.env.FAKE_API_DUMP}/${String(requests.length).padStart(3, '0')}-${req.method}${path.replaceAll('/', '_')}.json`, JSON.stringify(body, null, 2));
      }
      if (req.method === 'POST' && path === '/v1/messages') {
        let reply = text('ok');
        if (isTurn(body)) {
          turns.push(body);
          let next = queue.length ? queue.shift() : text('ok');
          if (typeof next === 'function') {
            try {
              next = next(body);
            } catch (e) {
              errors.push(e);
              next = text(`fake API: script error: ${e.message}`);
            }
          }
          reply = next;
        }
        return body?.stream ? sendStream(res, body, reply) : sendJson(res, 200, message(body, reply));
      }
      if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
        return sendJson(res, 200, { input_tokens: Math.ceil(raw.length / 4) });
      }
      // Anything else (e.g. a metrics or settings endpoint): answer at once so nothing retries.
      return sendJson(res, req.method === 'GET' ? 200 : 404, req.method === 'GET' ? {} : {
        type: 'error', error: { type: 'not_found_error', message: `fake API: no ${path}` },
      });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    turns,
    /** Exceptions thrown by script functions (the turn got a text answer instead). */
    errors,
    /** Appends turns to the script. */
    script: (...more) => { queue.push(...more); },
    remaining: () => queue.length,
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}

function blocks(reply) {
  if (reply.kind === 'tool_use') {
    return [{ type: 'tool_use', id: reply.id ?? `toolu_fake_${nextId++}`, name: reply.name, input: reply.input }];
  }
  return [{ type: 'text', text: reply.text }];
}

function message(body, reply) {
  return {
    id: `msg_fake_${nextId++}`,
    type: 'message',
    role: 'assistant',
    model: body?.model ?? 'claude-fake',
    content: blocks(reply),
    stop_reason: reply.kind === 'tool_use' ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

function sendJson(res, status, obj) {
  const data = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

function sendStream(res, body, reply) {
  const m = message(body, reply);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', { message: { ...m, content: [], stop_reason: null, usage: { ...m.usage, output_tokens: 1 } } });
  m.content.forEach((block, index) => {
    if (block.type === 'tool_use') {
      ev('content_block_start', { index, content_block: { ...block, input: {} } });
      ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
    } else {
      ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
      ev('content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
    }
    ev('content_block_stop', { index });
  });
  ev('message_delta', { delta: { stop_reason: m.stop_reason, stop_sequence: null }, usage: { output_tokens: 5 } });
  ev('message_stop', {});
  res.end();
}
