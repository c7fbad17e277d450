// One function per protocol op. Each validates and looks everything up first,
// then writes in as few calls as it can, so a failure never leaves half a change.

function opHello_() {
  return { server: 'pcmail-gas', protocol: 1, rosterVersion: rosterVersion_() };
}

function opRosterGet_() {
  return { pcs: readRoster_().map(pcView_), version: rosterVersion_() };
}

function opRosterSet_(req) {
  const claim = req.args.claim ? { cred: req.cred, replace: req.args.replace } : null;
  const r = rosterSet_(req.args.label, req.args.hostname, req.args.number, claim);
  const out = { pc: r.pc, changed: r.changed, version: r.version };
  if (claim) out.bound = true;
  return out;
}

function opRosterRemove_(req) {
  return rosterRemove_(req.args.label);
}

function rosterMember_(pcs, label) {
  const me = pcs.filter(function (p) { return p.label === label; })[0];
  if (!me) throw pcErr_('unknown_pc', JSON.stringify(label) + ' is not on the roster (register with roster.set)');
  return me;
}

function sameContent_(stored, mail, from) {
  const to = stored.broadcastOf ? '*' : stored.to;
  return to === mail.to && stored.from === from && stored.kind === mail.kind &&
    stored.subject === mail.subject && stored.body === mail.body && stored.urgent === mail.urgent &&
    stored.expiresAt === mail.expiresAt && stored.inReplyTo === mail.inReplyTo &&
    stored.auto === mail.auto && stored.hop === mail.hop;
}

function opSend_(req, now) {
  const mail = req.args.mail;
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  if (mail.to !== '*' && !pcs.some(function (p) { return p.label === mail.to; })) {
    throw pcErr_('unknown_recipient', JSON.stringify(mail.to) + ' is not a roster label',
      { candidates: candidates_(pcs, mail.to) });
  }
  if (mail.hop >= LIMITS.HOP_LIMIT) throw pcErr_('hop_limit', 'hop ' + mail.hop + ' reaches the limit of ' + LIMITS.HOP_LIMIT);
  let original = null; // the mail this reply finishes, if the sender is its recipient
  if (mail.inReplyTo) {
    let origs = locate_([mail.inReplyTo]);
    if (!origs.length && mail.inReplyTo.indexOf('~') < 0) origs = locate_([mail.inReplyTo], MCOL.broadcastOf);
    if (!origs.length) throw pcErr_('not_found', 'inReplyTo ' + mail.inReplyTo + ' does not exist');
    if (mail.auto && origs.some(function (o) { return o.mail.auto; })) {
      throw pcErr_('loop_refused', 'an auto reply to auto mail is refused');
    }
    original = origs.filter(function (o) { return o.mail.to === req.pc; })[0] || null;
  }
  const stored = locate_([mail.id]).concat(locate_([mail.id], MCOL.broadcastOf));
  if (stored.length) {
    if (!stored.every(function (s) { return sameContent_(s.mail, mail, req.pc); })) {
      throw pcErr_('duplicate_id', 'id ' + mail.id + ' exists with other content');
    }
    return { ids: creationOrder_(stored.map(function (s) { return s.mail; }), pcs).map(function (m) { return m.id; }), existing: true };
  }
  const targets = mail.to === '*'
    ? pcs.filter(function (p) { return p.label !== req.pc; }).map(function (p) { return p.label; })
    : [mail.to];
  const rows = targets.map(function (label) {
    const copy = mail.to === '*';
    return {
      id: copy ? mail.id + '~' + label : mail.id, from: req.pc, to: label, kind: mail.kind,
      subject: mail.subject, body: mail.body, urgent: mail.urgent, expiresAt: mail.expiresAt,
      inReplyTo: mail.inReplyTo, auto: mail.auto, hop: mail.hop, createdAt: now,
      broadcastOf: copy ? mail.id : null, state: 'new', updatedAt: now,
      timeline: [{ state: 'new', at: now, by: req.pc, note: null }]
    };
  });
  const events = rows.map(function (r) { return eventOf_(r); });
  if (original && original.where === 'Mail' &&
      transition_(original.mail, 'done', now, req.pc, 'reply:' + mail.id, now)) {
    events.push(eventOf_(original.mail));
  }
  appendMails_(rows);
  if (events.length > rows.length) saveMut_([original]);
  appendEvents_(events);
  return { ids: rows.map(function (r) { return r.id; }), existing: false };
}

