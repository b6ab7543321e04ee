//! A real Candle trap, no bug in the user's code: `RmsNorm::forward` on a contiguous input
//! runs the fused `ops::rms_norm`, applied with `apply_op2_no_bwd` (candle-nn 0.11.1): no
//! gradient reaches anything upstream, silently, and float64 is refused ("unsupported dtype
//! for rmsnorm F64"; the check falls back to float32). `--buggy` uses it: flow[fc1.*] and flow[norm.weight] fail.
//! The correct variant calls `RmsNorm::forward_diff` (differentiable ops).
mod common;
use candle_core::{DType, Device, Module};
use candle_nn::{linear, loss, rms_norm, VarBuilder, VarMap};
use common::{batch, buggy, HIDDEN, IN, OUT};
use gradcheck_candle as gc;

fn main() -> gc::Result<()> {
    gc::run(|dtype: DType, dev: &Device| {
        let vm = VarMap::new();
        let vb = VarBuilder::from_varmap(&vm, dtype, dev);
        let (fc1, fc2) = (linear(IN, HIDDEN, vb.pp("fc1"))?, linear(HIDDEN, OUT, vb.pp("fc2"))?);
        let norm = rms_norm(HIDDEN, 1e-5, vb.pp("norm"))?;
        let (x, y) = batch(dtype, dev, IN, OUT)?;
        Ok(gc::Model::new(vm, move || {
            let h = fc1.forward(&x)?;
            let h = if buggy() { norm.forward(&h)? } else { norm.forward_diff(&h)? };
            loss::mse(&fc2.forward(&h.tanh()?)?, &y)
        }))
    })
}
