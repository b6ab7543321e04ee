//! `gc::observe(opt).declare(gc::Declared::...)`: the declaration of an optimizer the library
//! cannot read. In process: what `describe` says; with the harness: a correct Adam of the
//! user's own passes `step.effective` and its broken twin (no bias correction) is caught.

mod common;

use std::io::Cursor;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{Optimizer, VarMap, SGD};
use gradcheck_candle as gc;
use serde_json::{json, Value};

const LR: f64 = 0.01;
const B1: f64 = 0.9;
const B2: f64 = 0.999;
const EPS: f64 = 1e-8;

/// A user's own Adam (candle-nn has none); `bias_correction: false` is the broken twin.
struct MyAdam {
    vars: Vec<Var>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    t: i32,
    lr: f64,
    bias_correction: bool,
}

impl Optimizer for MyAdam {
    type Config = (f64, bool);

    fn new(vars: Vec<Var>, (lr, bias_correction): (f64, bool)) -> candle_core::Result<Self> {
        let m = vars.iter().map(|v| v.zeros_like()).collect::<candle_core::Result<Vec<_>>>()?;
        let v = m.clone();
        Ok(MyAdam { vars, m, v, t: 0, lr, bias_correction })
    }

    fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        self.t += 1;
        let (c1, c2) = if self.bias_correction { (1.0 - B1.powi(self.t), 1.0 - B2.powi(self.t)) } else { (1.0, 1.0) };
        for (i, var) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var.as_tensor()) else { continue };
            self.m[i] = ((&self.m[i] * B1)? + (g * (1.0 - B1))?)?;
            self.v[i] = ((&self.v[i] * B2)? + (g.sqr()? * (1.0 - B2))?)?;
            let upd = ((&self.m[i] / c1)? / ((&self.v[i] / c2)?.sqrt()? + EPS)?)?;
            var.set(&(var.as_tensor() - (upd * self.lr)?)?)?;
        }
        Ok(())
    }

    fn learning_rate(&self) -> f64 {
        self.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.lr = lr
    }
}

/// Two linear layers trained by `MyAdam`, declared as Adam when `declare`.
fn model(dtype: DType, dev: &Device, bias_correction: bool, declare: bool) -> candle_core::Result<gc::Model> {
    let vm = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&vm, dtype, dev);
    let (fc1, fc2) = (candle_nn::linear(3, 4, vb.pp("fc1"))?, candle_nn::linear(4, 2, vb.pp("fc2"))?);
    let x = Tensor::new(&[[0.5f64, -1.0, 2.0], [1.5, 0.25, -0.75]], dev)?.to_dtype(dtype)?;
    let y = Tensor::new(&[[1.0f64, 0.0], [0.0, 1.0]], dev)?.to_dtype(dtype)?;
    let opt = gc::observe(MyAdam::new(vm.all_vars(), (LR, bias_correction))?);
    let mut opt = if declare { opt.declare(gc::Declared::adam(LR, B1, B2, EPS)) } else { opt };
    Ok(gc::Model::new(vm, move || candle_nn::loss::mse(&fc2.forward(&fc1.forward(&x)?.tanh()?)?, &y))
        .step(move |loss| {
            opt.step(&loss()?.backward()?)?;
            Ok(gc::Logged::none())
        }))
}

fn describe<B>(build: B) -> Value
where
    B: Fn(DType, &Device) -> candle_core::Result<gc::Model>,
{
    let reqs = [
        json!({"id": 1, "method": "model.describe", "params": {"dtype": "float64"}}),
        json!({"id": 2, "method": "model.step", "params": {"dtype": "float64", "knobs": {}, "steps": 1, "experiment": "run"}}),
        json!({"id": 3, "method": "model.describe", "params": {"dtype": "float64"}}),
    ];
    let input: String = reqs.iter().map(|r| format!("{r}\n")).collect();
    let mut out = Vec::new();
    gc::serve(build, Cursor::new(input), &mut out).unwrap();
    let a: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(a[1]["result"]["steps"].is_array(), "the step ran: {}", a[1]);
    assert_eq!(a[0]["result"]["optimizer"], a[2]["result"]["optimizer"], "a step keeps the declaration");
    a[0]["result"]["optimizer"].clone()
}

