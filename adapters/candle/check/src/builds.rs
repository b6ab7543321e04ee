//! One build of the user's model in one dtype: the registry copied out of the `VarMap`, the
//! values it started from (restored bitwise), the knobs and observed optimizers it created, and
//! the engine's own gradient read by registry name.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use candle_core::{DType, Device, Tensor, Var};
use serde_json::{json, Value};

use crate::model::Model;
use crate::observe::{collect, to_f64, Knob, Recorder};
use crate::wire::{invalid, Fail, R};

pub(crate) type Builder<'a> = dyn Fn(DType, &Device) -> candle_core::Result<Model> + 'a;

/// One build of the user's model in one dtype.
pub(crate) struct Build {
    pub(crate) dtype: DType,
    pub(crate) model: Model,
    /// The registry, sorted by name (a `VarMap` is a hash map: sorting gives one order).
    pub(crate) vars: Vec<(String, Var)>,
    /// The values each variable had after the build (and the stamp): restored bitwise.
    pub(crate) base: Vec<Tensor>,
    pub(crate) base64: Vec<Vec<f64>>,
    pub(crate) knobs: Vec<Knob>,
    pub(crate) recorders: Vec<Rc<RefCell<Recorder>>>,
    /// The fresh gradient at `theta0` (None: absent from the GradStore), computed once.
    pub(crate) grads: Option<(f64, Vec<Option<Vec<f64>>>)>,
}

pub(crate) fn dtype_name(d: DType) -> &'static str {
    if d == DType::F32 {
        "float32"
    } else {
        "float64"
    }
}

pub(crate) fn parse_dtype(params: &Value) -> R<DType> {
    match params.get("dtype").and_then(Value::as_str) {
        Some("float64") => Ok(DType::F64),
        Some("float32") => Ok(DType::F32),
        Some(other) => Err(Fail::Unsupported(format!("dtype {other}: gradcheck-candle builds float64 and float32"))),
        None => invalid("params.dtype is required"),
    }
}

pub(crate) fn engine(e: impl std::fmt::Display) -> Fail {
    Fail::Engine(crate::wire::without_backtrace(&e.to_string()))
}

/// The values `vals` (float64) as a tensor of `dtype`: rounded to nearest for float32.
pub(crate) fn tensor_of(vals: &[f64], shape: &[usize], dtype: DType) -> R<Tensor> {
    let dev = Device::Cpu;
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(vals.iter().map(|v| *v as f32).collect::<Vec<f32>>(), shape, &dev)?,
        DType::F64 => Tensor::from_vec(vals.to_vec(), shape, &dev)?,
        other => return Err(Fail::Unsupported(format!("dtype {other:?}"))),
    })
}

/// As [`tensor_of`], taking the values (no copy for float64).
pub(crate) fn tensor_from(vals: Vec<f64>, shape: &[usize], dtype: DType) -> R<Tensor> {
    match dtype {
        DType::F64 => Ok(Tensor::from_vec(vals, shape, &Device::Cpu)?),
        _ => tensor_of(&vals, shape, dtype),
    }
}

/// `cast(x)` to the build's dtype, as float64.
pub(crate) fn cast(x: f64, dtype: DType) -> f64 {
    if dtype == DType::F32 {
        f64::from(x as f32)
    } else {
        x
    }
}

pub(crate) fn scalar_loss(t: &Tensor) -> R<f64> {
    let v = to_f64(t)?;
    if v.len() != 1 {
        return Err(Fail::Engine(format!("the loss must be a scalar, got shape {:?}", t.dims())));
    }
    Ok(v[0])
}

pub(crate) fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// Runs user code: a Candle error or a panic becomes an `engine_error`.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> R<T>) -> R<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Fail::Engine(format!("{what} panicked: {}", panic_text(p)))),
    }
}

