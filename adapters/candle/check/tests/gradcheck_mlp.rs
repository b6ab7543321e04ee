//! One `cargo test` case per check of the mlp example's builder (Cargo.toml:
//! `[[test]] name = "gradcheck_mlp"  harness = false`): `cargo test --release --test
//! gradcheck_mlp` lists `flow[fc1.weight]`, `step.applied[fc2.bias]`, ... one by one.
#[path = "../examples/mlp.rs"]
mod mlp;

fn main() {
    // the report goes to cargo's scratch directory, not into the source tree
    gradcheck_candle::libtest_main_with(mlp::build, &["--report-dir", concat!(env!("CARGO_TARGET_TMPDIR"), "/gradcheck_mlp")]);
}
