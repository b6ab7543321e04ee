//! Seed story: the gradient norm a training loop logs. Correct: the global L2 norm of the
//! gradients. `--buggy`: sqrt(|loss|), a proxy: grad_norm fails with the true norm beside it.
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
        let (vars, mut opt) = (vm.all_vars(), gc::observe(SGD::new(vm.all_vars(), 0.05)?));
        Ok(gc::Model::new(vm, move || loss::mse(&mlp.forward(&x)?, &y)).step(move |loss| {
            let l = loss()?;
            let grads = l.backward()?;
            let norm = match buggy() {
                true => l.to_dtype(DType::F64)?.to_scalar::<f64>()?.abs().sqrt(),
                false => grad_norm(&grads, &vars)?,
            };
            opt.step(&grads)?;
            Ok(gc::Logged::pre_clip(norm))
        }))
    })
}
