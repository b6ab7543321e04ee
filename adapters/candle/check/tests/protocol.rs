//! The model protocol (docs/protocol-model.md) as the harness sees it: in-process on a tiny
//! model whose gradients are known in closed form, and over the pipes of example binaries.

mod common;

use std::io::{BufRead, BufReader, Cursor, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Init, Optimizer, VarMap, SGD};
use gradcheck_candle as gc;
use gradcheck_candle::wire::decode_array;
use serde_json::{json, Value};

const X: [f64; 3] = [1.0, -2.0, 3.0];
const Y: [f64; 3] = [0.25, 0.5, -1.0];
const W0: f64 = 0.5;
const LR: f64 = 0.125;

/// loss = sum((w * x - y)^2) + sum(z * w) with `z` a Var outside the VarMap; `b` registered
/// but unused (its gradient is absent, not zero).
fn tiny(dtype: DType, dev: &Device) -> candle_core::Result<gc::Model> {
    let vm = VarMap::new();
    let w = vm.get(3, "w", Init::Const(W0), dtype, dev)?;
    let _b = vm.get(2, "b", Init::Const(1.0), dtype, dev)?;
    let z = Var::new(&[0.0f64, 0.0, 0.0], dev)?.as_tensor().to_dtype(dtype)?;
    let z = Var::from_tensor(&z)?;
    let x = Tensor::new(&X, dev)?.to_dtype(dtype)?;
    let y = Tensor::new(&Y, dev)?.to_dtype(dtype)?;
    let mut opt = gc::observe(SGD::new(vm.all_vars(), LR)?);
    let max_norm = gc::knob("max_norm", 1.0);
    let w2 = w.clone();
    Ok(gc::Model::new(vm, move || ((&w2 * &x)? - &y)?.sqr()?.sum_all()? + (z.as_tensor() * &w2)?.sum_all()?)
        .clip_global_norm(&max_norm)
        .stop_gradient("target.*")
        .step(move |loss| {
            let grads = loss()?.backward()?;
            opt.step(&grads)?;
            Ok(gc::Logged::pre_clip(max_norm.get()))
        }))
}

fn grad_w(w: f64) -> Vec<f64> {
    X.iter().zip(Y).map(|(x, y)| 2.0 * (w * x - y) * x).collect()
}

fn loss_at(w: &[f64]) -> f64 {
    w.iter().zip(X).zip(Y).map(|((w, x), y)| (w * x - y).powi(2)).sum()
}

/// Sends `requests` to an in-process server of `tiny`, returns the answers in order.
fn converse(requests: &[Value]) -> Vec<Value> {
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let mut out = Vec::new();
    gc::serve(tiny, Cursor::new(input), &mut out).unwrap();
    String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn req(id: u64, method: &str, params: Value) -> Value {
    json!({"id": id, "method": method, "params": params})
}

fn values(v: &Value) -> Vec<f64> {
    decode_array(v).unwrap().1
}

#[test]
fn hello_declares_a_model_child() {
    let a = converse(&[req(1, "hello", json!({"protocol": 1, "client": "gradcheck"}))]);
    let r = &a[0]["result"];
    assert_eq!(a[0]["id"], 1);
    assert_eq!(r["kind"], "model");
    assert_eq!(r["engine"], "candle");
    assert_eq!(r["engine_version"], gc::CANDLE_VERSION);
    assert_eq!(r["library"], "gradcheck-candle");
    assert_eq!(r["dtypes"], json!(["float64", "float32"]));
    assert_eq!(r["capabilities"]["step"], true);
    assert_eq!(r["semantics"]["accumulation"], "functional");
    let a = converse(&[req(1, "hello", json!({"protocol": 2}))]);
    assert_eq!(a[0]["error"]["type"], "version_mismatch");
}

#[test]
fn describe_names_the_registry_and_the_unregistered_var() {
    let a = converse(&[req(1, "model.describe", json!({"dtype": "float64"}))]);
    let r = &a[0]["result"];
    let names: Vec<&str> = r["tensors"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "w"]);
    assert_eq!(r["tensors"][1]["shape"], json!([3]));
    assert_eq!(r["tensors"][1]["rms"], json!(W0));
    assert_eq!(r["unregistered"].as_array().unwrap().len(), 1);
    assert_eq!(r["unregistered"][0]["shape"], json!([3]));
    assert_eq!(r["knobs"], json!({"max_norm": 1.0}));
    assert_eq!(r["clip"], json!({"kind": "global_norm", "max_norm": 1.0, "knob": "max_norm"}));
    assert_eq!(r["optimizer"], json!({"kind": "sgd", "lr": LR}));
    assert_eq!(r["stopped"], json!(["target.*"]));
    assert_eq!(r["step"], true);
}