impl Build {
    pub(crate) fn new(builder: &Builder, dtype: DType, theta0: Option<&BTreeMap<String, Vec<f64>>>) -> R<Build> {
        let (model, ctx) = collect(|| guarded("the builder", || builder(dtype, &Device::Cpu).map_err(engine)));
        let model = model.map_err(|f| Fail::Unsupported(format!("the builder refused {}: {}", dtype_name(dtype), f.message())))?;
        // Copy the registry out and release the lock at once: `VarMap::all_vars` takes the same
        // lock, so holding it across user code deadlocks (docs/engines/candle.md).
        let mut vars: Vec<(String, Var)> = {
            let data = model.varmap.data().lock().map_err(|_| Fail::Engine("the VarMap's lock is poisoned".into()))?;
            data.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, var) in &vars {
            if var.dtype() != dtype {
                return Err(Fail::Unsupported(format!(
                    "the builder asked for {} built {name} in {:?}", dtype_name(dtype), var.dtype())));
            }
            if let Some(vals) = theta0.and_then(|t| t.get(name)) {
                var.set(&tensor_of(vals, var.dims(), dtype)?)?;
            }
        }
        let mut base = Vec::with_capacity(vars.len());
        let mut base64 = Vec::with_capacity(vars.len());
        for (_, var) in &vars {
            base.push(var.as_tensor().copy()?);
            base64.push(to_f64(var.as_tensor())?);
        }
        for r in &ctx.recorders {
            r.borrow_mut().vars = vars.clone();
        }
        let build = Build { dtype, model, vars, base, base64, knobs: ctx.knobs, recorders: ctx.recorders, grads: None };
        // A dtype the user's ops refuse (a fused kernel without float64) is refused here, once.
        build.loss().map_err(|f| Fail::Unsupported(format!(
            "the loss cannot be evaluated in {}: {}", dtype_name(dtype), f.message())))?;
        Ok(build)
    }

    pub(crate) fn loss(&self) -> R<f64> {
        guarded("the loss", || scalar_loss(&(self.model.loss)()?))
    }

    /// A fresh backward at the current parameters, read by registry name.
    pub(crate) fn fresh_grads(&self) -> R<(f64, Vec<Option<Vec<f64>>>)> {
        guarded("the loss", || {
            let l = (self.model.loss)()?;
            let value = scalar_loss(&l)?;
            let store = l.backward()?;
            let mut out = Vec::with_capacity(self.vars.len());
            for (_, var) in &self.vars {
                out.push(match store.get(var.as_tensor()) {
                    Some(g) => Some(to_f64(g)?),
                    None => None,
                });
            }
            Ok((value, out))
        })
    }

    pub(crate) fn grads_at_theta0(&mut self) -> R<&(f64, Vec<Option<Vec<f64>>>)> {
        if self.grads.is_none() {
            self.grads = Some(self.fresh_grads()?);
        }
        Ok(self.grads.as_ref().unwrap())
    }

    pub(crate) fn restore(&self, which: impl Iterator<Item = usize>) -> R<()> {
        for i in which {
            self.vars[i].1.set(&self.base[i])?;
        }
        Ok(())
    }

    pub(crate) fn index(&self, name: &str) -> R<usize> {
        self.vars.iter().position(|(n, _)| n == name).map_or_else(
            || invalid(format!("no parameter {name:?} in the VarMap")), Ok)
    }

    pub(crate) fn current(&self) -> R<Vec<Vec<f64>>> {
        self.vars.iter().map(|(_, v)| Ok(to_f64(v.as_tensor())?)).collect()
    }

    /// Vars the loss graph reaches that the VarMap does not hold.
    pub(crate) fn unregistered(&self) -> R<Vec<Value>> {
        guarded("the loss", || {
            let l = (self.model.loss)()?;
            let known: HashSet<_> = self.vars.iter().map(|(_, v)| v.as_tensor().id()).collect();
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for node in l.sorted_nodes() {
                if node.is_variable() && !known.contains(&node.id()) && seen.insert(node.id()) {
                    out.push(json!({"shape": node.dims(),
                                    "what": "a Var the loss reaches that is not in the VarMap"}));
                }
            }
            Ok(out)
        })
    }
}

pub(crate) fn sums(vals: &[f64]) -> (f64, f64, f64) {
    vals.iter().fold((0.0, 0.0, 0.0), |(sq, ab, mx), v| (sq + v * v, ab + v.abs(), mx.max(v.abs())))
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
