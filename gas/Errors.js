// Protocol errors travel as data; a thrown PcError becomes {"ok":false,"error":{…}}.
function pcErr_(code, message, extra) {
  const e = new Error(code + ': ' + message);
  e.pcmail = { code: code, message: message, extra: extra || null };
  return e;
}

function badField_(field, message) {
  return pcErr_('bad_request', message, { field: field });
}

function errorBody_(code, message, extra) {
  const err = { code: code, message: message };
  if (extra) {
    if (extra.field !== undefined) err.field = extra.field;
    if (extra.candidates !== undefined) err.candidates = extra.candidates;
    if (extra.lease !== undefined) err.lease = extra.lease; // held / stale / forbidden on a lease
    if (extra.reason !== undefined) err.reason = extra.reason; // job_refused
    if (extra.unresolved !== undefined) err.unresolved = extra.unresolved; // a list of addresses
  }
  return { ok: false, error: err };
}
