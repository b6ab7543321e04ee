//! What several of the crate's test files need: the installed harness, and a two-layer model
//! with an optional cut. Each file uses part of it.
#![allow(dead_code)]

use std::process::{Command, Stdio};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarMap;
use gradcheck_candle as gc;

/// The Python that runs the harness (`GRADCHECK_PYTHON`, default `python3`), or None when
/// `python -m gradcheck model --help` fails there: the caller skips, except under CI, where
/// this panics.
pub fn harness() -> Option<String> {
    let python = std::env::var("GRADCHECK_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python).args(["-m", "gradcheck", "model", "--help"]).stdout(Stdio::null())
        .stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false);
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI is set but `{python} -m gradcheck model` is not available");
        eprintln!("skipped: `{python} -m gradcheck model --help` failed (the harness is not installed)");
        return None;
    }
    Some(python)
}

/// fc1 -> tanh -> fc2 with an MSE loss on a fixed batch; `cut` detaches after fc1.
pub fn two_layers(dtype: DType, dev: &Device, cut: bool) -> candle_core::Result<gc::Model> {
    let vm = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&vm, dtype, dev);
    let (fc1, fc2) = (candle_nn::linear(3, 4, vb.pp("fc1"))?, candle_nn::linear(4, 2, vb.pp("fc2"))?);
    let x = Tensor::new(&[[0.5f64, -1.0, 2.0], [1.5, 0.25, -0.75]], dev)?.to_dtype(dtype)?;
    let y = Tensor::new(&[[1.0f64, 0.0], [0.0, 1.0]], dev)?.to_dtype(dtype)?;
    Ok(gc::Model::new(vm, move || {
        let h = fc1.forward(&x)?.tanh()?;
        let h = if cut { h.detach() } else { h };
        candle_nn::loss::mse(&fc2.forward(&h)?, &y)
    }))
}
