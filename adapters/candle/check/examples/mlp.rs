//! The main example: a correct MLP trained with AdamW and global-norm clipping.
//! `cargo run --release --example mlp` (starts the harness), or
//! `gradcheck model --command "target/release/examples/mlp"`; tests/gradcheck_mlp.rs reports
//! each check of `build` as its own `cargo test` case.
mod common;
use candle_core::{DType, Device, Module};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use common::{batch, clip_grad_norm, Mlp};
use gradcheck_candle as gc;

pub fn build(dtype: DType, dev: &Device) -> gc::Result<gc::Model> {
    let vm = VarMap::new();
    let mlp = Mlp::new(VarBuilder::from_varmap(&vm, dtype, dev))?;
    let (x, y) = batch(dtype, dev, common::IN, common::OUT)?; // one fixed batch
    let mut opt = gc::observe(AdamW::new(vm.all_vars(), ParamsAdamW::default())?);
    let max_norm = gc::knob("max_norm", 1.0); // the harness may lower it
    let vars = vm.all_vars();
    Ok(gc::Model::new(vm, move || loss::mse(&mlp.forward(&x)?, &y))
        .clip_global_norm(&max_norm)
        .step(move |loss| {
            let mut grads = loss()?.backward()?;
            let norm = clip_grad_norm(&mut grads, &vars, max_norm.get())?;
            opt.step(&grads)?;
            Ok(gc::Logged::pre_clip(norm)) // the number the logs show
        }))
}

#[allow(dead_code)] // not called when tests/gradcheck_mlp.rs includes this file
fn main() -> gc::Result<()> {
    gc::run(build) // `-- --seed 3 --junit out.xml`: options for the harness pass through
}