#[test]
fn the_declaration_is_what_describe_sends_and_a_step_keeps_it() {
    let adam = json!({"kind": "adam", "lr": LR, "beta1": B1, "beta2": B2, "eps": EPS});
    assert_eq!(describe(|d: DType, dev: &Device| model(d, dev, true, true)), adam);
    // not declared, not readable: null (step.effective is skipped, not guessed)
    assert_eq!(describe(|d: DType, dev: &Device| model(d, dev, true, false)), Value::Null);
    // declared on an optimizer the library reads: the declaration replaces what is read
    let sgd = |dtype: DType, dev: &Device| {
        let vm = VarMap::new();
        let w = vm.get(3, "w", candle_nn::Init::Const(0.5), dtype, dev)?;
        let mut opt = gc::observe(SGD::new(vm.all_vars(), 0.1)?).declare(gc::Declared::sgd(0.25));
        Ok(gc::Model::new(vm, move || w.sqr()?.sum_all()).step(move |loss| {
            opt.step(&loss()?.backward()?)?;
            Ok(gc::Logged::none())
        }))
    };
    assert_eq!(describe(sgd), json!({"kind": "sgd", "lr": 0.25}));
}

#[test]
fn declared_values_go_on_the_wire_as_given() {
    assert_eq!(gc::Declared::sgd(0.5).to_json(), json!({"kind": "sgd", "lr": 0.5}));
    assert_eq!(gc::Declared::adamw(1e-3, 0.8, 0.99, 1e-6, 0.01).to_json(),
               json!({"kind": "adamw", "lr": 1e-3, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.01}));
    let nan = std::panic::catch_unwind(|| gc::Declared::adam(f64::NAN, 0.9, 0.999, 1e-8).to_json());
    let msg = nan.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("lr is not finite"), "{msg}");
}

/// Needs the Python harness (skipped where it is not installed, unless CI is set).
#[test]
fn a_declared_adam_is_replayed_the_broken_twin_is_caught() {
    let Some(_) = common::harness() else { return };
    let dir = format!("{}/declare", env!("CARGO_TARGET_TMPDIR"));
    let verdicts = |bias_correction: bool| -> (i32, Vec<(String, String, String)>) {
        let build = move |d: DType, dev: &Device| model(d, dev, bias_correction, true);
        match gc::start_harness(build, &["--report-dir", &dir, "--dtype", "float64"]) {
            gc::HarnessOutcome::Ran { code, served } => {
                let checks = served.checks.expect("model.done carries the verdicts");
                (code, checks["checks"].as_array().unwrap().iter().map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                    (s("name"), s("status").to_ascii_lowercase(), s("message"))
                }).collect())
            }
            other => panic!("the harness did not run: {other:?}"),
        }
    };
    let effective = |v: &[(String, String, String)], status: &str| {
        v.iter().filter(|(n, s, _)| n.starts_with("step.effective[") && s == status).count()
    };
    let (code, correct) = verdicts(true);
    assert_eq!(code, 0, "the correct Adam passes: {correct:?}");
    assert_eq!(effective(&correct, "passed"), 4, "{correct:?}"); // fc1/fc2 weight and bias
    let (code, broken) = verdicts(false);
    assert_eq!(code, 1, "{broken:?}");
    assert_eq!(effective(&broken, "failed"), 4, "no bias correction moves every tensor ~3x: {broken:?}");
    let (_, _, msg) = broken.iter().find(|(n, _, _)| n == "step.effective[fc1.weight]").unwrap();
    assert!(msg.contains("Adam(lr=0.01"), "the message names the declared optimizer: {msg}");
}
