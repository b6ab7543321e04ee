//! Seed story: clipping by a second backward of the rescaled loss. Correct in Candle
//! (`backward()` returns a fresh GradStore). `--buggy`: the user merges the first pass's
//! gradients into the second store (what an accumulating engine does), so the optimizer
//! receives (1 + s) g instead of s g: step.applied finds factor (1 + s) / s.
mod common;
use candle_core::{DType, Device, Module};
use candle_nn::{loss, Optimizer, VarBuilder, VarMap, SGD};
use common::{batch, buggy, grad_norm, Mlp};
use gradcheck_candle as gc;

fn main() -> gc::Result<()> {
    gc::run(|dtype: DType, dev: &Device| {
        let vm = VarMap::new();
        let mlp = Mlp::new(VarBuilder::from_varmap(&vm, dtype, dev))?;
        let (x, y) = batch(dtype, dev, common::IN, common::OUT)?;
        let (vars, max_norm) = (vm.all_vars(), gc::knob("max_norm", 1.0));
        let mut opt = gc::observe(SGD::new(vm.all_vars(), 0.05)?);
        Ok(gc::Model::new(vm, move || loss::mse(&mlp.forward(&x)?, &y))
            .clip_global_norm(&max_norm)
            .step(move |loss| {
                let l = loss()?;
                let grads = l.backward()?;
                let norm = grad_norm(&grads, &vars)?;
                if norm <= max_norm.get() {
                    opt.step(&grads)?;
                } else {
                    let mut scaled = (l * (max_norm.get() / norm))?.backward()?; // second pass
                    for v in vars.iter().filter(|_| buggy()) {
                        scaled.insert(v, (scaled.get(v).unwrap() + grads.get(v).unwrap())?); // "accumulated"
                    }
                    opt.step(&scaled)?;
                }
                Ok(gc::Logged::pre_clip(norm))
            }))
    })
}