#[test]
fn grads_are_fresh_by_name_and_absent_is_not_zero() {
    for dtype in ["float64", "float32"] {
        let a = converse(&[req(1, "model.grads", json!({"dtype": dtype, "arrays": true}))]);
        let r = &a[0]["result"];
        let g = grad_w(W0);
        assert_eq!(r["grads"]["b"]["present"], false);
        assert!(r["grads"]["b"].get("array").is_none());
        assert_eq!(r["grads"]["w"]["present"], true);
        let sumsq: f64 = g.iter().map(|v| v * v).sum();
        assert!((r["grads"]["w"]["sumsq"].as_f64().unwrap() - sumsq).abs() < 1e-5 * sumsq, "{dtype}");
        let arr = values(&r["grads"]["w"]["array"]);
        for (a, b) in arr.iter().zip(&g) {
            assert!((a - b).abs() < 1e-5, "{dtype}: {a} vs {b}");
        }
        assert!((r["loss"].as_f64().unwrap() - loss_at(&[W0; 3])).abs() < 1e-6);
    }
}

#[test]
fn loss_twice_agrees_bitwise() {
    let a = converse(&[req(1, "model.loss", json!({"dtype": "float32"})), req(2, "model.loss", json!({"dtype": "float32"}))]);
    assert_eq!(a[0]["result"]["loss"].as_f64().unwrap().to_bits(), a[1]["result"]["loss"].as_f64().unwrap().to_bits());
}

#[test]
fn line_evaluates_along_the_seeded_direction_and_restores_bitwise() {
    let t = [0.0078125, -0.0078125, 0.5];
    let dir = json!({"seed": 1, "scope": [{"name": "w", "scale": 0.25}]});
    let a = converse(&[
        req(1, "model.grads", json!({"dtype": "float64", "arrays": true})),
        req(2, "model.line", json!({"dtype": "float64", "direction": dir, "t": t})),
        req(3, "model.grads", json!({"dtype": "float64", "arrays": true})),
        req(4, "model.line", json!({"dtype": "float64", "direction": {"seed": 1, "scope": [{"name": "nope"}]}, "t": [1.0]})),
        req(5, "model.loss", json!({"dtype": "float64"})),
    ]);
    let u = gc::directions::values(1, &gc::directions::Scope { name: "w".into(), start: 0, stop: None, scale: 0.25 }, 3);
    let r = &a[1]["result"];
    let g = grad_w(W0);
    let proj: f64 = u.iter().zip(&g).map(|(u, g)| u * g).sum();
    assert!((r["projection"].as_f64().unwrap() - proj).abs() < 1e-12);
    assert_eq!(r["norm2"], json!(3.0 * 0.0625));
    assert_eq!(r["inexact"], 0);
    for (k, t) in t.iter().enumerate() {
        let w: Vec<f64> = u.iter().map(|u| W0 + t * u).collect();
        assert_eq!(r["losses"][k].as_f64().unwrap(), loss_at(&w), "t = {t}");
    }
    // the state after a line, and after a refused line, is the state before, bitwise
    assert_eq!(a[0]["result"], a[2]["result"]);
    assert_eq!(a[3]["error"]["type"], "invalid_request");
    assert_eq!(a[4]["result"]["loss"].as_f64().unwrap().to_bits(), a[0]["result"]["loss"].as_f64().unwrap().to_bits());
}

#[test]
fn line_in_float32_counts_inexact_points() {
    // t = 1e-9 is not a power of two: w + t u rounds to w in float32 for every element
    let dir = json!({"seed": 0, "scope": [{"name": "w", "scale": 1.0}]});
    let a = converse(&[req(1, "model.line", json!({"dtype": "float32", "direction": dir, "t": [1e-9, 0.25]}))]);
    assert_eq!(a[0]["result"]["inexact"], 3);
}

