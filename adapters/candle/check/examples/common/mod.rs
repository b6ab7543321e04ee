//! The "user's own code" the examples check: a small model, one fixed batch, a clipping
//! function and a gradient norm, written as a Candle user writes them. The examples on top
//! of it are the checks (each under 30 lines). Not every example uses every item.
#![allow(dead_code)]

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Module, Result, Tensor, Var};
use candle_nn::{linear, Linear, VarBuilder};

pub const IN: usize = 4;
pub const HIDDEN: usize = 8;
pub const OUT: usize = 3;
pub const BATCH: usize = 16;

/// Two linear layers with a tanh between them.
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
}

impl Mlp {
    pub fn new(vb: VarBuilder) -> Result<Self> {
        Ok(Mlp { fc1: linear(IN, HIDDEN, vb.pp("fc1"))?, fc2: linear(HIDDEN, OUT, vb.pp("fc2"))? })
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.tanh()?)
    }
}

/// One fixed batch of inputs and targets (smooth, deterministic values).
pub fn batch(dtype: DType, dev: &Device, inputs: usize, outputs: usize) -> Result<(Tensor, Tensor)> {
    let x: Vec<f64> = (0..BATCH * inputs).map(|i| (0.37 * i as f64).sin()).collect();
    let y: Vec<f64> = (0..BATCH * outputs).map(|i| (0.23 * i as f64 + 0.5).cos()).collect();
    Ok((
        Tensor::from_vec(x, (BATCH, inputs), dev)?.to_dtype(dtype)?,
        Tensor::from_vec(y, (BATCH, outputs), dev)?.to_dtype(dtype)?,
    ))
}

/// The global L2 norm of the gradients of `vars`, accumulated in float64.
pub fn grad_norm(grads: &GradStore, vars: &[Var]) -> Result<f64> {
    let mut sumsq = 0.0;
    for v in vars {
        if let Some(g) = grads.get(v) {
            sumsq += g.to_dtype(DType::F64)?.sqr()?.sum_all()?.to_scalar::<f64>()?;
        }
    }
    Ok(sumsq.sqrt())
}

/// Scales every gradient by `min(1, max_norm / norm)` in place; returns the pre-clip norm.
pub fn clip_grad_norm(grads: &mut GradStore, vars: &[Var], max_norm: f64) -> Result<f64> {
    let norm = grad_norm(grads, vars)?;
    if norm > max_norm {
        for v in vars {
            if let Some(g) = grads.remove(v) {
                grads.insert(v, (g * (max_norm / norm))?);
            }
        }
    }
    Ok(norm)
}

/// `--buggy` on the command line selects the example's buggy variant.
pub fn buggy() -> bool {
    std::env::args().any(|a| a == "--buggy")
}

/// Two square layers without bias (`fc1.weight`, `fc2.weight`, both 4x4): a gradient applied
/// under the other layer's name has the right shape, so nothing in Candle complains.
pub struct Square {
    pub fc1: candle_nn::Linear,
    pub fc2: candle_nn::Linear,
}

impl Square {
    pub fn new(vb: VarBuilder) -> Result<Self> {
        let fc1 = candle_nn::linear_no_bias(IN, IN, vb.pp("fc1"))?;
        Ok(Square { fc1, fc2: candle_nn::linear_no_bias(IN, IN, vb.pp("fc2"))? })
    }
}

impl Module for Square {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.tanh()?)
    }
}
