//! One libtest trial per check: a `[[test]] harness = false` target whose `main` runs the
//! harness once and reports every verdict of `model.done` as its own test case, so that
//! `cargo test`, `cargo nextest` and their JUnit output list `flow[fc1.weight]`,
//! `step.applied[fc2.bias]`, ... one by one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde_json::{json, Value};

use crate::launch::{start_harness_quiet_stdout, HarnessOutcome};
use crate::model::Model;

/// What one check becomes in the test list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// A finding, an engine error, or a harness that could not check the model: the message.
    Failed(String),
    /// Skipped or inconclusive (neither is a finding): the reason.
    Ignored(String),
}

/// One test case: the check's name and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub verdict: Verdict,
}

/// The test cases of one harness run. `ci`: whether a harness that cannot be started fails
/// (`CI` set) or is reported as one ignored case carrying the install line.
pub fn cases(outcome: &HarnessOutcome, ci: bool) -> Vec<Case> {
    let (code, served) = match outcome {
        HarnessOutcome::Unavailable(why) => {
            let verdict = if ci { Verdict::Failed(format!("gradcheck: {why}")) } else {
                Verdict::Ignored(format!("skipped: {why}"))
            };
            return vec![Case { name: "gradcheck".to_string(), verdict }];
        }
        HarnessOutcome::Ran { code, served } => (*code, served),
    };
    let checks = served.checks.as_ref().and_then(|c| c.get("checks")).and_then(Value::as_array);
    let mut out: Vec<Case> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for c in checks.into_iter().flatten() {
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (name, status, message) = (text("name"), text("status").to_ascii_lowercase(), text("message"));
        let n = seen.entry(name.clone()).or_insert(0);
        *n += 1;
        let name = if *n == 1 { name } else { format!("{name} #{n}") }; // libtest names must be unique
        let verdict = match status.as_str() {
            "passed" => Verdict::Passed,
            "skipped" => Verdict::Ignored(format!("skipped: {message}")),
            "inconclusive" => Verdict::Ignored(format!("inconclusive (not a finding): {message}")),
            _ => Verdict::Failed(format!("{name}: {status}: {message}")),
        };
        out.push(Case { name, verdict });
    }
    let failed = out.iter().any(|c| matches!(c.verdict, Verdict::Failed(_)));
    if code != 0 && !failed {
        // the harness failed without a failing verdict (usage, a model it could not build or
        // answer): one failing case, so the run cannot pass
        out.push(Case {
            name: "gradcheck".to_string(),
            verdict: Verdict::Failed(format!(
                "gradcheck model exited with {code} (the report above, on stderr, says why; \
                 {} verdicts received)", out.len())),
        });
    }
    if out.is_empty() {
        out.push(Case { name: "gradcheck".to_string(),
                        verdict: Verdict::Failed("gradcheck model sent no verdicts".to_string()) });
    }
    out
}

fn trial(case: Case) -> Trial {
    match case.verdict {
        Verdict::Passed => Trial::test(case.name, || Ok(())),
        Verdict::Failed(msg) => Trial::test(case.name, move || Err(Failed::from(msg))),
        Verdict::Ignored(why) => Trial::ignorable_test(case.name, move || Ok(Completion::ignored_with(why))),
    }
}

/// The `main` of a `[[test]] harness = false` target: runs the harness once on `build` and
/// reports each check as its own test (passed; failed with the harness's message; ignored,
/// with the reason, when skipped or inconclusive). It understands libtest's options (`--list`,
/// `--format terse`, `--exact`, name filters, `--skip`, `--ignored`, `--nocapture`); listing
/// runs the harness too, since a check's name depends on the model; under `cargo nextest` (a
/// process per test) the processes of one run share the first finished run's verdicts (a
/// small file in the temporary directory per run). Where the harness cannot be
/// started: one ignored test `gradcheck` with the install line, a failed one when `CI` is set.
///
/// ```no_run
/// // tests/gradcheck_model.rs, with `[[test]] name = "gradcheck_model"  harness = false`
/// fn main() {
///     gradcheck_candle::libtest_main(my_model::builder);
/// }
/// # mod my_model { pub fn builder(_: candle_core::DType, _: &candle_core::Device)
/// #     -> gradcheck_candle::Result<gradcheck_candle::Model> { unimplemented!() } }
/// ```
pub fn libtest_main<B>(build: B) -> !
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    libtest_main_with(build, &[])
}

/// [`libtest_main`] with options for the harness (`gradcheck model --help`), e.g.
/// `&["--dtype", "float64"]`; `GRADCHECK_ARGS` is appended after them.
pub fn libtest_main_with<B>(build: B, harness_args: &[&str]) -> !
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    let args = Arguments::from_args();
    let ci = std::env::var_os("CI").is_some();
    let cache = run_cache(harness_args);
    let cached = cache.as_ref().and_then(|p| read_cases(p));
    let list = match cached {
        Some(list) => {
            eprintln!("gradcheck: the verdicts of this nextest run, from {}", cache.as_ref().unwrap().display());
            list
        }
        None => {
            let outcome = start_harness_quiet_stdout(build, harness_args);
            if let HarnessOutcome::Unavailable(why) = &outcome {
                if !ci {
                    eprintln!("gradcheck: skipped: {why}");
                }
            }
            let list = cases(&outcome, ci);
            if let Some(p) = &cache {
                write_cases(p, &list);
            }
            list
        }
    };
    libtest_mimic::run(&args, list.into_iter().map(trial).collect()).exit()
}

/// `cargo nextest` runs each test in a process of its own: within one nextest run
/// (`NEXTEST_RUN_ID`), the first process to finish the harness leaves its cases here and the
/// later ones read them, instead of running the harness once per check. Keyed by the run, the
/// test binary and the harness options; never shared between runs.
fn run_cache(harness_args: &[&str]) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let run = std::env::var("NEXTEST_RUN_ID").ok().filter(|r| !r.is_empty())?;
    let run: String = run.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::env::current_exe().ok()?.hash(&mut h);
    harness_args.hash(&mut h);
    std::env::var("GRADCHECK_ARGS").unwrap_or_default().hash(&mut h);
    Some(std::env::temp_dir().join(format!("gradcheck-candle-{run}-{:016x}.json", h.finish())))
}

fn read_cases(path: &Path) -> Option<Vec<Case>> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    v.as_array()?.iter().map(|c| {
        let name = c.get("name")?.as_str()?.to_string();
        let text = c.get("text").and_then(Value::as_str).unwrap_or("").to_string();
        let verdict = match c.get("verdict")?.as_str()? {
            "passed" => Verdict::Passed,
            "failed" => Verdict::Failed(text),
            "ignored" => Verdict::Ignored(text),
            _ => return None,
        };
        Some(Case { name, verdict })
    }).collect()
}

/// Written to a temporary name, then renamed: a reader sees the whole list or none.
fn write_cases(path: &Path, list: &[Case]) {
    let v: Vec<Value> = list.iter().map(|c| match &c.verdict {
        Verdict::Passed => json!({"name": c.name, "verdict": "passed"}),
        Verdict::Failed(t) => json!({"name": c.name, "verdict": "failed", "text": t}),
        Verdict::Ignored(t) => json!({"name": c.name, "verdict": "ignored", "text": t}),
    }).collect();
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&tmp, Value::Array(v).to_string()).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
