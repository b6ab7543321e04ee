//! `gc::libtest_main`: one libtest case per check. The mapping of verdicts to cases, and the
//! `gradcheck_mlp` target (a `harness = false` test of the mlp example) run as a binary.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use candle_core::{DType, Device};
use gradcheck_candle as gc;
use gc::{Case, HarnessOutcome, Served, Verdict};
use serde_json::json;

fn ran(code: i32, checks: serde_json::Value) -> HarnessOutcome {
    HarnessOutcome::Ran { code, served: Served { requests: 9, checks: Some(json!({"checks": checks})) } }
}

fn case(name: &str, verdict: Verdict) -> Case {
    Case { name: name.to_string(), verdict }
}

#[test]
fn each_status_becomes_a_case() {
    let got = gc::cases(&ran(1, json!([
        {"name": "names", "status": "passed", "message": "ok"},
        {"name": "flow[w]", "status": "failed", "message": "no gradient"},
        {"name": "grad_norm", "status": "skipped", "message": "logs none"},
        {"name": "grad[w]", "status": "inconclusive", "message": "kink"},
        {"name": "step", "status": "error", "message": "the step raised"},
    ])), true);
    assert_eq!(got, [
        case("names", Verdict::Passed),
        case("flow[w]", Verdict::Failed("flow[w]: failed: no gradient".into())),
        case("grad_norm", Verdict::Ignored("skipped: logs none".into())),
        case("grad[w]", Verdict::Ignored("inconclusive (not a finding): kink".into())),
        case("step", Verdict::Failed("step: error: the step raised".into())),
    ]);
}

#[test]
fn names_stay_unique_and_a_failed_run_never_passes() {
    let got = gc::cases(&ran(0, json!([{"name": "a", "status": "passed"}, {"name": "a", "status": "passed"}])), true);
    assert_eq!(got, [case("a", Verdict::Passed), case("a #2", Verdict::Passed)]);
    // exit 2 with no failing verdict (a model the harness could not build): one failing case
    let got = gc::cases(&ran(2, json!([{"name": "names", "status": "passed"}])), true);
    assert_eq!(got.len(), 2);
    assert!(matches!(&got[1].verdict, Verdict::Failed(m) if m.contains("exited with 2")), "{got:?}");
    let none = HarnessOutcome::Ran { code: 0, served: Served::default() };
    assert!(matches!(&gc::cases(&none, false)[0].verdict, Verdict::Failed(_)), "no verdicts is not a pass");
}

#[test]
fn a_missing_harness_is_skipped_locally_and_fails_in_ci() {
    let missing = HarnessOutcome::Unavailable("cannot start nope; install the harness".into());
    assert_eq!(gc::cases(&missing, false),
               [case("gradcheck", Verdict::Ignored("skipped: cannot start nope; install the harness".into()))]);
    assert_eq!(gc::cases(&missing, true),
               [case("gradcheck", Verdict::Failed("gradcheck: cannot start nope; install the harness".into()))]);
}

/// target/release/deps/libtest-HASH -> target/release/deps/gradcheck_mlp-HASH (the newest).
fn gradcheck_mlp() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&deps).unwrap().filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("gradcheck_mlp-") && p.extension().is_none())
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop().expect("cargo test builds the gradcheck_mlp target")
}

fn run_mlp(args: &[&str], python: &str, ci: bool) -> (Option<i32>, String) {
    let mut cmd = Command::new(gradcheck_mlp());
    cmd.args(args).env("GRADCHECK_PYTHON", python).env_remove("GRADCHECK_ARGS").stderr(Stdio::null());
    if ci { cmd.env("CI", "1") } else { cmd.env_remove("CI") };
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_test_target_skips_or_fails_without_the_harness() {
    let (code, out) = run_mlp(&[], "/nonexistent/python", false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("test gradcheck ... ignored (skipped: cannot start /nonexistent/python"), "{out}");
    let (code, out) = run_mlp(&[], "/nonexistent/python", true);
    assert_eq!(code, Some(101), "{out}");
    assert!(out.contains("test gradcheck ... FAILED"), "{out}");
}

/// Needs the Python harness: the mlp's checks listed and run one by one, libtest style.
#[test]
fn the_test_target_lists_and_runs_each_check() {
    let Some(python) = common::harness() else { return };
    let (code, list) = run_mlp(&["--list", "--format", "terse"], &python, true);
    assert_eq!(code, Some(0), "{list}");
    let names: Vec<&str> = list.lines().filter_map(|l| l.strip_suffix(": test")).collect();
    assert_eq!(names.len(), list.lines().count(), "nothing but the list on stdout: {list}");
    for n in ["names", "flow[fc1.weight]", "step.applied[fc2.bias] (float64)", "step.effective[fc1.bias] (float32)"] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    let (code, out) = run_mlp(&["--exact", "flow[fc1.weight]"], &python, true);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("test flow[fc1.weight] ... ok") && out.contains("1 passed"), "{out}");
    assert!(out.contains(&format!("{} filtered out", names.len() - 1)), "{out}");
}

#[test]
fn a_cut_models_flow_cases_fail_and_its_twins_pass() {
    let Some(_) = common::harness() else { return };
    let dir = format!("{}/libtest", env!("CARGO_TARGET_TMPDIR"));
    let cases = |cut: bool| {
        gc::cases(&gc::start_harness(move |d: DType, dev: &Device| common::two_layers(d, dev, cut), &["--report-dir", &dir]), true)
    };
    let twin = cases(false);
    assert!(twin.iter().all(|c| !matches!(c.verdict, Verdict::Failed(_))), "{twin:?}");
    let cut = cases(true);
    let flow = cut.iter().find(|c| c.name == "flow[fc1.weight]").expect("a case per check");
    assert!(matches!(&flow.verdict, Verdict::Failed(m) if m.starts_with("flow[fc1.weight]: failed: ")), "{flow:?}");
    assert!(cut.iter().any(|c| c.name == "flow[fc2.weight]" && c.verdict == Verdict::Passed), "{cut:?}");
}

/// Under `cargo nextest` (a process per test), the processes of one run (`NEXTEST_RUN_ID`)
/// reuse the first one's verdicts: with no harness at all, a second process of the same run
/// still reports the checks; one of another run does not.
#[test]
fn processes_of_one_nextest_run_share_the_verdicts() {
    let Some(python) = common::harness() else { return };
    let run = format!("gradcheck-candle-test-{}", std::process::id());
    let mlp = |args: &[&str], python: &str, run: &str| {
        let out = Command::new(gradcheck_mlp()).args(args).env("GRADCHECK_PYTHON", python)
            .env("NEXTEST_RUN_ID", run).env_remove("GRADCHECK_ARGS").env_remove("CI")
            .stderr(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = mlp(&["--exact", "names"], &python, &run);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("test names ... ok"), "{out}");
    let (code, out) = mlp(&["--exact", "flow[fc1.weight]"], "/nonexistent/python", &run);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("test flow[fc1.weight] ... ok"), "the first process's verdicts: {out}");
    let (_, out) = mlp(&[], "/nonexistent/python", &format!("{run}-other"));
    assert!(out.contains("test gradcheck ... ignored"), "another run does not see them: {out}");
    for e in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&format!("gradcheck-candle-{run}")) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
