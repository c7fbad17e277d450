// One function per protocol op. Each validates and looks everything up first,
// then writes in as few calls as it can, so a failure never leaves half a change.

function opHello_(req) {
  return { server: 'pcmail-gas', protocol: 1, rosterVersion: rosterVersion_(), features: FEATURES.slice(),
    auth: req.caller, requireCredentials: requireCredentialsOn_() };
}

// What this server supports beyond the first version (pcmail_core::protocol::FEATURES):
// mark-results = marks answered item by item with `index`; expires-in = mail.expiresIn.
// label-binding = cred in the envelope, roster.set claim/replace (Roster.js).
// credentials = per-PC credentials, join codes, revoke, rotate, the audit log (Auth.js).
// leases = lease.* and the poll's `lease` argument (Leases.js).
// received-updates = poll.receivedSince: the feed of mail the caller received.
// jobs = job.* and the poll's `job` argument (Jobs.js, JobsServer.js).
// sessions = the poll's sessions report, name.take, who, mail to a name (Sessions.js).
// multi-recipient = send with mail.to a list: one copy, state and timeline per address.
const FEATURES = ['mark-results', 'expires-in', 'label-binding', 'credentials', 'leases', 'received-updates', 'jobs', 'sessions',
  'multi-recipient'];

function opRosterGet_() {
  return { pcs: readRoster_().map(pcView_), version: rosterVersion_() };
}

function opRosterSet_(req, now) {
  // A new label may not be spelled as a name (one namespace, Sessions.js).
  if (!readRoster_().some(function (p) { return p.label === req.args.label; })) {
    const h = sessHolder_(sessStore_(now), req.args.label);
    if (h) throw pcErr_('conflict', JSON.stringify(req.args.label) + ' is a session name (held by ' + h.pc + '/' + h.session + '); names and labels share one namespace: pick another label');
  }
  const claim = req.args.claim ? { cred: req.cred, replace: req.args.replace } : null;
  const r = rosterSet_(req.args.label, req.args.hostname, req.args.number, claim);
  if (r.changed && req.caller === 'admin') audit_(req, now, 'roster.set', req.args.label, 'number ' + r.pc.number + ' hostname ' + r.pc.hostname);
  if (r.rebound) audit_(req, now, req.args.replace ? 'replace' : 'claim', req.args.label, null);
  const out = { pc: r.pc, changed: r.changed, version: r.version };
  if (claim) out.bound = true;
  return out;
}

function opRosterRemove_(req, now) {
  const r = rosterRemove_(req.args.label);
  if (r.removed) audit_(req, now, 'roster.remove', req.args.label, null);
  return r;
}

function rosterMember_(pcs, label) {
  const me = pcs.filter(function (p) { return p.label === label; })[0];
  if (!me) throw pcErr_('unknown_pc', JSON.stringify(label) + ' is not on the roster (register with roster.set)');
  return me;
}

// How `to` is compared: the address, or a list as JSON in the sender's order
// (crates/core model.rs To::key).
function toKey_(to) {
  return Array.isArray(to) ? JSON.stringify(to) : to;
}

function sameContent_(stored, mail, from) {
  const to = stored.broadcastOf ? (stored.recipients ? toKey_(stored.recipients) : '*') : stored.to;
  return to === toKey_(mail.to) && stored.from === from && stored.kind === mail.kind &&
    stored.subject === mail.subject && stored.body === mail.body && stored.urgent === mail.urgent &&
    sameExpiry_(stored, mail) && stored.inReplyTo === mail.inReplyTo &&
    stored.auto === mail.auto && stored.hop === mail.hop;
}

// A retry of an expiresIn mail is the same mail with the same or a SHORTER expiresIn
// (a queued mail subtracts the time it waited); an expiresAt one compares exactly.
function sameExpiry_(stored, mail) {
  if (mail.expiresIn !== null) return stored.expiresIn !== null && mail.expiresIn <= stored.expiresIn;
  return stored.expiresIn === null && stored.expiresAt === mail.expiresAt;
}

