#!/usr/bin/env node
// gradcheck process-protocol adapter (protocol 1, see docs/protocol.md) for TensorFlow.js,
// pure-JS CPU backend.  Reads one JSON request per line on stdin, writes one JSON response per
// line on stdout.  Anything else a library prints goes to stderr.
'use strict';

// stdout belongs to the protocol: route console.log/info to stderr before tfjs loads.
console.log = (...a) => console.error(...a);
console.info = (...a) => console.error(...a);

const readline = require('readline');
const tf = require('@tensorflow/tfjs');

const PROTOCOL = 1;
const DTYPE = 'float32'; // tfjs has no float64

class Unsupported extends Error {}
class InvalidRequest extends Error {}

// ---- arrays: {dtype, shape, data: base64 of little-endian float64} --------------------------
function decode(obj) {
  if (!obj || !Array.isArray(obj.shape) || typeof obj.data !== 'string') {
    throw new InvalidRequest('array must be {dtype, shape, data}');
  }
  const buf = Buffer.from(obj.data, 'base64');
  const n = obj.shape.reduce((a, b) => a * b, 1);
  if (buf.length !== 8 * n) throw new InvalidRequest(`array: ${buf.length} bytes for shape [${obj.shape}]`);
  const vals = new Float32Array(n);
  for (let i = 0; i < n; i++) vals[i] = buf.readDoubleLE(8 * i);
  return tf.tensor(vals, obj.shape, DTYPE);
}

function encode(t) {
  const vals = t.dataSync();
  const buf = Buffer.alloc(8 * vals.length);
  for (let i = 0; i < vals.length; i++) buf.writeDoubleLE(vals[i], 8 * i);
  return { dtype: DTYPE, shape: t.shape, data: buf.toString('base64') };
}

// ---- ops: the meanings are fixed by gradcheck/backends/protocol_ops.py --------------------
const OPS = {
  sin: x => tf.sin(x),
  cos: x => tf.cos(x),
  tanh: x => tf.tanh(x),
  exp: x => tf.exp(x),
  log: x => tf.log(x),
  sqrt: x => tf.sqrt(x),
  square: x => tf.square(x),
  neg: x => tf.neg(x),
  sigmoid: x => tf.sigmoid(x),
  add: (x, y) => tf.add(x, y),
  sub: (x, y) => tf.sub(x, y),
  mul: (x, y) => tf.mul(x, y),
  div: (x, y) => tf.div(x, y),
  matmul: (x, y) => tf.matMul(x, y),
  sum: x => tf.sum(x),
  mean: x => tf.mean(x),
  softmax: x => tf.softmax(x, -1),
  logsumexp_axis1: x => tf.logSumExp(x, -1),
};

// A function of tensors returning an array of tensors; transforms build order-2 functions.
function buildFn(spec) {
  if (!spec || !(spec.op in OPS)) throw new Unsupported(`op ${spec && spec.op} is not implemented`);
  let f = (...xs) => [OPS[spec.op](...xs)];
  for (const tr of spec.transforms || []) {
    if (tr.kind !== 'vjp') throw new Unsupported(`transform ${tr.kind}: tfjs has no forward mode`);
    f = vjpFunction(f, tr.diff, tr.n_args);
  }
  return f;
}

// g(*args, *cotangents) = J^T v of f with respect to args[diff]
function vjpFunction(f, diff, nArgs) {
  return (...xs) => {
    const args = xs.slice(0, nArgs);
    const cts = xs.slice(nArgs);
    const scalar = (...d) => {
      const full = args.slice();
      diff.forEach((k, i) => { full[k] = d[i]; });
      const outs = f(...full);
      // "+ 0 * sum(d)" keeps every input connected: an output that does not depend on an input
      // then gets a zero gradient instead of tfjs's "Cannot compute gradient" error.
      const zero = d.map(t => tf.mul(tf.sum(t), 0)).reduce((a, b) => tf.add(a, b));
      return outs.map((o, i) => tf.sum(tf.mul(o, cts[i]))).reduce((a, b) => tf.add(a, b), zero);
    };
    return tf.grads(scalar)(diff.map(k => args[k]));
  };
}

function checkDtype(p) {
  if (p.dtype && p.dtype !== DTYPE) throw new Unsupported(`dtype ${p.dtype}: tfjs computes in float32 only`);
  if (p.device && p.device !== 'cpu') throw new Unsupported(`device ${p.device}: only cpu`);
}

// ---- training sessions ---------------------------------------------------------------------
const sessions = new Map();
let nextSession = 0;

function session(p) {
  const s = sessions.get(p.session);
  if (!s) throw new InvalidRequest(`unknown session ${p.session}`);
  return s;
}

// tfjs has no stop-gradient primitive: a stopped argument is a constant snapshot of the value.
function lossFn(s, loss) {
  const f = OPS[loss.op];
  if (!f) throw new Unsupported(`op ${loss.op} is not implemented`);
  return () => {
    const args = loss.args.map(a => {
      if ('param' in a) {
        const v = s.vars[a.param];
        if (!v) throw new InvalidRequest(`unknown param ${a.param}`);
        return a.stop ? tf.tensor(v.dataSync(), v.shape, DTYPE) : v;
      }
      return decode(a.array);
    });
    const y = f(...args);
    return loss.weights ? tf.sum(tf.mul(y, decode(loss.weights))) : tf.sum(y);
  };
}

