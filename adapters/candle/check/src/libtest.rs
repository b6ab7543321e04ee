//! One libtest trial per check: a `[[test]] harness = false` target whose `main` runs the
//! harness once and reports every verdict of `model.done` as its own test case, so that
//! `cargo test`, `cargo nextest` and their JUnit output list `flow[fc1.weight]`,
//! `step.applied[fc2.bias]`, ... one by one.

use std::collections::BTreeMap;

use candle_core::{DType, Device};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde_json::Value;

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
/// runs the harness too, since a check's name depends on the model. Where the harness cannot be
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
    let outcome = start_harness_quiet_stdout(build, harness_args);
    let ci = std::env::var_os("CI").is_some();
    if let HarnessOutcome::Unavailable(why) = &outcome {
        if !ci {
            eprintln!("gradcheck: skipped: {why}");
        }
    }
    let trials = cases(&outcome, ci).into_iter().map(trial).collect();
    libtest_mimic::run(&args, trials).exit()
}