// Applies marks in order to already located mail; returns results, changed locs, events.
function applyMarks_(marks, locs, pc, now, changed, events) {
  return marks.map(function (mk) {
    const loc = locs[mk.id];
    if (!loc) return { markId: mk.markId, id: mk.id, ok: false, code: 'not_found' };
    const m = loc.mail;
    if (m.to !== pc) return { markId: mk.markId, id: mk.id, ok: false, code: 'forbidden' };
    const target = { seen: 'seen', ack: 'done', fail: 'failed' }[mk.op];
    const note = mk.op === 'ack' ? 'ack' : mk.op === 'fail' ? mk.reason : null;
    const at = Math.min(mk.at, now); // never in the server's future
    const did = transition_(m, target, at, mk.by, note, now);
    if (did) {
      changed[m.id] = loc;
      events.push(eventOf_(m));
    }
    return { markId: mk.markId, id: mk.id, ok: true, state: m.state, changed: did };
  });
}

function values_(o) {
  return Object.keys(o).map(function (k) { return o[k]; });
}

function opMark_(req, now) {
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const locs = locateMap_(req.args.marks.map(function (m) { return m.id; }));
  const changed = {};
  const events = [];
  const results = applyMarks_(req.args.marks, locs, req.pc, now, changed, events);
  saveMut_(values_(changed));
  appendEvents_(events);
  return { results: results };
}

function opPoll_(req, now) {
  const a = req.args;
  const pcs = readRosterOrFail_();
  const me = rosterMember_(pcs, req.pc);
  const confirm = a.confirm;
  const ids = confirm.concat(a.marks.map(function (m) { return m.id; }));
  const locs = ids.length ? locateMap_(ids) : {};
  const changed = {};
  const events = [];
  const confirmed = [];
  confirm.forEach(function (id) {
    const loc = locs[id];
    if (!loc || loc.mail.to !== req.pc) return;
    if (transition_(loc.mail, 'delivered', now, req.pc, null, now)) {
      changed[id] = loc;
      events.push(eventOf_(loc.mail));
    }
    confirmed.push(id);
  });
  const marks = applyMarks_(a.marks, locs, req.pc, now, changed, events);
  heartbeat_(me, now);
  saveMut_(values_(changed));
  appendEvents_(events);
  const pending = pendingFor_(req.pc, a.limit);
  const upd = updatesFor_(req.pc, a.since, LIMITS.UPDATES_MAX);
  return {
    mail: pending.mails.map(mailView_), confirmed: confirmed, marks: marks,
    updates: upd.updates, cursor: upd.cursor, more: pending.more || upd.more,
    rosterVersion: rosterVersion_()
  };
}

// Broadcast copies in the order send made them: creation time, then roster number.
function creationOrder_(mails, pcs) {
  const num = {};
  pcs.forEach(function (p) { num[p.label] = p.number; });
  const n = function (m) { return num[m.to] === undefined ? Infinity : num[m.to]; };
  return mails.slice().sort(function (x, y) {
    return x.createdAt - y.createdAt || n(x) - n(y) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
  });
}

function opStatus_(req) {
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const ids = req.args.ids;
  const direct = locateMap_(ids);
  const bases = ids.filter(function (id) { return !direct[id] && id.indexOf('~') < 0; });
  const copies = {};
  if (bases.length) {
    locate_(bases, MCOL.broadcastOf).forEach(function (loc) {
      (copies[loc.mail.broadcastOf] = copies[loc.mail.broadcastOf] || []).push(loc.mail);
    });
  }
  const mails = [];
  const missing = [];
  ids.forEach(function (id) {
    if (direct[id]) mails.push(mailView_(direct[id].mail));
    else if (copies[id]) {
      creationOrder_(copies[id], pcs).forEach(function (m) { mails.push(mailView_(m)); });
    } else missing.push(id);
  });
  return { mails: mails, missing: missing };
}

function opAlerts_(req) {
  return { alerts: listAlerts_(req.args.open) };
}

function opSweep_(req, now) {
  return runSweep_(now);
}
