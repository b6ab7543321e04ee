//! The two launch directions of docs/protocol-model.md: serve the harness that started this
//! program (`GRADCHECK_PROTOCOL` set), or start the harness and serve it over its pipes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use candle_core::{DType, Device};
use serde_json::Value;

use crate::forward::harness_args;
use crate::model::Model;
use crate::serve::{answer, Server};

/// What serving a conversation saw.
#[derive(Debug, Default)]
pub struct Served {
    /// Requests answered.
    pub requests: usize,
    /// The verdicts `model.done` carried, if the harness sent them.
    pub checks: Option<Value>,
}

/// Answers requests read from `input` on `output` until `input` closes (or `shutdown`).
pub fn serve<B>(build: B, input: impl BufRead, mut output: impl Write) -> std::io::Result<Served>
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    let mut server = Server::new(Box::new(build));
    let mut requests = 0;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        requests += 1;
        let (reply, stop) = answer(&mut server, &line);
        let mut text = reply.to_string();
        text.push('\n');
        output.write_all(text.as_bytes())?;
        output.flush()?;
        if stop {
            break;
        }
    }
    Ok(Served { requests, checks: server.checks.take() })
}

/// Whether the harness started this program (`GRADCHECK_PROTOCOL=model`).
fn under_harness() -> bool {
    std::env::var("GRADCHECK_PROTOCOL").map(|v| !v.is_empty()).unwrap_or(false)
}

/// Points file descriptor 1 at stderr and returns the protocol's own handle on the old stdout,
/// so that a `println!` in user code cannot corrupt the stream.
#[cfg(unix)]
fn private_stdout() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    extern "C" {
        fn dup(fd: i32) -> i32;
        fn dup2(old: i32, new: i32) -> i32;
    }
    std::io::stdout().flush()?;
    // SAFETY: plain POSIX calls on the process's standard descriptors; `fd` is a new
    // descriptor owned by the returned File only.
    unsafe {
        let fd = dup(1);
        if fd < 0 || dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(std::fs::File::from_raw_fd(fd))
    }
}

#[cfg(not(unix))]
fn private_stdout() -> std::io::Result<std::io::Stdout> {
    Ok(std::io::stdout()) // no redirection: print to stderr in user code (docs/engines/candle-user.md)
}

/// How a harness run ended.
#[derive(Debug)]
pub enum HarnessOutcome {
    /// The harness could not be started (or exited before asking anything): the reason.
    Unavailable(String),
    /// The harness ran: its exit code (0 passed, 1 a finding, 2 usage or model failure).
    Ran { code: i32, served: Served },
}

const INSTALL: &str = "install the harness (the Python package gradcheck): `pip install -e <gradcheck checkout>`, \
or set GRADCHECK_PYTHON to an interpreter that has it";

/// `GRADCHECK_ARGS`, split on whitespace.
fn env_args() -> Vec<String> {
    std::env::var("GRADCHECK_ARGS").unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// Starts `$GRADCHECK_PYTHON -m gradcheck model --peer-stdio ARGS $GRADCHECK_ARGS` and serves it.
pub fn start_harness<B>(build: B, args: &[&str]) -> HarnessOutcome
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(env_args());
    spawn_and_serve(build, &all)
}

/// Starts `$GRADCHECK_PYTHON -m gradcheck model --peer-stdio ARGS` and serves it.
fn spawn_and_serve<B>(build: B, args: &[String]) -> HarnessOutcome
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    let python = std::env::var("GRADCHECK_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "gradcheck", "model", "--peer-stdio"]).args(args)
        .env_remove("GRADCHECK_PROTOCOL")
        .stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return HarnessOutcome::Unavailable(format!("cannot start {python}: {e}; {INSTALL}")),
    };
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let served = serve(build, BufReader::new(stdout), stdin).unwrap_or_default();
    let code = child.wait().ok().and_then(|s| s.code()).unwrap_or(2);
    if served.requests == 0 && code != 2 {
        return HarnessOutcome::Unavailable(format!(
            "`{python} -m gradcheck model` exited with code {code} before asking anything; {INSTALL}"));
    }
    HarnessOutcome::Ran { code, served }
}

/// [`start_harness`] with file descriptor 1 pointed at stderr while the harness runs, so that
/// prints in the user's builder, loss or step cannot mix into a test runner's stdout (the
/// `--list` that `cargo nextest` parses); restored afterwards.
#[cfg(unix)]
pub(crate) fn start_harness_quiet_stdout<B>(build: B, args: &[&str]) -> HarnessOutcome
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    extern "C" {
        fn dup(fd: i32) -> i32;
        fn dup2(old: i32, new: i32) -> i32;
        fn close(fd: i32) -> i32;
    }
    let _ = std::io::stdout().flush();
    // SAFETY: plain POSIX calls on the process's standard descriptors; `saved` is closed here.
    let saved = unsafe { dup(1) };
    if saved < 0 || unsafe { dup2(2, 1) } < 0 {
        return start_harness(build, args);
    }
    let outcome = start_harness(build, args);
    let _ = std::io::stdout().flush();
    // SAFETY: as above; puts the original stdout back.
    unsafe {
        dup2(saved, 1);
        close(saved);
    }
    outcome
}