#[test]
fn step_reports_true_gradient_applied_gradient_and_delta() {
    let a = converse(&[
        req(1, "model.step", json!({"dtype": "float64", "knobs": {"max_norm": 0.5}, "steps": 2, "experiment": "run", "sample": 64})),
        req(2, "model.step", json!({"dtype": "float64", "knobs": {}, "steps": 2, "experiment": "repeat", "sample": 2})),
        req(3, "model.step", json!({"dtype": "float64", "knobs": {"nope": 1.0}, "experiment": "run"})),
        req(4, "model.grads", json!({"dtype": "float64", "arrays": true})),
    ]);
    let steps = a[0]["result"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["logged"], json!({"grad_norm": 0.5, "which": "pre_clip"})); // the knob was set
    let w = &steps[0]["tensors"]["w"];
    let g = grad_w(W0);
    assert_eq!(w["applied_present"], true);
    assert_eq!(values(&w["grad"]), g);
    assert_eq!(values(&w["applied"]), g);
    assert_eq!(values(&w["theta"]), vec![W0; 3]);
    let delta = values(&w["delta"]);
    for (d, g) in delta.iter().zip(&g) {
        assert!((d + LR * g).abs() < 1e-15);
    }
    assert!((w["delta_dot_applied"].as_f64().unwrap() + LR * w["applied_sumsq"].as_f64().unwrap()).abs() < 1e-12);
    assert_eq!(steps[0]["tensors"]["b"]["applied_present"], false);
    assert_eq!(steps[0]["tensors"]["b"]["delta_sumsq"], 0.0);
    // the second call of a run starts where the first left
    let theta1 = values(&steps[1]["tensors"]["w"]["theta"]);
    for ((t, d), w0) in theta1.iter().zip(&delta).zip([W0; 3]) {
        assert_eq!(*t, w0 + d);
    }
    // repeat: both calls from theta0, sampled at 2 of 3 elements
    let rep = a[1]["result"]["steps"].as_array().unwrap();
    assert_eq!(rep.len(), 2);
    assert_eq!(rep[0]["tensors"]["w"]["index"], rep[1]["tensors"]["w"]["index"]);
    assert_eq!(rep[0]["tensors"]["w"]["index"].as_array().unwrap().len(), 2);
    assert_eq!(rep[0]["tensors"]["w"]["theta"], rep[1]["tensors"]["w"]["theta"]);
    assert_eq!(rep[0]["tensors"]["w"]["delta"], rep[1]["tensors"]["w"]["delta"]);
    assert_eq!(rep[0]["logged"]["grad_norm"], 1.0); // the default: knobs do not leak between experiments
    assert_eq!(a[2]["error"]["type"], "invalid_request");
    // a step experiment runs on its own build: the line/grads build is untouched
    assert_eq!(values(&a[3]["result"]["grads"]["w"]["array"]), g);
}

#[test]
fn malformed_and_unknown_requests_are_answered() {
    let input = "not json\n{\"id\":7,\"method\":\"nope\"}\n{\"id\":8,\"method\":\"model.done\",\"params\":{\"passed\":true,\"checks\":[]}}\n";
    let mut out = Vec::new();
    let served = gc::serve(tiny, Cursor::new(input), &mut out).unwrap();
    let a: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(a[0]["id"], Value::Null);
    assert_eq!(a[0]["error"]["type"], "invalid_request");
    assert_eq!(a[1]["error"]["type"], "unsupported");
    assert_eq!(a[2]["result"], json!({}));
    assert_eq!(served.checks.unwrap()["passed"], true);
}

fn refusing(dtype: DType, dev: &Device) -> candle_core::Result<gc::Model> {
    if dtype == DType::F64 {
        candle_core::bail!("unsupported dtype for this model F64");
    }
    tiny(dtype, dev)
}

#[test]
fn a_refused_dtype_answers_unsupported() {
    let input = format!("{}\n{}\n", req(1, "hello", json!({"protocol": 1})), req(2, "model.grads", json!({"dtype": "float64"})));
    let mut out = Vec::new();
    gc::serve(refusing, Cursor::new(input), &mut out).unwrap();
    let a: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(a[0]["result"]["dtypes"], json!(["float32"]));
    assert_eq!(a[1]["error"]["type"], "unsupported");
    assert!(a[1]["error"]["message"].as_str().unwrap().contains("F64"));
}

// ---- over the pipes of the example binaries ----------------------------------------------

