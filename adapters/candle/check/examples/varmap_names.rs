//! Seed story: gradients extracted under generic names (`param_0`, ...) and applied by
//! position. Correct: keyed by VarMap name. `--buggy`: collected from the layers output-first
//! and applied to the VarMap's variables in name order, so fc1.weight moves along
//! fc2.weight's gradient: step.applied[fc1.weight] and step.applied[fc2.weight] fail.
mod common;
use candle_core::{DType, Device, Module, Var};
use candle_nn::{loss, Optimizer, VarBuilder, VarMap, SGD};
use common::{batch, buggy, Square};
use gradcheck_candle as gc;

fn main() -> gc::Result<()> {
    gc::run(|dtype: DType, dev: &Device| {
        let vm = VarMap::new();
        let model = Square::new(VarBuilder::from_varmap(&vm, dtype, dev))?;
        let (x, y) = batch(dtype, dev, common::IN, common::IN)?;
        let mut by_name: Vec<(String, Var)> = vm.data().lock().unwrap().clone().into_iter().collect();
        by_name.sort_by(|a, b| a.0.cmp(&b.0)); // fc1.weight, fc2.weight
        let layers = [model.fc2.weight().clone(), model.fc1.weight().clone()]; // output-first
        let mut opt = gc::observe(SGD::new(vm.all_vars(), 0.1)?);
        Ok(gc::Model::new(vm, move || loss::mse(&model.forward(&x)?, &y)).step(move |loss| {
            let mut grads = loss()?.backward()?;
            let named: Vec<(String, _)> = if buggy() {
                layers.iter().enumerate().map(|(i, t)| (format!("param_{i}"), grads.get(t).cloned())).collect()
            } else {
                by_name.iter().map(|(n, v)| (n.clone(), grads.get(v).cloned())).collect()
            };
            for ((_, var), (_, g)) in by_name.iter().zip(named) {
                grads.insert(var, g.unwrap()); // applied by position
            }
            opt.step(&grads)?;
            Ok(gc::Logged::none())
        }))
    })
}