#[cfg(not(unix))]
pub(crate) fn start_harness_quiet_stdout<B>(build: B, args: &[&str]) -> HarnessOutcome
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    start_harness(build, args)
}

/// The entry point of a check program: under the harness (`GRADCHECK_PROTOCOL` set) it serves
/// on stdin/stdout and returns when the harness closes the pipe; otherwise it starts the harness,
/// serves it, and exits the process with the harness's code (0 passed, 1 a finding, 2 usage or
/// model failure; 2 also when the harness cannot be started). When it starts the harness it
/// hands it `$GRADCHECK_ARGS`, then the program's own arguments that the harness understands
/// ([`harness_args`](crate::harness_args): `--seed 3`, `--junit out.xml`, ...; the program's
/// own come last, so they win); the rest (`--buggy`) stay the program's.
pub fn run<B>(build: B) -> crate::Result<()>
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    if under_harness() {
        let out = private_stdout().map_err(candle_core::Error::wrap)?;
        serve(build, std::io::stdin().lock(), out).map_err(candle_core::Error::wrap)?;
        return Ok(());
    }
    let mut args = env_args();
    args.extend(harness_args(std::env::args().skip(1)));
    match spawn_and_serve(build, &args) {
        HarnessOutcome::Unavailable(why) => {
            eprintln!("gradcheck-candle: {why}");
            std::process::exit(2)
        }
        HarnessOutcome::Ran { code: 0, .. } => Ok(()),
        HarnessOutcome::Ran { code, .. } => std::process::exit(code),
    }
}

/// For `#[test]`: starts the harness and serves it; panics with the failed checks when it
/// reports a finding (exit 1) or cannot check the model (exit 2). Where the harness cannot be
/// started the test is skipped with the install line, except when `CI` is set (then it fails).
///
/// ```no_run
/// use candle_core::{DType, Device, Module, Tensor};
/// use candle_nn::{linear, loss, VarBuilder, VarMap};
/// use gradcheck_candle as gc;
///
/// fn my_builder(dtype: DType, dev: &Device) -> gc::Result<gc::Model> {
///     let vm = VarMap::new();
///     let fc = linear(4, 2, VarBuilder::from_varmap(&vm, dtype, dev).pp("fc"))?;
///     let (x, y) = (Tensor::ones((8, 4), dtype, dev)?, Tensor::zeros((8, 2), dtype, dev)?);
///     Ok(gc::Model::new(vm, move || loss::mse(&fc.forward(&x)?, &y)))
/// }
///
/// #[test]
/// fn gradients_and_training_step() {
///     gradcheck_candle::check(my_builder);
/// }
/// ```
pub fn check<B>(build: B)
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    check_with(build, &[])
}

/// [`check`] with options for the harness (`gradcheck model --help`), e.g.
/// `&["--dtype", "float64", "--directions", "8"]`; `GRADCHECK_ARGS` is appended after them.
pub fn check_with<B>(build: B, args: &[&str])
where
    B: Fn(DType, &Device) -> candle_core::Result<Model>,
{
    match start_harness(build, args) {
        HarnessOutcome::Unavailable(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("gradcheck: {why}");
            }
            eprintln!("gradcheck: skipped: {why}");
        }
        HarnessOutcome::Ran { code: 0, .. } => {}
        HarnessOutcome::Ran { code, served } => panic!("gradcheck model exited with {code}:\n{}", failures(&served)),
    }
}

/// The checks of `model.done` that did not pass, one per line.
fn failures(served: &Served) -> String {
    let Some(checks) = served.checks.as_ref().and_then(|c| c.get("checks")).and_then(Value::as_array) else {
        return "(no verdicts received; the report is on stderr)".to_string();
    };
    let lines: Vec<String> = checks.iter().filter(|c| {
        let s = c.get("status").and_then(Value::as_str).unwrap_or("");
        !matches!(s.to_ascii_lowercase().as_str(), "passed" | "skipped")
    }).map(|c| format!("  {}: {} {}",
        c.get("name").and_then(Value::as_str).unwrap_or("?"),
        c.get("status").and_then(Value::as_str).unwrap_or("?"),
        c.get("message").and_then(Value::as_str).unwrap_or(""))).collect();
    if lines.is_empty() { "(every verdict passed; the report is on stderr)".to_string() } else { lines.join("\n") }
}