fn example(name: &str) -> PathBuf {
    // target/release/deps/protocol-HASH -> target/release/examples/NAME
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

/// Runs an example under GRADCHECK_PROTOCOL=model, one request at a time; returns the answers
/// and everything it wrote on stderr.
fn over_pipes(name: &str, args: &[&str], requests: &[Value]) -> (Vec<Value>, String, i32) {
    let mut child = Command::new(example(name)).args(args).env("GRADCHECK_PROTOCOL", "model")
        .stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()
        .unwrap_or_else(|e| panic!("{name}: {e} (cargo test builds the examples)"));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        answers.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{name}: {line:?} is not JSON: {e}")));
    }
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing but answers on the protocol's stdout");
    let out = child.wait_with_output().unwrap();
    (answers, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap_or(-1))
}

#[test]
fn user_prints_go_to_stderr_under_the_harness() {
    let (a, err, code) = over_pipes("noisy", &[], &[
        req(1, "hello", json!({"protocol": 1})),
        req(2, "model.loss", json!({"dtype": "float64"})),
    ]);
    assert_eq!(a[0]["result"]["kind"], "model");
    assert_eq!(a[1]["result"]["loss"], json!(0.25 * (1.0 + 4.0 + 9.0)));
    assert!(err.contains("noisy: evaluating the loss (stdout)"), "stderr: {err}");
    assert!(err.contains("noisy: building F64 (stdout)"), "stderr: {err}");
    assert_eq!(code, 0, "exits 0 when stdin closes");
}

#[test]
fn mlp_example_answers_the_contract() {
    let dir = json!({"seed": 3, "scope": [{"name": "fc1.weight", "scale": 0.5}, {"name": "fc2.bias", "start": 1, "stop": 2, "scale": 1.0}]});
    let (a, _, code) = over_pipes("mlp", &[], &[
        req(1, "hello", json!({"protocol": 1, "client": "gradcheck"})),
        req(2, "model.describe", json!({"dtype": "float32"})),
        req(3, "model.grads", json!({"dtype": "float64", "arrays": false})),
        req(4, "model.line", json!({"dtype": "float64", "direction": dir, "t": [0.0009765625, -0.0009765625]})),
        req(5, "model.step", json!({"dtype": "float32", "knobs": {"max_norm": 0.01}, "steps": 1, "experiment": "run", "sample": 4})),
        req(6, "model.done", json!({"passed": true, "checks": []})),
    ]);
    assert_eq!(code, 0);
    assert_eq!(a[0]["result"]["model"], "mlp");
    let d = &a[1]["result"];
    assert_eq!(d["optimizer"]["kind"], "adamw");
    assert_eq!(d["optimizer"]["weight_decay"], 0.01);
    assert_eq!(d["clip"]["knob"], "max_norm");
    assert_eq!(d["tensors"].as_array().unwrap().len(), 4);
    assert_eq!(d["unregistered"], json!([]));
    assert!(a[2]["result"]["grads"].as_object().unwrap().values().all(|g| g["present"] == true));
    // central difference vs the projection: agree to the FD truncation error
    let r = &a[3]["result"];
    let (lp, lm) = (r["losses"][0].as_f64().unwrap(), r["losses"][1].as_f64().unwrap());
    let fd = (lp - lm) / (2.0 * 0.0009765625);
    let p = r["projection"].as_f64().unwrap();
    assert!((fd - p).abs() < 1e-5 * (1.0 + p.abs()), "fd {fd} vs projection {p}");
    assert_eq!(r["norm2"], json!(32.0 * 0.25 + 1.0));
    // clipped at 0.01: AdamW received s g with s = 0.01 / ||g||
    let s = &a[4]["result"]["steps"][0];
    let norm = s["logged"]["grad_norm"].as_f64().unwrap();
    let (mut applied, mut grad) = (0.0, 0.0);
    for t in s["tensors"].as_object().unwrap().values() {
        applied += t["applied_sumsq"].as_f64().unwrap();
        grad += t["grad_sumsq"].as_f64().unwrap();
    }
    assert!((grad.sqrt() - norm).abs() < 1e-5 * norm, "logged {norm} vs true {}", grad.sqrt());
    assert!((applied.sqrt() - 0.01).abs() < 1e-6, "applied norm {}", applied.sqrt());
    assert_eq!(s["tensors"]["fc1.weight"]["index"].as_array().unwrap().len(), 4);
}