// Safe to repeat after a failure at any step: the events go first
// (the intent; appendEvents_ skips those already written), then the mail rows, then the
// original a reply finishes. A retry that finds the mail stored finishes the original too.
function opSend_(req, now) {
  const mail = req.args.mail;
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const list = Array.isArray(mail.to) ? mail.to : null;
  if (list) {
    // All or nothing: every address resolves before anything is written, and each
    // one that does not is named with its own candidates.
    const st = sessStore_(now);
    const misses = list.filter(function (a) { return !pcs.some(function (p) { return p.label === a; }) && !sessHolder_(st, a); })
      .map(function (a) { return { to: a, candidates: candidates_(pcs, a).concat(nameCandidates_(st, a)) }; });
    if (misses.length) throw unknownRecipients_(misses);
  } else if (mail.to !== '*' && !pcs.some(function (p) { return p.label === mail.to; })) {
    // A name: the mail stays addressed to it; whoever holds it gets it.
    const st = sessStore_(now);
    if (!sessHolder_(st, mail.to)) {
      throw pcErr_('unknown_recipient', JSON.stringify(mail.to) + ' is not an exact roster label or name',
        { candidates: candidates_(pcs, mail.to).concat(nameCandidates_(st, mail.to)) });
    }
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
  const finishes = !!(original && original.where === 'Mail' &&
    transition_(original.mail, 'done', now, req.pc, 'reply:' + mail.id, now));
  const stored = locate_([mail.id]).concat(locate_([mail.id], MCOL.broadcastOf));
  if (stored.length) {
    if (!stored.every(function (s) { return sameContent_(s.mail, mail, req.pc); })) {
      throw pcErr_('duplicate_id', 'id ' + mail.id + ' exists with other content');
    }
    if (finishes) { // the first attempt stored the mail but not the original's `done`
      appendEvents_([eventOf_(original.mail)]);
      saveMut_([original]);
    }
    return { ids: creationOrder_(stored.map(function (s) { return s.mail; }), pcs).map(function (m) { return m.id; }), existing: true };
  }
  // A list is sent like a broadcast: one copy per address (<id>~<address>), in its order.
  const targets = list || (mail.to === '*'
    ? pcs.filter(function (p) { return p.label !== req.pc; }).map(function (p) { return p.label; })
    : [mail.to]);
  const rows = targets.map(function (label) {
    const copy = mail.to === '*' || !!list;
    return {
      id: copy ? mail.id + '~' + label : mail.id, from: req.pc, to: label, kind: mail.kind,
      subject: mail.subject, body: mail.body, urgent: mail.urgent,
      expiresAt: mail.expiresIn !== null ? now + mail.expiresIn : mail.expiresAt, expiresIn: mail.expiresIn,
      inReplyTo: mail.inReplyTo, auto: mail.auto, hop: mail.hop, createdAt: now,
      broadcastOf: copy ? mail.id : null, state: 'new', updatedAt: now,
      timeline: [{ state: 'new', at: now, by: req.pc, note: null }],
      recipients: list ? list.slice() : null
    };
  });
  const events = rows.map(function (r) { return eventOf_(r); });
  if (finishes) events.push(eventOf_(original.mail));
  appendEvents_(events);
  appendMails_(rows);
  if (finishes) saveMut_([original]);
  return { ids: rows.map(function (r) { return r.id; }), existing: false };
}

// Applies marks in order to already located mail; returns results (request order, each
// with its index; a malformed mark keeps its own bad_request), changed locs, events.
// `names` ({st, delivered}, Sessions.js): mail to a name the caller holds is its own too.
function applyMarks_(marks, locs, pc, now, changed, events, names) {
  return marks.map(function (mk, index) {
    if (mk.bad) return mk.bad;
    const failed = function (code, message) {
      return { index: index, markId: mk.markId, id: mk.id, ok: false, code: code, message: message };
    };
    const loc = locs[mk.id];
    if (!loc) return failed('not_found', 'no such mail');
    const m = loc.mail;
    if (m.to !== pc && !(names && sessReceives_(names.st, m, pc, names.delivered))) return failed('forbidden', 'only the recipient PC may mark a mail');
    const target = { seen: 'seen', ack: 'done', fail: 'failed' }[mk.op];
    const note = mk.op === 'ack' ? 'ack' : mk.op === 'fail' ? mk.reason : null;
    const at = Math.min(mk.at, now); // never in the server's future
    // Past its expiry, the mail is expired first (as the sweep would have), so the
    // mark acts on the state the server's clock has decided.
    const due = isDue_(m, now) && transition_(m, 'expired', m.expiresAt, 'server', null, now);
    if (due) {
      changed[m.id] = loc;
      const ev0 = eventOf_(m);
      if (names) ev0.pc = names.delivered[m.id] || m.to;
      events.push(ev0);
    }
    const did = transition_(m, target, at, mk.by, note, now);
    if (did) {
      changed[m.id] = loc;
      const ev = eventOf_(m);
      if (names) ev.pc = names.delivered[m.id] || m.to; // mail to a name: the PC it was delivered to
      events.push(ev);
    }
    return { index: index, markId: mk.markId, id: mk.id, ok: true, state: m.state, changed: did };
  });
}

// The mail ids of the marks that parsed.
function markIds_(marks) {
  return marks.filter(function (m) { return !m.bad; }).map(function (m) { return m.id; });
}

function values_(o) {
  return Object.keys(o).map(function (k) { return o[k]; });
}

// The mail `ids` name: the caller's live mail first (one TextFinder + one read), then
// Mail and Archive by id for the ones that are not (others' mail, archived, unknown).
function locateForCaller_(label, ids, limit) {
  const mine = mineLive_(label, ids, limit);
  const locs = {};
  Object.keys(mine.locs).forEach(function (id) { locs[id] = mine.locs[id]; });
  const rest = ids.filter(function (id, i) { return !locs[id] && ids.indexOf(id) === i; });
  if (rest.length) {
    const more = locateMap_(rest);
    Object.keys(more).forEach(function (id) { locs[id] = more[id]; });
  }
  return { mine: mine, locs: locs };
}

// Events first, then the state columns: a repeat after a failure between the two
// finds its events written and does not write them again.
function commitChanges_(changed, events, span, tail) {
  appendEvents_(events, tail);
  saveMut_(values_(changed), span);
}

function opMark_(req, now) {
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const found = locateForCaller_(req.pc, markIds_(req.args.marks), 0);
  const changed = {};
  const events = [];
  const names = { st: sessStore_(now), delivered: nameMailRead_() };
  const results = applyMarks_(req.args.marks, found.locs, req.pc, now, changed, events, names);
  if (events.length) commitChanges_(changed, events, found.mine.span);
  return { results: results };
}

function opPoll_(req, now) {
  const a = req.args;
  const pcs = readRosterOrFail_();
  const me = rosterMember_(pcs, req.pc);
  const confirm = a.confirm;
  const ids = confirm.concat(markIds_(a.marks));
  // The sessions report first: mail to a name goes out only while its holder is live.
  const st = sessStore_(now);
  if (a.sessions) sessReport_(st, req.pc, a.sessions);
  const delivered = nameMailRead_();
  const deliveredBefore = Object.keys(delivered).length;
  let deliveredDirty = false;
  const found = locateForCaller_([req.pc].concat(liveNamesOf_(st, req.pc)), ids, a.limit);
  const locs = found.locs;
  const changed = {};
  const events = [];
  const confirmed = [];
  confirm.forEach(function (id) {
    const loc = locs[id];
    if (!loc) return;
    if (loc.mail.to !== req.pc) {
      // Mail to a name this PC holds: it is here now.
      if (!sessReceives_(st, loc.mail, req.pc, delivered) || loc.where !== 'Mail') return;
      delivered[id] = req.pc;
      deliveredDirty = true;
      if (loc.mail.requeued) {
        // Re-queued after its name moved here: delivered again, here (ops/sessions.rs confirmed_here).
        loc.mail.requeued = false;
        changed[id] = loc;
        loc.mail.timeline.push({ state: 'delivered', at: Math.max(now, lastAt_(loc.mail)), by: req.pc, note: redeliveredNote_(loc.mail.to) });
        loc.mail.updatedAt = now;
        const ev = eventOf_(loc.mail);
        ev.pc = req.pc;
        events.push(ev);
      }
    }
    // Past its expiry the mail is expired first (as the Rust server's catch-up does),
    // so the confirm does not deliver it.
    if (isDue_(loc.mail, now) && transition_(loc.mail, 'expired', loc.mail.expiresAt, 'server', null, now)) {
      changed[id] = loc;
      const ev0 = eventOf_(loc.mail);
      ev0.pc = req.pc;
      events.push(ev0);
    }
    if (transition_(loc.mail, 'delivered', now, req.pc, null, now)) {
      changed[id] = loc;
      const ev = eventOf_(loc.mail);
      ev.pc = req.pc;
      events.push(ev);
    }
    confirmed.push(id);
  });
  const marks = applyMarks_(a.marks, locs, req.pc, now, changed, events, { st: st, delivered: delivered });
  const lease = a.lease ? pollLease_(req.pc, a.lease, now) : null;
  const job = a.job ? pollJob_(req.pc, a.job, now) : null; // a poll without `job` touches no job tab
  const tail = eventsTail_();
  if (events.length || Object.keys(changed).length) commitChanges_(changed, events, found.mine.span, tail);
  if (deliveredDirty) nameMailWrite_(delivered, deliveredBefore);
  const sessions = a.sessions ? sessPollAnswer_(st, req.pc, a.sessions) : null;
  sessCommit_(st);
  // The Events prune keeps what either of this PC's cursors has not passed.
  heartbeat_(me, now, a.receivedSince === null ? a.since : Math.min(a.since, a.receivedSince));
  const pending = pendingOf_(found.mine, [req.pc].concat(liveNamesOf_(st, req.pc)), a.limit);
  const upd = updatesFor_(req.pc, a.since, LIMITS.UPDATES_MAX, tail);
  const out = {
    // Mail past its expiry is not offered (it is expired, whether or not a sweep wrote it).
    mail: pending.mails.filter(function (m) { return !isDue_(m, now); }).map(mailView_), confirmed: confirmed, marks: marks,
    updates: upd.updates, cursor: upd.cursor, more: pending.more || upd.more,
    rosterVersion: rosterVersion_()
  };
  if (upd.cursorReset) out.cursorReset = true;
  if (lease) out.lease = lease;
  if (job) out.job = job;
  if (sessions) out.sessions = sessions;
  if (a.receivedSince !== null) { // feature received-updates: only for a caller that asks
    const rec = updatesFor_(req.pc, a.receivedSince, LIMITS.UPDATES_MAX, tail, EV.r);
    out.receivedUpdates = rec.updates;
    out.receivedCursor = rec.cursor;
    if (rec.more) out.more = true;
    if (rec.cursorReset) out.receivedCursorReset = true;
  }
  return out;
}

// Broadcast copies in the order send made them: creation time, then roster number
// (copies of mail to several addresses: the list's order).
function creationOrder_(mails, pcs) {
  const num = {};
  pcs.forEach(function (p) { num[p.label] = p.number; });
  const n = function (m) {
    if (m.recipients) return m.recipients.indexOf(m.to);
    return num[m.to] === undefined ? Infinity : num[m.to];
  };
  return mails.slice().sort(function (x, y) {
    return x.createdAt - y.createdAt || n(x) - n(y) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
  });
}

function opStatus_(req, now) {
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const ids = req.args.ids;
  const valid = ids.filter(function (id) { return isValidAnyId_(id); });
  const direct = locateMap_(valid);
  const bases = valid.filter(function (id) { return !direct[id] && id.indexOf('~') < 0; });
  const copies = {};
  if (bases.length) {
    locate_(bases, MCOL.broadcastOf).forEach(function (loc) {
      (copies[loc.mail.broadcastOf] = copies[loc.mail.broadcastOf] || []).push(loc.mail);
    });
  }
  const mails = [];
  const missing = [];
  const st = sessStore_(now);
  const delivered = nameMailRead_();
  const mine = function (m) { return m.from === req.pc || m.to === req.pc || sessReceives_(st, m, req.pc, delivered); };
  // Mail to a name nobody live holds: the sender hears that it waits.
  // Read-only: each mail is shown as the server's clock has it (an expiry no sweep wrote yet).
  const view = function (m) {
    const v = mailAsRead_(mailView_(m), now);
    const w = v.state === m.state ? sessWaiting_(st, m, req.pc) : null;
    if (w) v.waiting = w;
    return v;
  };
  ids.forEach(function (id) {
    if (!isValidAnyId_(id)) missing.push(id); // not a mail id: missing, like an unknown one
    else if (direct[id]) {
      // Only mail this PC sent or received; anyone else's is missing, like an unknown id.
      if (mine(direct[id].mail)) mails.push(view(direct[id].mail)); else missing.push(id);
    } else if (copies[id] && copies[id].some(mine)) {
      // A copy to a name nobody live holds says why it waits (`view`), as mail to the name alone does.
      creationOrder_(copies[id].filter(mine), pcs).forEach(function (m) { mails.push(view(m)); });
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
