//! The values a check reaches inside the user's build: knobs the harness may override, and
//! optimizers whose input is recorded. Both register with the build the library is running
//! (a thread-local context); outside a check they are plain values and plain optimizers.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor, Var};
use candle_nn::{AdamW, Optimizer, SGD};
use serde_json::{json, Value};

/// A number the user's step reads (`max_norm`) whose value the harness may set per step
/// experiment; its default is what the user's training uses.
#[derive(Debug, Clone)]
pub struct Knob {
    pub(crate) name: Rc<str>,
    pub(crate) default: f64,
    pub(crate) value: Rc<Cell<f64>>,
}

impl Knob {
    /// The current value: the default, or what the harness set for this experiment.
    pub fn get(&self) -> f64 {
        self.value.get()
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A knob named `name` with the user's `default`.
pub fn knob(name: &str, default: f64) -> Knob {
    let k = Knob { name: Rc::from(name), default, value: Rc::new(Cell::new(default)) };
    CONTEXT.with(|c| {
        if let Some(ctx) = c.borrow_mut().as_mut() {
            ctx.knobs.push(k.clone());
        }
    });
    k
}

/// What an observed optimizer was handed during one call of the user's step.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    /// The build's registry, set by the library after the build.
    pub(crate) vars: Vec<(String, Var)>,
    pub(crate) active: bool,
    /// Per registry name: the sum of the gradients received under it (float64 values).
    pub(crate) applied: BTreeMap<String, Vec<f64>>,
    /// The optimizer's declaration (docs/protocol-model.md), `null` when not readable.
    pub(crate) declaration: Value,
    /// What the user declared with [`Observed::declare`]: it replaces what is read.
    pub(crate) declared: Option<Value>,
}

impl Recorder {
    fn record(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        if !self.active {
            return Ok(());
        }
        for (name, var) in &self.vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                let vals = to_f64(g)?;
                match self.applied.get_mut(name) {
                    Some(acc) => acc.iter_mut().zip(&vals).for_each(|(a, v)| *a += v),
                    None => {
                        self.applied.insert(name.clone(), vals);
                    }
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn to_f64(t: &Tensor) -> candle_core::Result<Vec<f64>> {
    t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()
}

/// Knobs and recorders created while the library runs the user's builder.
#[derive(Default)]
pub(crate) struct BuildContext {
    pub(crate) knobs: Vec<Knob>,
    pub(crate) recorders: Vec<Rc<RefCell<Recorder>>>,
}

thread_local! {
    static CONTEXT: RefCell<Option<BuildContext>> = const { RefCell::new(None) };
}

/// Runs `f` (the user's builder) collecting the knobs and observed optimizers it creates.
pub(crate) fn collect<T>(f: impl FnOnce() -> T) -> (T, BuildContext) {
    CONTEXT.with(|c| *c.borrow_mut() = Some(BuildContext::default()));
    let out = f();
    let ctx = CONTEXT.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (out, ctx)
}

/// An optimizer whose input is recorded by registry name, then handed on unchanged.
pub struct Observed<O: Optimizer> {
    inner: O,
    recorder: Rc<RefCell<Recorder>>,
}

/// Wraps the user's optimizer: it keeps doing exactly what it did, and the check sees the
/// `GradStore` it receives. SGD's and AdamW's settings are read from the optimizer itself.
pub fn observe<O: Optimizer + 'static>(opt: O) -> Observed<O> {
    let recorder = Rc::new(RefCell::new(Recorder { declaration: declaration(&opt), ..Recorder::default() }));
    CONTEXT.with(|c| {
        if let Some(ctx) = c.borrow_mut().as_mut() {
            ctx.recorders.push(recorder.clone());
        }
    });
    Observed { inner: opt, recorder }
}

/// What an optimizer the library cannot read does, declared by the user (docs/protocol-model.md's
/// optimizer declarations): `step.effective` replays it on what the optimizer received and
/// compares the update. Hand it to [`Observed::declare`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Declared {
    /// `p -= lr * g`.
    Sgd { lr: f64 },
    /// Adam (Kingma and Ba, with bias correction), no weight decay.
    Adam { lr: f64, beta1: f64, beta2: f64, eps: f64 },
    /// Adam with decoupled weight decay (`p *= 1 - lr * weight_decay` first, as Candle's
    /// `AdamW` and torch's do).
    AdamW { lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64 },
}

impl Declared {
    /// Plain SGD with learning rate `lr`.
    pub fn sgd(lr: f64) -> Self {
        Declared::Sgd { lr }
    }

