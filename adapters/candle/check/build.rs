// Reads the candle-core version actually built from the workspace's Cargo.lock, so that `hello`
// reports the engine version of this build (not a number typed by hand).
use std::{env, fs, path::Path};

fn main() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).to_path_buf();
    let lock = dir.join("..").join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    let mut version = "unknown".to_string();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"candle-core\"" {
            if let Some(v) = lines.next() {
                version = v.trim().trim_start_matches("version = ").trim_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=CANDLE_CORE_VERSION={version}");
}
