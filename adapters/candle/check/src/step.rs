//! `model.step`: one call of the user's step with the true gradient before it, what the
//! observed optimizer received, and the update, as float64 summaries plus sampled coordinates.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::builds::{dot, dtype_name, guarded, Build};
use crate::directions;
use crate::wire::{encode_array, encode_scalar, R};

/// One call of the user's step with the true gradient before it and the observed input.
pub(crate) fn one_step(b: &mut Build, k_s: usize) -> R<Value> {
    let before = b.current()?;
    let (_, grads) = b.fresh_grads()?;
    for r in &b.recorders {
        let mut r = r.borrow_mut();
        r.applied.clear();
        r.active = true;
    }
    let logged = {
        let model = &mut b.model;
        let loss = &model.loss;
        let step = model.step.as_mut().expect("checked by the caller");
        guarded("the step", || Ok(step(&|| loss())?))
    };
    let mut applied: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &b.recorders {
        let mut r = r.borrow_mut();
        r.active = false;
        for (name, vals) in std::mem::take(&mut r.applied) {
            match applied.get_mut(&name) {
                Some(acc) => acc.iter_mut().zip(&vals).for_each(|(a, v)| *a += v),
                None => {
                    applied.insert(name, vals);
                }
            }
        }
    }
    let logged = logged?;
    let after = b.current()?;
    let dt = dtype_name(b.dtype);
    let mut tensors = Map::new();
    for (i, (name, _)) in b.vars.iter().enumerate() {
        let n = before[i].len();
        let g = grads[i].clone().unwrap_or_else(|| vec![0.0; n]);
        let delta: Vec<f64> = after[i].iter().zip(&before[i]).map(|(a, b)| a - b).collect();
        let a = applied.get(name);
        let zeros = vec![0.0; n];
        let av = a.unwrap_or(&zeros);
        let idx = directions::sample(n, k_s);
        let pick = |v: &[f64]| -> Value {
            match &idx {
                Some(ix) => encode_array(dt, &[ix.len()], &ix.iter().map(|j| v[*j]).collect::<Vec<_>>()),
                None => encode_array(dt, &[v.len()], v), // flat, C order, as the sampled ones
            }
        };
        let mut e = json!({
            "grad_sumsq": dot(&g, &g), "applied_present": a.is_some(), "applied_sumsq": dot(av, av),
            "applied_dot_grad": dot(av, &g), "delta_sumsq": dot(&delta, &delta),
            "delta_dot_grad": dot(&delta, &g), "delta_dot_applied": dot(&delta, av),
            "theta": pick(&before[i]), "grad": pick(&g), "delta": pick(&delta),
        });
        if let Some(a) = a {
            e["applied"] = pick(a);
        }
        if let Some(ix) = &idx {
            e["index"] = json!(ix);
        }
        tensors.insert(name.clone(), e);
    }
    let grad_norm = logged.grad_norm.map_or(Value::Null, encode_scalar);
    Ok(json!({"logged": {"grad_norm": grad_norm, "which": logged.which.wire()}, "tensors": tensors}))
}