    /// Adam: `lr`, `beta1`, `beta2`, `eps` (e.g. `0.001, 0.9, 0.999, 1e-8`).
    pub fn adam(lr: f64, beta1: f64, beta2: f64, eps: f64) -> Self {
        Declared::Adam { lr, beta1, beta2, eps }
    }

    /// AdamW: Adam's settings and the decoupled `weight_decay`.
    pub fn adamw(lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64) -> Self {
        Declared::AdamW { lr, beta1, beta2, eps, weight_decay }
    }

    /// The declaration on the wire; panics on a value that is not finite (JSON has none, and
    /// no optimizer runs with one), naming it.
    pub fn to_json(&self) -> Value {
        let v = match *self {
            Declared::Sgd { lr } => json!({"kind": "sgd", "lr": lr}),
            Declared::Adam { lr, beta1, beta2, eps } => {
                json!({"kind": "adam", "lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps})
            }
            Declared::AdamW { lr, beta1, beta2, eps, weight_decay } => json!({"kind": "adamw", "lr": lr,
                "beta1": beta1, "beta2": beta2, "eps": eps, "weight_decay": weight_decay}),
        };
        for (k, x) in v.as_object().into_iter().flatten() {
            assert!(!x.is_null(), "gradcheck: the declared optimizer's {k} is not finite: {self:?}");
        }
        v
    }
}

/// docs/protocol-model.md's optimizer declaration for the optimizers candle-nn ships.
fn declaration<O: Optimizer + 'static>(opt: &O) -> Value {
    let any: &dyn Any = opt;
    if let Some(a) = any.downcast_ref::<AdamW>() {
        let p = a.params();
        json!({"kind": "adamw", "lr": p.lr, "beta1": p.beta1, "beta2": p.beta2, "eps": p.eps,
               "weight_decay": p.weight_decay})
    } else if let Some(s) = any.downcast_ref::<SGD>() {
        json!({"kind": "sgd", "lr": s.learning_rate()})
    } else {
        Value::Null
    }
}

impl<O: Optimizer + 'static> Observed<O> {
    /// Declares what the optimizer does, for one the library cannot read (anything but
    /// candle-nn's `SGD` and `AdamW`): without it the step's update is not compared
    /// (`step.effective` is skipped). Given for `SGD` or `AdamW`, it replaces what is read.
    ///
    /// ```no_run
    /// # use gradcheck_candle as gc;
    /// # fn f(my_adam: candle_nn::SGD) {
    /// let mut opt = gc::observe(my_adam).declare(gc::Declared::adam(1e-3, 0.9, 0.999, 1e-8));
    /// # }
    /// ```
    pub fn declare(self, declared: Declared) -> Self {
        {
            let mut r = self.recorder.borrow_mut();
            let v = declared.to_json();
            r.declaration = v.clone();
            r.declared = Some(v);
        }
        self
    }

    pub fn inner(&self) -> &O {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }
}

impl<O: Optimizer + 'static> Optimizer for Observed<O> {
    type Config = O::Config;

    fn new(vars: Vec<Var>, config: Self::Config) -> candle_core::Result<Self> {
        Ok(observe(O::new(vars, config)?))
    }

    fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        {
            let mut r = self.recorder.borrow_mut();
            r.declaration = r.declared.clone().unwrap_or_else(|| declaration(&self.inner));
            r.record(grads)?;
        }
        self.inner.step(grads)
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }
}
