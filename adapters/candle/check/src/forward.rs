//! The program's own command line, forwarded to the harness it starts: `cargo run --example
//! mlp -- --seed 3 --junit out.xml` passes `--seed 3 --junit out.xml` on to `gradcheck model`,
//! and leaves everything else (`--buggy`, the user's own flags) to the program.

/// The options of `gradcheck model` a program may forward, and whether each takes a value.
/// `--command` and `--peer-stdio` are not among them (the library picks the direction), nor
/// `--help`. A test compares this list with the installed harness's `--help`.
pub const HARNESS_OPTIONS: &[(&str, bool)] = &[
    ("--dtype", true),
    ("--param", true),
    ("--exclude", true),
    ("--stop", true),
    ("--directions", true),
    ("--per-tensor", true),
    ("--no-step", false),
    ("--steps", true),
    ("--seed", true),
    ("--report-dir", true),
    ("--junit", true),
    ("--request-timeout", true),
];

/// The arguments of `argv` (without the program name) that the harness understands, in order:
/// `--seed 3`, `--seed=3` and `--no-step`; anything else is the program's and is left out. An
/// option that takes a value but ends the line is left out too (the program may own it).
/// After `--`, nothing is forwarded.
pub fn harness_args<I, S>(argv: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let argv: Vec<String> = argv.into_iter().map(Into::into).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--" {
            break;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (a.as_str(), None),
        };
        match HARNESS_OPTIONS.iter().find(|(name, _)| *name == flag) {
            Some((_, true)) if inline.is_some() => out.push(a.clone()),
            Some((_, true)) if i + 1 < argv.len() => {
                out.push(a.clone());
                out.push(argv[i + 1].clone());
                i += 1;
            }
            Some((_, false)) if inline.is_none() => out.push(a.clone()),
            _ => {}
        }
        i += 1;
    }
    out
}
