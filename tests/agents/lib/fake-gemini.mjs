// A scripted fake of the Gemini API (generativelanguage `v1beta`) on loopback, for running the
// real Gemini CLI offline (GOOGLE_GEMINI_BASE_URL pointed here). No dependencies.
//
//   const api = await startFakeGemini([fnCall('mcp_pcmail_inbox', {}), text('done')]);
//   api.turns    // request bodies that consumed a script entry (the conversation: they offer tools)
//
// A turn is a generateContent / streamGenerateContent request that declares tools; side calls
// (routing, next-speaker checks, titles) get a short JSON text and consume nothing. Script
// entries: `text(t)`, `fnCall(name, args)`, or a function `(body) => entry`. A used-up script
// answers `text('ok')`.

import http from 'node:http';
import fs from 'node:fs';

export const text = (t) => ({ kind: 'text', text: t });
export const fnCall = (name, args) => ({ kind: 'call', name, args });

function parts(entry) {
  if (entry.kind === 'call') return [{ functionCall: { name: entry.name, args: entry.args ?? {} } }];
  return [{ text: entry.text }];
}

function response(entry) {
  return {
    candidates: [{ content: { role: 'model', parts: parts(entry) }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    modelVersion: 'gemini-fake',
  };
}

export function isTurn(body) {
  return Array.isArray(body?.tools) && body.tools.some((t) => (t.functionDeclarations ?? []).length > 0);
}

export async function startFakeGemini(script = []) {
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
        fs.mkdirSync(process.env.FAKE_API_DUMP, { recursive: true });
        fs.writeFileSync(`${process.env.FAKE_API_DUMP}/${String(requests.length).padStart(3, '0')}${path.replaceAll('/', '_').replaceAll(':', '-')}.json`, JSON.stringify(body, null, 2));
      }
      const send = (status, obj) => {
        const data = JSON.stringify(obj);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
        res.end(data);
      };
      if (req.method === 'POST' && /:countTokens$/.test(path)) return send(200, { totalTokens: Math.ceil(raw.length / 4) });
      const m = path.match(/:(streamGenerateContent|generateContent)$/);
      if (req.method === 'POST' && m) {
        let entry = text('{"reasoning":"fake","next_speaker":"user","model_choice":"flash","complexity_score":1}');
        if (isTurn(body)) {
          turns.push(body);
          entry = queue.length ? queue.shift() : text('ok');
          if (typeof entry === 'function') {
            try { entry = entry(body); } catch (e) { errors.push(e); entry = text(`fake API: script error: ${e.message}`); }
          }
        }
        if (m[1] === 'generateContent') return send(200, response(entry));
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(`data: ${JSON.stringify(response(entry))}\r\n\r\n`);
        res.end();
        return;
      }
      send(404, { error: { code: 404, message: `fake Gemini API: no ${path}`, status: 'NOT_FOUND' } });
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

/** Every text part of a request's contents (and system instruction), flattened. */
export function contentTexts(body) {
  const out = [];
  const walk = (v) => {
    if (typeof v === 'string') out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      if (typeof v.text === 'string') out.push(v.text);
      if (v.parts) walk(v.parts);
      if (v.functionResponse) out.push(JSON.stringify(v.functionResponse.response));
    }
  };
  walk(body?.systemInstruction);
  walk(body?.contents);
  return out.join('\n');
}

/** The functionResponse parts of the last user content: `{ name, response }`. */
export function functionResponses(body) {
  const last = body?.contents?.[body.contents.length - 1];
  return (last?.parts ?? []).filter((p) => p.functionResponse).map((p) => p.functionResponse);
}
