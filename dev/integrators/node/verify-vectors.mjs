// A localeflow integrator in Node.js with node:crypto only: it implements
// the producer's and the peers' side of the contract (docs/integrating.md)
// from the prose alone and runs every vector in contract/testdata/vectors.
// Usage: node verify-vectors.mjs DIR   (exit 0 when every vector passes)
//
// It signs events (v2), computes RFC 8785 hashes, signs and verifies HTTP
// requests and lifecycle answers, derives and checks evidence request ids,
// verifies receipts, approval tokens and delivery bundles, and reads the
// output event details by their schema version. For signed
// events it checks the envelope fully and, of the payload rules, the two
// hashes (dispatch.payload_sha256, job target_sha256): the vectors'
// other payload cases are left to the JSON Schemas.
import { createHash, createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// ---------- JSON: strict parse (I-JSON) and RFC 8785 ----------

class JSONError extends Error {}

// parseStrict parses one JSON value, refusing duplicate member names, lone
// surrogates and trailing data (JSON.parse accepts all three).
export function parseStrict(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };
  const str = () => {
    const m = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(text.slice(i));
    if (!m) throw new JSONError('string');
    i += m[0].length;
    const s = JSON.parse(m[0]);
    if (!s.isWellFormed()) throw new JSONError('lone surrogate');
    return s;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++; const o = {}; const seen = new Set(); ws();
      if (text[i] === '}') { i++; return o; }
      for (;;) {
        ws(); const k = str();
        if (seen.has(k)) throw new JSONError('duplicate member ' + k);
        seen.add(k); ws();
        if (text[i++] !== ':') throw new JSONError(':');
        o[k] = value(); ws();
        const d = text[i++];
        if (d === '}') return o;
        if (d !== ',') throw new JSONError(',');
      }
    }
    if (c === '[') {
      i++; const a = []; ws();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value()); ws();
        const d = text[i++];
        if (d === ']') return a;
        if (d !== ',') throw new JSONError(',');
      }
    }
    if (c === '"') return str();
    const m = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i));
    if (!m) throw new JSONError('value');
    i += m[0].length;
    return JSON.parse(m[0]);
  };
  const v = value(); ws();
  if (i !== text.length) throw new JSONError('data after the value');
  return v;
}

