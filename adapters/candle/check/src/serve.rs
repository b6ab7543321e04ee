//! The model protocol's answers (docs/protocol-model.md): builds per dtype stamped at one
//! point `theta0`, and the `hello` / `model.*` requests on them. Every request leaves the
//! parameters as it found them (bitwise, also on error or panic).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use candle_core::DType;
use serde_json::{json, Map, Value};

use crate::builds::{cast, dot, dtype_name, panic_text, parse_dtype, sums, tensor_from, Build, Builder};
use crate::directions::{self, Scope};
use crate::step::one_step;
use crate::wire::{decode_scalar, encode_array, encode_scalar, invalid, Fail, R};

/// The server: one build per dtype (the first build's values are `theta0`), answering requests.
pub struct Server<'a> {
    builder: Box<Builder<'a>>,
    theta0: Option<BTreeMap<String, Vec<f64>>>,
    builds: Vec<(DType, Result<Build, Fail>)>,
    /// The verdicts of `model.done`, when the harness sent them.
    pub(crate) checks: Option<Value>,
}

impl<'a> Server<'a> {
    pub(crate) fn new(builder: Box<Builder<'a>>) -> Self {
        Server { builder, theta0: None, builds: Vec::new(), checks: None }
    }

    /// Builds float32 first (its values become `theta0`), then float64 stamped with them.
    fn ensure_built(&mut self) {
        if !self.builds.is_empty() {
            return;
        }
        for dtype in [DType::F32, DType::F64] {
            let b = Build::new(&*self.builder, dtype, self.theta0.as_ref());
            match &b {
                Ok(b) if self.theta0.is_none() => {
                    self.theta0 = Some(b.vars.iter().map(|(n, _)| n.clone()).zip(b.base64.clone()).collect());
                }
                Err(f) => eprintln!("gradcheck-candle: {}", f.message()),
                _ => {}
            }
            self.builds.push((dtype, b));
        }
    }

    fn build(&mut self, dtype: DType) -> R<&mut Build> {
        self.ensure_built();
        match self.builds.iter_mut().find(|(d, _)| *d == dtype) {
            Some((_, Ok(b))) => Ok(b),
            Some((_, Err(f))) => Err(f.clone()),
            None => Err(Fail::Unsupported(format!("dtype {dtype:?}"))),
        }
    }

    pub(crate) fn dispatch(&mut self, method: &str, params: &Value) -> R<Value> {
        match method {
            "hello" => self.hello(params),
            "model.describe" => self.describe(params),
            "model.loss" => {
                let b = self.build(parse_dtype(params)?)?;
                Ok(json!({"loss": encode_scalar(b.loss()?)}))
            }
            "model.grads" => self.grads(params),
            "model.line" => self.line(params),
            "model.step" => self.step(params),
            "model.done" => {
                self.checks = Some(params.clone());
                Ok(json!({}))
            }
            other => Err(Fail::Unsupported(format!("unknown method {other}"))),
        }
    }