function setGrads(s, grads) {
  for (const g of Object.values(s.grads)) g.dispose();
  s.grads = grads;
}

const METHODS = {
  hello(p) {
    if (p.protocol !== PROTOCOL) {
      const e = new Error(`this adapter speaks protocol ${PROTOCOL}, not ${p.protocol}`);
      e.type = 'version_mismatch';
      throw e;
    }
    return {
      protocol: PROTOCOL, engine: 'tfjs', engine_version: tf.version.tfjs,
      backend: tf.getBackend(), devices: ['cpu'], dtypes: [DTYPE],
      capabilities: { vjp: true, jvp: false, order2: true, training: true },
      semantics: {
        accumulation: 'functional', stop_gradient: null,
        notes: 'tf.variableGrads returns fresh gradients; optimizers apply them; no stop-gradient primitive',
      },
    };
  },
  ops() {
    return { ops: Object.entries(OPS).map(([name, f]) => ({ name, arity: f.length })) };
  },
  evaluate(p) {
    checkDtype(p);
    const f = buildFn(p.fn);
    return tf.tidy(() => ({ outputs: f(...p.args.map(decode)).map(encode) }));
  },
  vjp(p) {
    checkDtype(p);
    const f = buildFn(p.fn);
    return tf.tidy(() => {
      const args = p.args.map(decode);
      const grads = vjpFunction(f, p.diff, args.length)(...args, ...p.cotangents.map(decode));
      return { grads: grads.map(encode) };
    });
  },
  jvp() { throw new Unsupported('tfjs has no forward mode'); },
  'train.create'(p) {
    checkDtype(p);
    const sid = `s${++nextSession}`;
    const vars = {};
    for (const [name, a] of Object.entries(p.params)) vars[name] = tf.variable(decode(a), true, `${sid}/${name}`);
    sessions.set(sid, { vars, grads: {} });
    return { session: sid };
  },
  'train.backward'(p) {
    const s = session(p);
    const { value, grads } = tf.variableGrads(lossFn(s, p.loss), Object.values(s.vars));
    const byParam = {};
    for (const [name, v] of Object.entries(s.vars)) if (grads[v.name]) byParam[name] = grads[v.name];
    setGrads(s, byParam); // functional: the fresh gradients replace the stored ones
    const loss = value.dataSync()[0];
    value.dispose();
    return { loss };
  },
  'train.grads'(p) {
    const s = session(p);
    const out = {};
    for (const name of Object.keys(s.vars)) out[name] = s.grads[name] ? encode(s.grads[name]) : null;
    return { grads: out };
  },
  'train.params'(p) {
    const s = session(p);
    const out = {};
    for (const [name, v] of Object.entries(s.vars)) out[name] = encode(v);
    return { params: out };
  },
  'train.zero_grad'(p) { setGrads(session(p), {}); return {}; },
  'train.clip_grad_norm'(p) {
    const s = session(p);
    const gs = Object.values(s.grads);
    if (gs.length === 0) return { total_norm: 0 };
    const total = tf.tidy(() => tf.sqrt(gs.map(g => tf.sum(tf.square(g))).reduce((a, b) => tf.add(a, b))).dataSync()[0]);
    if (total > p.max_norm) {
      const scaled = {};
      for (const [k, g] of Object.entries(s.grads)) scaled[k] = tf.mul(g, p.max_norm / total);
      setGrads(s, scaled);
    }
    return { total_norm: total };
  },
  'train.step'(p) {
    const s = session(p);
    const named = {};
    for (const [k, g] of Object.entries(s.grads)) named[s.vars[k].name] = g;
    const opt = tf.train.sgd(p.lr);
    opt.applyGradients(named);
    opt.dispose();
    return {};
  },
  'train.close'(p) {
    const s = session(p);
    setGrads(s, {});
    for (const v of Object.values(s.vars)) v.dispose();
    sessions.delete(p.session);
    return {};
  },
};

function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    return { id: null, error: { type: 'invalid_request', message: `not JSON: ${e.message}` } };
  }
  if (!req || typeof req !== 'object' || typeof req.method !== 'string') {
    return { id: req && req.id !== undefined ? req.id : null, error: { type: 'invalid_request', message: 'no method' } };
  }
  const m = METHODS[req.method];
  try {
    if (!m) throw new Unsupported(`unknown method ${req.method}`);
    return { id: req.id, result: m(req.params || {}) };
  } catch (e) {
    const type = e.type || (e instanceof Unsupported ? 'unsupported'
      : e instanceof InvalidRequest ? 'invalid_request' : 'engine_error');
    return { id: req.id, error: { type, message: String(e && e.message || e) } };
  }
}

async function main() {
  await tf.setBackend('cpu');
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let req = null;
    try { req = JSON.parse(line); } catch (e) { /* handled below */ }
    if (req && req.method === 'shutdown') {
      process.stdout.write(JSON.stringify({ id: req.id, result: {} }) + '\n');
      break;
    }
    process.stdout.write(JSON.stringify(handle(line)) + '\n');
  }
  process.exit(0);
}

main().catch(e => { process.stderr.write(`tfjs adapter: ${e.stack || e}\n`); process.exit(1); });