// jcs is RFC 8785: members sorted by UTF-16 code units (JavaScript's
// default sort), ECMAScript number and string forms (JSON.stringify).
export function jcs(v) {
  if (v === null || typeof v !== 'object') {
    if (typeof v === 'number' && !Number.isFinite(v)) throw new JSONError('number');
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}

const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const hmac = (key, s) => createHmac('sha256', key).update(s).digest('hex');
const TOKEN = /^[A-Za-z0-9_.:-]{1,256}$/;
const SHA = /^[0-9a-f]{64}$/;
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const hasExactly = (o, keys, optional = []) =>
  isObj(o) && keys.every((k) => k in o) && Object.keys(o).every((k) => keys.includes(k) || optional.includes(k));

// hexEqual compares "vN=<hex>" signatures in constant time; hex digits
// case-insensitively, as localeflow does.
function sigEqual(want, got, prefix) {
  if (typeof got !== 'string' || !got.startsWith(prefix) || !/^[0-9a-fA-F]{64}$/.test(got.slice(3))) return false;
  return timingSafeEqual(Buffer.from(want, 'hex'), Buffer.from(got.slice(3), 'hex'));
}

// ---------- signed events ----------

export function eventCanonical(detailType, ts, payload) {
  return 'localeflow.event.v2\n' + detailType + '\n' + ts + '\n' + payload;
}

export function signEventV2(key, detailType, ts, payload) {
  return 'v2=' + hmac(key, eventCanonical(detailType, ts, payload));
}

const eventCodes = (dt) => dt === 'localeflow.change.dispatched'
  ? { invalid: 'poller.dispatch.envelope_invalid', signature: 'poller.dispatch.signature_invalid', stale: 'poller.dispatch.stale' }
  : { invalid: 'coordinator.event.invalid', signature: 'coordinator.event.signature_invalid', stale: 'coordinator.event.stale' };

// openEvent verifies a signed detail as the functions do; it returns the
// error code or null.
function openEvent(v) {
  const codes = eventCodes(v.detail_type);
  const keys = v.keys_hex.map((k) => Buffer.from(k, 'hex'));
  let d;
  try { d = parseStrict(v.detail); } catch { return codes.invalid; }
  if (!isObj(d) || typeof d.payload !== 'string' || typeof d.signature !== 'string') return codes.invalid;
  const n = Object.keys(d).length;
  if (n === 2 && !('timestamp' in d)) {
    if (v.refuse_v1 || !keys.some((k) => sigEqual(hmac(k, d.payload), d.signature, 'v1='))) return codes.signature;
  } else if (n === 3 && 'timestamp' in d) {
    if (typeof d.timestamp !== 'string' || !/^[1-9][0-9]{0,11}$/.test(d.timestamp)) return codes.invalid;
    if (!keys.some((k) => sigEqual(hmac(k, eventCanonical(v.detail_type, d.timestamp, d.payload)), d.signature, 'v2='))) return codes.signature;
    const age = Number(v.now) - Number(d.timestamp);
    if (age > v.max_age_s || age < -300) return codes.stale;
  } else {
    return codes.invalid;
  }
  // Payload: the hash rules.
  const p = parseStrict(d.payload);
  if (v.detail_type === 'localeflow.change.dispatched') {
    if (p.dispatch.payload_sha256 !== sha256(jcs(p.change)) || p.dispatch.event_id !== p.change.event_id) return 'lifecycle_monitor.dispatch_invalid';
  }
  if (v.detail_type === 'localeflow.job.completed' && p.status === 'succeeded' && p.target_sha256 !== sha256(p.candidate)) {
    return 'coordinator.job.target_sha256_mismatch';
  }
  return null;
}

// ---------- signed HTTP ----------

export function requestCanonical(r) {
  let c = r.method + '\n' + r.path + '\n' + r.request_id + '\n' + r.timestamp;
  if (r.body !== null && r.body !== undefined) c += '\n' + sha256(r.body);
  return c;
}

function verifyRequest(v) {
  const keys = v.keys_hex.map((k) => Buffer.from(k, 'hex'));
  if (!TOKEN.test(v.request_id) || !keys.some((k) => sigEqual(hmac(k, requestCanonical(v)), v.signature, 'v1='))) return 'request.signature_invalid';
  if (Math.abs(Number(v.now) - Number(v.timestamp)) > 300) return 'request.stale';
  if ((v.seen_request_ids || []).includes(v.request_id)) return 'request.replayed';
  return null;
}

const responseCanonical = (rid, body) => rid + '\n' + sha256(body);

// ---------- Ed25519 tokens ----------

const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');
const publicKey = (hexKey) => createPublicKey({ key: Buffer.concat([SPKI_ED25519, Buffer.from(hexKey, 'hex')]), format: 'der', type: 'spki' });

// b64 decodes canonical unpadded base64url only.
function b64(s) {
  if (typeof s !== 'string' || !/^[A-Za-z0-9_-]*$/.test(s)) return null;
  const b = Buffer.from(s, 'base64url');
  return b.toString('base64url') === s ? b : null;
}

// openToken returns the payload text of a v1 token whose signature over
// context + segment verifies under one of the keys, or null.
function openToken(context, keysHex, token) {
  const parts = typeof token === 'string' ? token.split('.') : [];
  if (parts.length !== 3 || parts[0] !== 'v1' || parts[1] === '') return null;
  const payload = b64(parts[1]);
  const sig = b64(parts[2]);
  if (!payload || !sig || sig.length !== 64) return null;
  const ok = keysHex.some((k) => verify(null, Buffer.from(context + parts[1]), publicKey(k), sig));
  return ok ? payload.toString('utf8') : null;
}

// ---------- receipts ----------

const MAX_MS = 253402300799999;
const isMS = (n) => Number.isSafeInteger(n) && n >= 0 && n <= MAX_MS;

function verifyReceipt(common, expectedKind, receipt) {
  const parts = typeof receipt === 'string' ? receipt.split('.') : [];
  if (parts.length !== 3 || parts[0] !== 'v1' || parts[1] === '') return 'receipt.malformed';
  const raw = b64(parts[1]);
  if (!raw) return 'receipt.malformed';
  let p;
  try { p = parseStrict(raw.toString('utf8')); } catch { return 'receipt.malformed'; }
  const six = ['kind', 'issuer', 'request_id', 'result_sha256', 'issued_at_ms', 'expires_at_ms'];
  if (!hasExactly(p, six, ['reviewer_id']) || typeof p.kind !== 'string') return 'receipt.malformed';
  if ((p.kind === 'independent_model_review') !== ('reviewer_id' in p)) return 'receipt.malformed';
  if ('reviewer_id' in p && (typeof p.reviewer_id !== 'string' || !TOKEN.test(p.reviewer_id))) return 'receipt.malformed';
  if (typeof p.issuer !== 'string' || !TOKEN.test(p.issuer) || typeof p.request_id !== 'string' || !TOKEN.test(p.request_id) ||
      typeof p.result_sha256 !== 'string' || !SHA.test(p.result_sha256) || !isMS(p.issued_at_ms) || !isMS(p.expires_at_ms) ||
      p.expires_at_ms <= p.issued_at_ms) return 'receipt.malformed';
  const trusted = common.trusted_issuers[expectedKind];
  if (!(p.issuer in trusted)) {
    const elsewhere = Object.values(common.trusted_issuers).some((set) => p.issuer in set);
    return elsewhere ? 'receipt.issuer_untrusted' : 'receipt.issuer_unknown';
  }
  if (openToken('localeflow.receipt.v1.', [trusted[p.issuer]], receipt) === null) return 'receipt.signature_invalid';
  if (p.kind !== expectedKind) return 'receipt.kind_mismatch';
  if (p.request_id !== common.request_id || p.result_sha256 !== common.result_sha256) return 'receipt.binding_mismatch';
  if (p.expires_at_ms <= common.now_ms) return 'receipt.expired';
  if (p.issued_at_ms > common.now_ms + 300000) return 'receipt.not_yet_valid';
  return null;
}

// ---------- approvals and bundles (what a CMS verifies) ----------

const APPROVAL_KEYS = ['schema', 'approval_id', 'event_id', 'site_id', 'plan_id', 'job_id', 'target_locale', 'result_sha256',
  'evidence_request_id', 'quality_receipt_sha256', 'approved_at_ms', 'expires_at_ms'];
const APPROVAL_OPTIONAL = ['human_review_receipt_sha256', 'independent_model_review_sha256', 'independent_model_review_provider'];

export function approvalID(a) {
  return 'apv-' + sha256(jcs({ ...a, approval_id: '' })).slice(0, 40);
}

function verifyApproval(keysHex, token) {
  const text = openToken('localeflow.approval.v1.', keysHex, token);
  let a;
  try { a = text === null ? null : parseStrict(text); } catch { a = null; }
  if (!hasExactly(a, APPROVAL_KEYS, APPROVAL_OPTIONAL) || a.schema !== 'localeflow.approval.v1') return ['approval.token_invalid'];
  if (approvalID(a) !== a.approval_id) return ['approval.id_mismatch'];
  return [null, a];
}

const LOCALE_KEYS = ['job_id', 'source_locale', 'target_locale', 'content_type', 'source_sha256', 'target_sha256', 'result_sha256', 'text', 'approval_id', 'approval'];

function verifyDelivery(common, v) {
  let req;
  try { req = parseStrict(v.body); } catch { return 'delivery.request_invalid'; }
  if (!hasExactly(req, ['schema', 'delivery_id', 'event_id', 'site_id', 'bundle']) || req.schema !== 'localeflow.delivery-request.v1' ||
      req.site_id !== v.site_id || req.event_id !== v.event_id || !TOKEN.test(req.delivery_id)) return 'delivery.request_invalid';
  const text = openToken('localeflow.delivery.v1.', [common.publication_public_hex], req.bundle);
  if (text === null) return 'bundle.signature_invalid';
  let b;
  try { b = parseStrict(text); } catch { return 'bundle.invalid'; }
  if (!hasExactly(b, ['schema', 'delivery_id', 'event_id', 'site_id', 'plan_id', 'prepared_at_ms', 'locales'], ['website_version']) ||
      b.schema !== 'localeflow.delivery-bundle.v1' || b.delivery_id !== req.delivery_id || b.event_id !== v.event_id ||
      b.site_id !== v.site_id || !TOKEN.test(b.plan_id) || !Array.isArray(b.locales) || b.locales.length === 0 ||
      !b.locales.every((l) => hasExactly(l, LOCALE_KEYS))) return 'bundle.invalid';
  const id = 'dlv-' + sha256(jcs({ event_id: b.event_id, plan_id: b.plan_id, approvals: b.locales.map((l) => l.approval_id) })).slice(0, 40);
  if (id !== b.delivery_id) return 'bundle.delivery_id_mismatch';
  for (const l of b.locales) {
    const [err, a] = verifyApproval([common.approval_public_hex], l.approval);
    if (err) return 'bundle.approval_invalid';
    if (a.approval_id !== l.approval_id || a.event_id !== b.event_id || a.site_id !== b.site_id || a.plan_id !== b.plan_id ||
        a.job_id !== l.job_id || a.target_locale !== l.target_locale || a.result_sha256 !== l.result_sha256) return 'bundle.approval_mismatch';
    if (a.expires_at_ms <= v.now_ms) return 'bundle.approval_expired';
    if (sha256(l.text) !== l.target_sha256) return 'bundle.text_mismatch';
  }
  return null;
}

// ---------- evidence requests (what a provider checks) ----------

const EVIDENCE_KEYS = ['request_id', 'schema', 'evidence_revision', 'event_id', 'plan_id', 'job_id', 'result_sha256', 'source_sha256',
  'target_sha256', 'source_locale', 'target_locale', 'content_type', 'glossary_version', 'policy_version', 'provider', 'software_version',
  'review_confidence', 'quality_profile', 'commercial_profile', 'commercial_review', 'human_review_required', 'independent_review_required',
  'source_text', 'target_text'];

function evidenceBinding(req) {
  const { request_id: _r, source_text: _s, target_text: _t, ...binding } = req;
  return binding;
}

function checkEvidenceRequest(body) {
  let req;
  try { req = parseStrict(body); } catch { return 'evidence_request.invalid'; }
  if (!hasExactly(req, EVIDENCE_KEYS) || req.schema !== 'blun.localization-quality-evidence-request.v5') return 'evidence_request.invalid';
  if (req.request_id !== 'blun-l10n-evidence-' + sha256(jcs(evidenceBinding(req)))) return 'evidence_request.request_id_mismatch';
  if (sha256(req.source_text) !== req.source_sha256 || sha256(req.target_text) !== req.target_sha256) return 'evidence_request.text_mismatch';
  return null;
}

// ---------- the runner ----------

// ---------- output events (consumer side) ----------

// The output detail versions this consumer understands, and the members it
// dedupes on. A detail of another version is not interpreted; members it
// does not know are ignored (an additive change keeps the version).
const OUTPUT_SCHEMAS = {
  'localeflow.change.terminal': ['localeflow.change-terminal.v1', ['event_id', 'outcome_id']],
  'localeflow.release.approved': ['localeflow.release-approved.v1', ['approval_id']],
  'localeflow.delivery.ready': ['localeflow.delivery.v1', ['event_id', 'delivery_id', 'status']],
  'localeflow.delivery.delivered': ['localeflow.delivery.v1', ['event_id', 'delivery_id', 'status']],
  'localeflow.health.blocked': ['localeflow.health.v1', ['checked_at_ms']],
};

// readOutput returns the dedupe key of an output detail, or an error code.
export function readOutput(detailType, text) {
  const known = OUTPUT_SCHEMAS[detailType];
  if (!known) return [null, 'output.detail_type_unknown'];
  let d;
  try { d = parseStrict(text); } catch { return [null, 'output.invalid']; }
  if (d === null || typeof d !== 'object' || Array.isArray(d)) return [null, 'output.invalid'];
  if (d.schema !== known[0]) return [null, 'output.schema_unknown'];
  if (known[1].some((k) => d[k] === undefined || d[k] === null)) return [null, 'output.invalid'];
  return [known[1].map((k) => String(d[k])).join('|'), null];
}

const outcome = (v, err) => (v.valid === true ? err === null : err === v.error);

function run(dir) {
  const load = (f) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
  const failures = [];
  let count = 0;
  const check = (file, v, ok, got) => {
    count++;
    if (!ok) failures.push(`${file}: ${v.name}: got ${JSON.stringify(got)}`);
  };

  let f = load('event_signature.json');
  for (const v of f.vectors) {
    if (v.op === 'sign_v2') {
      const key = Buffer.from(v.key_hex, 'hex');
      const sig = signEventV2(key, v.detail_type, v.timestamp, v.payload);
      const detail = JSON.parse(v.detail);
      check('event_signature', v, eventCanonical(v.detail_type, v.timestamp, v.payload) === v.canonical && sig === v.signature &&
        detail.payload === v.payload && detail.timestamp === v.timestamp && detail.signature === sig, sig);
    } else {
      const err = openEvent(v);
      check('event_signature', v, outcome(v, err), err);
    }
  }

  f = load('payload_sha256.json');
  for (const v of f.vectors) {
    if (v.op === 'payload_sha256') {
      let got;
      try { const c = jcs(parseStrict(v.change)); got = { jcs: c, sha256: sha256(c) }; } catch { got = { error: 'lifecycle_monitor.change_invalid' }; }
      check('payload_sha256', v, v.valid === false ? got.error === v.error : got.jcs === v.jcs && got.sha256 === v.sha256, got);
    } else {
      const p = parseStrict(v.job_completed_payload);
      for (const k of ['event_id', 'plan_id', 'job_id', 'status']) delete p[k];
      const c = jcs(p);
      check('payload_sha256', v, c === v.result_jcs && sha256(c) === v.result_sha256, sha256(c));
    }
  }

  f = load('http_signature.json');
  for (const v of f.vectors) {
    if (v.op === 'sign_request') {
      const c = requestCanonical(v);
      check('http_signature', v, c === v.canonical && 'v1=' + hmac(Buffer.from(v.key_hex, 'hex'), c) === v.signature, c);
    } else if (v.op === 'verify_request') {
      const err = verifyRequest(v);
      check('http_signature', v, outcome(v, err), err);
    } else if (v.op === 'sign_response') {
      const c = responseCanonical(v.request_id, v.body);
      check('http_signature', v, c === v.canonical && 'v1=' + hmac(Buffer.from(v.key_hex, 'hex'), c) === v.signature, c);
    } else {
      const ok = v.keys_hex.some((k) => sigEqual(hmac(Buffer.from(k, 'hex'), responseCanonical(v.request_id, v.body)), v.signature, 'v1='));
      check('http_signature', v, outcome(v, ok ? null : 'lifecycle_monitor.response_invalid'), ok);
    }
  }

  f = load('evidence_request_id.json');
  for (const v of f.vectors) {
    if (v.op === 'request_id') {
      const binding = jcs(evidenceBinding(parseStrict(v.body)));
      check('evidence_request_id', v, binding === v.binding_jcs && 'blun-l10n-evidence-' + sha256(binding) === v.request_id &&
        jcs(parseStrict(v.body)) === v.body, binding);
    } else {
      const err = checkEvidenceRequest(v.body);
      check('evidence_request_id', v, outcome(v, err), err);
    }
  }

  f = load('receipts.json');
  for (const v of f.vectors) {
    const err = verifyReceipt(f.common, v.expected_kind, v.receipt);
    check('receipts', v, outcome(v, err), err);
  }

  f = load('approval_tokens.json');
  for (const v of f.vectors) {
    if (v.op === 'approval_id') {
      const a = parseStrict(v.payload);
      check('approval_tokens', v, approvalID(a) === v.approval_id && jcs({ ...a, approval_id: '' }) === v.id_input_jcs, approvalID(a));
    } else {
      const [err] = verifyApproval([f.common.approval_public_hex], v.token);
      check('approval_tokens', v, outcome(v, err), err);
    }
  }

  f = load('delivery_bundles.json');
  for (const v of f.vectors) {
    const err = verifyDelivery(f.common, v);
    check('delivery_bundles', v, outcome(v, err), err);
  }

  f = load('output_events.json');
  for (const v of f.vectors) {
    const [key, err] = readOutput(v.detail_type, v.detail);
    // The same detail with a member this consumer does not know (an
    // additive change) reads the same.
    const extended = v.detail.replace(/}$/, ',"member_added_later":1}');
    const [key2, err2] = readOutput(v.detail_type, extended);
    check('output_events', v, err === null && err2 === null && key === key2 &&
      parseStrict(v.detail).schema === v.schema && OUTPUT_SCHEMAS[v.detail_type][0] === v.schema, err || err2);
  }

  for (const line of failures) console.log('FAIL ' + line);
  console.log(`${count - failures.length} of ${count} vectors pass`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = run(process.argv[2] || join(import.meta.dirname ?? '.', '../../../contract/testdata/vectors'));
