//! # gradcheck-candle: check your own Candle model and training step
//!
//! Hand the library a *builder* (your model, one fixed batch of your data, your loss and,
//! optionally, your training step) and it answers the questions of gradcheck's harness
//! (`gradcheck model`, docs/protocol-model.md) by calling your closures: it perturbs your
//! parameters along seeded directions and restores them bitwise, reads Candle's gradients by
//! `VarMap` name, finds `Var`s the loss reaches that the `VarMap` does not hold, and records
//! what your optimizer receives. The harness keeps every verdict.
//!
//! ```no_run
//! use candle_core::{DType, Device, Module};
//! use candle_nn::{linear, loss, VarBuilder, VarMap};
//! use gradcheck_candle as gc;
//!
//! fn main() -> gc::Result<()> {
//!     gc::run(|dtype: DType, dev: &Device| {
//!         let vm = VarMap::new();
//!         let fc = linear(4, 2, VarBuilder::from_varmap(&vm, dtype, dev).pp("fc"))?;
//!         let x = candle_core::Tensor::ones((8, 4), dtype, dev)?;
//!         let y = candle_core::Tensor::zeros((8, 2), dtype, dev)?;
//!         Ok(gc::Model::new(vm, move || loss::mse(&fc.forward(&x)?, &y)))
//!     })
//! }
//! ```
//!
//! Run it three ways: `cargo run --release --example NAME` (starts the harness,
//! `python3 -m gradcheck model --peer-stdio`, and exits with its code; `-- --seed 3 --junit
//! out.xml`: the options the harness understands pass through, [`harness_args`]),
//! `gradcheck model --command "target/release/examples/NAME"` (the harness starts it), or from
//! `#[test]` with [`check`], or as one test per check with [`libtest_main`] (a
//! `harness = false` test target). An optimizer other than candle-nn's `SGD` and `AdamW` is
//! declared with [`Observed::declare`]. See docs/engines/candle-user.md.

mod builds;
pub mod directions;
mod forward;
mod launch;
mod libtest;
mod model;
mod observe;
mod serve;
mod step;
pub mod wire;

pub use forward::{harness_args, HARNESS_OPTIONS};
pub use launch::{check, check_with, run, serve, start_harness, HarnessOutcome, Served};
pub use libtest::{cases, libtest_main, libtest_main_with, Case, Verdict};
pub use model::{Logged, Model, Which};
pub use observe::{knob, observe, Declared, Knob, Observed};

/// Candle's result type: the builder, the loss and the step return it.
pub type Result<T> = candle_core::Result<T>;

/// The version of candle-core this crate was built against (read from Cargo.lock).
pub const CANDLE_VERSION: &str = env!("CANDLE_CORE_VERSION");
/// This library's version, reported in `hello`.
pub const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");