    fn hello(&mut self, params: &Value) -> R<Value> {
        if let Some(p) = params.get("protocol").and_then(Value::as_i64) {
            if p != 1 {
                return Err(Fail::Version(format!("gradcheck-candle speaks protocol 1, not {p}")));
            }
        }
        self.ensure_built();
        let mut dtypes = Vec::new();
        let mut step = false;
        let mut name = None;
        for want in [DType::F64, DType::F32] {
            if let Some((_, Ok(b))) = self.builds.iter().find(|(d, _)| *d == want) {
                dtypes.push(dtype_name(want));
                step |= b.model.step.is_some();
                name = name.or_else(|| b.model.name.clone());
            }
        }
        let name = name.unwrap_or_else(|| {
            std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "model".to_string())
        });
        Ok(json!({"protocol": 1, "kind": "model", "engine": "candle", "engine_version": crate::CANDLE_VERSION,
                  "library": "gradcheck-candle", "library_version": crate::LIBRARY_VERSION, "model": name,
                  "dtypes": dtypes, "devices": ["cpu"], "capabilities": {"step": step},
                  "semantics": {"accumulation": "functional"}}))
    }

    fn describe(&mut self, params: &Value) -> R<Value> {
        let b = self.build(parse_dtype(params)?)?;
        let tensors: Vec<Value> = b.vars.iter().zip(&b.base64).map(|((name, var), vals)| {
            let (sq, _, mx) = sums(vals);
            let rms = if vals.is_empty() { 0.0 } else { (sq / vals.len() as f64).sqrt() };
            json!({"name": name, "shape": var.dims(), "dtype": dtype_name(b.dtype), "rms": rms, "max_abs": mx})
        }).collect();
        let knobs: Map<String, Value> = b.knobs.iter().map(|k| (k.name().to_string(), json!(k.default))).collect();
        let clip = match &b.model.clip {
            Some(k) => json!({"kind": "global_norm", "max_norm": k.default, "knob": k.name()}),
            None => Value::Null,
        };
        let optimizer = b.recorders.first().map_or(Value::Null, |r| r.borrow().declaration.clone());
        let unregistered = b.unregistered()?;
        Ok(json!({"tensors": tensors, "unregistered": unregistered, "knobs": knobs, "clip": clip,
                  "optimizer": optimizer, "stopped": b.model.stopped, "step": b.model.step.is_some()}))
    }

    fn grads(&mut self, params: &Value) -> R<Value> {
        let arrays = params.get("arrays").and_then(Value::as_bool).unwrap_or(false);
        let b = self.build(parse_dtype(params)?)?;
        let dtype = b.dtype;
        let shapes: Vec<(String, Vec<usize>)> = b.vars.iter().map(|(n, v)| (n.clone(), v.dims().to_vec())).collect();
        let (loss, grads) = b.grads_at_theta0()?;
        let mut out = Map::new();
        for ((name, shape), g) in shapes.iter().zip(grads) {
            let (sq, ab, mx) = g.as_deref().map_or((0.0, 0.0, 0.0), sums);
            let mut e = json!({"present": g.is_some(), "sumsq": sq, "sumabs": ab, "maxabs": mx});
            if arrays {
                if let Some(g) = g {
                    e["array"] = encode_array(dtype_name(dtype), shape, g);
                }
            }
            out.insert(name.clone(), e);
        }
        Ok(json!({"loss": encode_scalar(*loss), "grads": out}))
    }

    fn line(&mut self, params: &Value) -> R<Value> {
        let b = self.build(parse_dtype(params)?)?;
        let dir = params.get("direction").ok_or_else(|| Fail::Invalid("params.direction is required".into()))?;
        let seed = dir.get("seed").and_then(Value::as_u64).ok_or_else(|| Fail::Invalid("direction.seed must be an integer in [0, 2^53)".into()))?;
        // t omitted or empty: the projection only (no evaluation)
        let ts: Vec<f64> = match params.get("t") {
            Some(Value::Array(ts)) => ts.iter().map(decode_scalar).collect::<R<_>>()?,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return invalid("params.t must be a list of steps"),
        };
        // u per touched tensor (two scopes on one tensor add up)
        let mut u: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for s in dir.get("scope").and_then(Value::as_array).ok_or_else(|| Fail::Invalid("direction.scope must be a list".into()))? {
            let name = s.get("name").and_then(Value::as_str).ok_or_else(|| Fail::Invalid("scope entries need a name".into()))?;
            let i = b.index(name)?;
            let n = b.base64[i].len();
            let scope = Scope {
                name: name.to_string(),
                start: s.get("start").and_then(Value::as_u64).unwrap_or(0) as usize,
                stop: s.get("stop").and_then(Value::as_u64).map(|x| x as usize),
                scale: match s.get("scale") { Some(v) => decode_scalar(v)?, None => 1.0 },
            };
            let v = directions::values(seed, &scope, n);
            match u.get_mut(&i) {
                Some(acc) => acc.iter_mut().zip(&v).for_each(|(a, x)| *a += x),
                None => {
                    u.insert(i, v);
                }
            }
        }
        let (projection, abs_terms, norm2) = {
            let (_, grads) = b.grads_at_theta0()?;
            let mut p = (0.0, 0.0, 0.0);
            for (i, ui) in &u {
                if let Some(g) = &grads[*i] {
                    p.0 += dot(ui, g);
                    p.1 += ui.iter().zip(g).map(|(x, y)| (x * y).abs()).sum::<f64>();
                }
                p.2 += dot(ui, ui);
            }
            p
        };
        let b = &*b;
        let mut inexact = 0u64;
        let mut losses = Vec::with_capacity(ts.len());
        let result = (|| -> R<()> {
            for &t in &ts {
                for (i, ui) in &u {
                    let theta = &b.base64[*i];
                    let mut p = Vec::with_capacity(theta.len());
                    for (th, uj) in theta.iter().zip(ui) {
                        let pj = cast(th + t * uj, b.dtype);
                        inexact += u64::from(*uj != 0.0 && pj - th != t * uj);
                        p.push(pj);
                    }
                    b.vars[*i].1.set(&tensor_from(p, b.vars[*i].1.dims(), b.dtype)?)?;
                }
                losses.push(encode_scalar(b.loss()?));
            }
            Ok(())
        })();
        b.restore(u.keys().copied())?;
        result?;
        Ok(json!({"losses": losses, "projection": projection, "abs_terms": abs_terms, "norm2": norm2,
                  "inexact": inexact}))
    }

    fn step(&mut self, params: &Value) -> R<Value> {
        let dtype = parse_dtype(params)?;
        self.build(dtype)?; // refused dtypes answer as the other requests do
        let experiment = params.get("experiment").and_then(Value::as_str).unwrap_or("run");
        let calls = match experiment {
            "run" => params.get("steps").and_then(Value::as_u64).unwrap_or(1).max(1) as usize,
            "repeat" => 2,
            other => return invalid(format!("experiment {other:?}: \"run\" or \"repeat\"")),
        };
        let k_s = params.get("sample").and_then(Value::as_u64).unwrap_or(64) as usize;
        // a fresh build (fresh optimizer state), stamped with theta0
        let mut b = Build::new(&*self.builder, dtype, self.theta0.as_ref())?;
        if b.model.step.is_none() {
            return Err(Fail::Unsupported("the model has no step closure (Model::step)".into()));
        }
        if let Some(knobs) = params.get("knobs").and_then(Value::as_object) {
            for (name, v) in knobs {
                let k = b.knobs.iter().find(|k| k.name() == name)
                    .ok_or_else(|| Fail::Invalid(format!("no knob {name:?} (gc::knob)")))?;
                k.value.set(decode_scalar(v)?);
            }
        }
        let mut steps = Vec::with_capacity(calls);
        for call in 0..calls {
            if experiment == "repeat" && call > 0 {
                b.restore(0..b.vars.len())?; // parameters only: optimizer state stays as it is
            }
            steps.push(one_step(&mut b, k_s)?);
        }
        Ok(json!({"steps": steps}))
    }
}

/// Answers one request line (the id echoed; a malformed line answered with `id: null`).
pub(crate) fn answer(server: &mut Server, line: &str) -> (Value, bool) {
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return (json!({"id": null, "error": {"type": "invalid_request", "message": format!("not JSON: {e}")}}), false),
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = req.get("method").and_then(Value::as_str) else {
        return (json!({"id": id, "error": {"type": "invalid_request", "message": "no method"}}), false);
    };
    if method == "shutdown" {
        return (json!({"id": id, "result": {}}), true);
    }
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let out = catch_unwind(AssertUnwindSafe(|| server.dispatch(method, &params)));
    let answer = match out {
        Ok(Ok(result)) => json!({"id": id, "result": result}),
        Ok(Err(f)) => json!({"id": id, "error": {"type": f.kind(), "message": f.message()}}),
        Err(p) => json!({"id": id, "error": {"type": "engine_error", "message": format!("panic: {}", panic_text(p))}}),
    };
    (answer, false)
}