#[test]
fn rms_norm_trap_refuses_float64_and_blocks_gradients() {
    let (a, _, _) = over_pipes("rms_norm", &["--buggy"], &[
        req(1, "hello", json!({"protocol": 1})),
        req(2, "model.grads", json!({"dtype": "float32"})),
        req(3, "model.loss", json!({"dtype": "float64"})),
    ]);
    assert_eq!(a[0]["result"]["dtypes"], json!(["float32"]));
    let g = &a[1]["result"]["grads"];
    for name in ["fc1.weight", "fc1.bias", "norm.weight"] {
        assert_eq!(g[name]["present"], false, "{name}");
    }
    assert_eq!(g["fc2.weight"]["present"], true);
    assert_eq!(a[2]["error"]["type"], "unsupported");
    let (a, _, _) = over_pipes("rms_norm", &[], &[req(1, "model.grads", json!({"dtype": "float64"}))]);
    assert!(a[0]["result"]["grads"].as_object().unwrap().values().all(|g| g["present"] == true));
}

/// The one test that needs the Python harness (`python3 -m gradcheck model`): skipped where it
/// is not installed, unless CI is set.
#[test]
fn harness_end_to_end_when_installed() {
    let Some(_) = common::harness() else { return };
    let report_dir = std::env::temp_dir().join(format!("gradcheck-candle-test-{}", std::process::id()));
    let args = format!("--report-dir {}", report_dir.display());
    // gc::run in an example: it starts the harness and exits with its code
    let run = |extra: &[&str]| {
        Command::new(example("preprocess")).args(extra).env_remove("GRADCHECK_PROTOCOL")
            .env("GRADCHECK_ARGS", &args).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().code()
    };
    assert_eq!(run(&[]), Some(0), "the correct variant passes");
    assert_eq!(run(&["--buggy"]), Some(1), "the buggy variant is a finding");
    // gc::check / start_harness in this process
    let dir = report_dir.display().to_string();
    gc::check_with(|d: DType, dev: &Device| common::two_layers(d, dev, false), &["--report-dir", &dir]);
    match gc::start_harness(|d: DType, dev: &Device| common::two_layers(d, dev, true), &["--report-dir", &dir]) {
        gc::HarnessOutcome::Ran { code, served } => {
            assert_eq!(code, 1);
            let checks = served.checks.expect("model.done carries the verdicts");
            let failed: Vec<&str> = checks["checks"].as_array().unwrap().iter()
                .filter(|c| c["status"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("failed")))
                .map(|c| c["name"].as_str().unwrap()).collect();
            assert!(failed.contains(&"flow[fc1.weight]"), "failed: {failed:?}");
        }
        other => panic!("the harness did not run: {other:?}"),
    }
    let _ = std::fs::remove_dir_all(report_dir);
}

/// A loss that panics away from theta0 (w[0] > 1): a line through there is an engine_error and
/// the parameters are restored all the same.
fn fragile(dtype: DType, dev: &Device) -> candle_core::Result<gc::Model> {
    let vm = VarMap::new();
    let w = vm.get(3, "w", Init::Const(W0), dtype, dev)?;
    Ok(gc::Model::new(vm, move || {
        let w0: f64 = w.get(0)?.to_dtype(DType::F64)?.to_scalar()?;
        assert!(w0 <= 1.0, "the user's loss panics at w[0] = {w0}");
        w.sqr()?.sum_all()
    }))
}

#[test]
fn a_panicking_loss_is_an_engine_error_and_the_parameters_are_restored() {
    let dir = json!({"seed": 0, "scope": [{"name": "w", "scale": 1.0}]}); // sign of w[0] is +
    let reqs = [
        req(1, "model.line", json!({"dtype": "float64", "direction": dir, "t": [0.25, 2.0]})),
        req(2, "model.grads", json!({"dtype": "float64", "arrays": true})),
        req(3, "model.line", json!({"dtype": "float64", "direction": dir, "t": [0.25]})),
    ];
    let input: String = reqs.iter().map(|r| format!("{r}\n")).collect();
    let mut out = Vec::new();
    gc::serve(fragile, Cursor::new(input), &mut out).unwrap();
    let a: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(a[0]["error"]["type"], "engine_error");
    assert!(a[0]["error"]["message"].as_str().unwrap().contains("panicked"));
    assert_eq!(values(&a[1]["result"]["grads"]["w"]["array"]), vec![2.0 * W0; 3]);
    assert!(a[2]["result"]["losses"][0].is_number());
}
