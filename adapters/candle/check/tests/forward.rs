//! The program's own arguments forwarded to the harness it starts (`gc::run`): which pass,
//! which stay the program's, and the option list compared with the installed harness.

mod common;

use std::process::{Command, Stdio};

use gradcheck_candle as gc;

fn args(v: &[&str]) -> Vec<String> {
    gc::harness_args(v.iter().copied())
}

#[test]
fn harness_options_pass_the_programs_own_stay() {
    assert_eq!(args(&["--seed", "3", "--junit", "out.xml"]), ["--seed", "3", "--junit", "out.xml"]);
    assert_eq!(args(&["--buggy", "--seed=3", "--no-step", "--verbose"]), ["--seed=3", "--no-step"]);
    assert_eq!(args(&["--param", "fc1.*", "--param", "fc2.*"]), ["--param", "fc1.*", "--param", "fc2.*"]);
    // the library picks the direction; help is the program's
    assert!(args(&["--command", "x", "--peer-stdio", "--help", "-h"]).is_empty());
    // a value option that ends the line, a flag given a value, and everything after `--`
    assert!(args(&["--seed"]).is_empty());
    assert!(args(&["--no-step=1"]).is_empty());
    assert_eq!(args(&["--steps", "2", "--", "--seed", "3"]), ["--steps", "2"]);
}

/// The list is typed in Rust: it must name every option the harness has (but the two the
/// library sets itself and --help), with the right arity.
#[test]
fn the_option_list_matches_the_installed_harness() {
    let Some(python) = common::harness() else { return };
    let out = Command::new(&python).args(["-m", "gradcheck", "model", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let usage: String = help.split("\n\n").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = Vec::new();
    for item in usage.split('[').skip(1) {
        let item = item.split(']').next().unwrap();
        let mut words = item.split_whitespace();
        let flag = words.next().unwrap();
        if matches!(flag, "-h" | "--command" | "--peer-stdio") {
            continue;
        }
        found.push((flag.to_string(), words.next().is_some()));
    }
    let listed: Vec<(String, bool)> = gc::HARNESS_OPTIONS.iter().map(|(f, v)| (f.to_string(), *v)).collect();
    assert_eq!(listed, found, "gc::HARNESS_OPTIONS vs `gradcheck model --help`'s usage line");
}

/// `preprocess --buggy --junit PATH --report-dir DIR`: the harness writes the JUnit file where
/// the program's command line said (forwarded), and `--buggy` stayed the program's (a finding).
#[test]
fn run_forwards_the_programs_arguments() {
    let Some(_) = common::harness() else { return };
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().unwrap().parent().unwrap().join("examples").join("preprocess");
    let dir = format!("{}/forward", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |extra: &[&str]| {
        let junit = format!("{dir}/{}.xml", extra.len());
        let code = Command::new(&example).args(extra).args(["--junit", &junit, "--report-dir", &dir])
            .env_remove("GRADCHECK_PROTOCOL").env_remove("GRADCHECK_ARGS")
            .stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().code();
        (code, std::fs::read_to_string(&junit).unwrap_or_default())
    };
    let (code, junit) = run(&["--seed", "3"]);
    assert_eq!(code, Some(0), "the correct variant passes");
    assert!(junit.contains("flow[fc1.weight]"), "the JUnit file is where --junit said: {junit:.200}");
    let (code, junit) = run(&["--buggy"]);
    assert_eq!(code, Some(1), "--buggy stayed the program's: a finding");
    assert!(junit.contains("<failure"), "{junit:.200}");
    // GRADCHECK_ARGS first, the command line after it: the command line's --junit wins
    let (env_junit, argv_junit) = (format!("{dir}/env.xml"), format!("{dir}/argv.xml"));
    let code = Command::new(&example).args(["--junit", &argv_junit, "--report-dir", &dir])
        .env_remove("GRADCHECK_PROTOCOL").env("GRADCHECK_ARGS", format!("--junit {env_junit}"))
        .stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().code();
    assert_eq!(code, Some(0));
    assert!(std::path::Path::new(&argv_junit).exists() && !std::path::Path::new(&env_junit).exists());
}
