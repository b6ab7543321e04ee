//! What the user's builder returns: the registry, the loss, and optionally the training step
//! and the intent it is compared with.

use candle_core::Tensor;
use candle_nn::VarMap;

use crate::observe::Knob;

/// Which gradient the number a step logs is the norm of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The gradient before clipping (what most training loops log).
    PreClip,
    /// The gradient after clipping.
    PostClip,
}

impl Which {
    pub(crate) fn wire(self) -> &'static str {
        match self {
            Which::PreClip => "pre_clip",
            Which::PostClip => "post_clip",
        }
    }
}

/// What one call of the user's step reports: the gradient norm its logs show, if any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logged {
    pub grad_norm: Option<f64>,
    pub which: Which,
}

impl Logged {
    /// The step logs the norm of the gradient before clipping.
    pub fn pre_clip(norm: f64) -> Self {
        Logged { grad_norm: Some(norm), which: Which::PreClip }
    }

    /// The step logs the norm of the gradient after clipping.
    pub fn post_clip(norm: f64) -> Self {
        Logged { grad_norm: Some(norm), which: Which::PostClip }
    }

    /// The step logs no gradient norm (`grad_norm` is not checked).
    pub fn none() -> Self {
        Logged { grad_norm: None, which: Which::PreClip }
    }
}

/// The loss closure: the user's forward on their fixed batch, a scalar.
pub type LossFn = Box<dyn Fn() -> candle_core::Result<Tensor>>;
/// The step closure: the body of the user's training loop, handed the loss closure.
pub type StepFn = Box<dyn FnMut(&dyn Fn() -> candle_core::Result<Tensor>) -> candle_core::Result<Logged>>;

/// A user's model as the check sees it: the `VarMap` (the registry), the loss, and optionally
/// the training step, the clipping it intends and the cuts it declares.
pub struct Model {
    pub(crate) varmap: VarMap,
    pub(crate) loss: LossFn,
    pub(crate) step: Option<StepFn>,
    pub(crate) clip: Option<Knob>,
    pub(crate) stopped: Vec<String>,
    pub(crate) name: Option<String>,
}

impl Model {
    /// The parameters (by `VarMap` name) and the loss on one fixed batch.
    pub fn new(params: VarMap, loss: impl Fn() -> candle_core::Result<Tensor> + 'static) -> Self {
        Model { varmap: params, loss: Box::new(loss), step: None, clip: None, stopped: Vec::new(), name: None }
    }

    /// The training loop's body: compute gradients from `loss()`, clip, hand them to the
    /// (observed) optimizer, and return what the logs show.
    pub fn step(
        mut self,
        f: impl FnMut(&dyn Fn() -> candle_core::Result<Tensor>) -> candle_core::Result<Logged> + 'static,
    ) -> Self {
        self.step = Some(Box::new(f));
        self
    }

    /// The step intends to clip the global L2 norm of the gradient to `max_norm` (a knob the
    /// harness lowers to exercise the clipping branch).
    pub fn clip_global_norm(mut self, max_norm: &Knob) -> Self {
        self.clip = Some(max_norm.clone());
        self
    }

    /// Parameters (registry-name glob, e.g. `"target.*"`) cut from the loss on purpose.
    pub fn stop_gradient(mut self, glob: &str) -> Self {
        self.stopped.push(glob.to_string());
        self
    }

    /// The model's name in the report (default: the program's file name).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
}
