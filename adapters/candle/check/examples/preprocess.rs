//! Seed story: preprocessing between two layers. Correct: centring with tensor ops.
//! `--buggy`: through `to_vec2()` and `Tensor::new` (a host round trip), so no gradient
//! reaches fc1: flow[fc1.weight] and flow[fc1.bias] fail (absent from the GradStore).
mod common;
use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{loss, VarBuilder, VarMap};
use common::{batch, buggy, Mlp};
use gradcheck_candle as gc;

fn centre(h: &Tensor) -> Result<Tensor> {
    if !buggy() {
        return h.broadcast_sub(&h.mean_keepdim(1)?);
    }
    let rows: Vec<Vec<f64>> = h.to_dtype(DType::F64)?.to_vec2()?;
    let rows: Vec<Vec<f64>> = rows.iter().map(|r| {
        let m = r.iter().sum::<f64>() / r.len() as f64;
        r.iter().map(|v| v - m).collect()
    }).collect();
    Tensor::new(rows, h.device())?.to_dtype(h.dtype())
}

fn main() -> gc::Result<()> {
    gc::run(|dtype: DType, dev: &Device| {
        let vm = VarMap::new();
        let mlp = Mlp::new(VarBuilder::from_varmap(&vm, dtype, dev))?;
        let (x, y) = batch(dtype, dev, common::IN, common::OUT)?;
        let forward = move || mlp.fc2.forward(&centre(&mlp.fc1.forward(&x)?)?.tanh()?);
        Ok(gc::Model::new(vm, move || loss::mse(&forward()?, &y)))
    })
}
