//! Used by the crate's tests (tests/protocol.rs): a model whose code prints to stdout on every
//! evaluation, as user code does. Under the harness the library has pointed file descriptor 1
//! at stderr, so the protocol stream stays clean (a print before `gc::run` is not covered).
use candle_core::{DType, Device, Tensor};
use candle_nn::{Init, VarMap};
use gradcheck_candle as gc;

fn main() -> gc::Result<()> {
    gc::run(|dtype: DType, dev: &Device| {
        println!("noisy: building {dtype:?} (stdout)");
        let vm = VarMap::new();
        let w = vm.get(3, "w", Init::Const(0.5), dtype, dev)?;
        let x = Tensor::new(&[1.0f64, -2.0, 3.0], dev)?.to_dtype(dtype)?;
        Ok(gc::Model::new(vm, move || {
            println!("noisy: evaluating the loss (stdout)");
            (&w * &x)?.sqr()?.sum_all()
        }))
    })
}
