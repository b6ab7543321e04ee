//! Minimal reproducers of the Candle 0.11.1 gradient discrepancies gradcheck found
//! (docs/known-discrepancies.md, section "Candle").  `cargo run --release --example repro`.
use candle_core::{DType, Device, Module, Tensor, Var};

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    // 1. max_pool2d: the gradient of a unique window maximum is 1/(kh*kw), not 1
    let x = Var::from_tensor(&Tensor::arange(0f64, 16., &dev)?.reshape((1, 1, 4, 4))?)?;
    let g = x.max_pool2d(2)?.sum_all()?.backward()?;
    println!("max_pool2d grad at the maxima: {:?} (expected 1)",
             g.get(&x).unwrap().flatten_all()?.to_vec1::<f64>()?[5]);
    // 2. conv1d with batch > 1 and more than one output channel: the input gradient of every
    //    batch element after the first is wrong; the cause is conv_transpose1d, which reads
    //    batch element b >= 1 with the wrong stride (the kernel gradient is wrong too)
    let g = Tensor::arange(0f64, 16., &dev)?.reshape((2, 2, 4))?;
    let k = Tensor::new(&[1f64, 10.], &dev)?.reshape((2, 1, 1))?;
    let exact = (g.narrow(1, 0, 1)? + (g.narrow(1, 1, 1)? * 10.)?)?;
    println!("conv_transpose1d: {:?}\n        expected: {:?}",
             g.conv_transpose1d(&k, 0, 0, 1, 1, 1)?.to_vec3::<f64>()?, exact.to_vec3::<f64>()?);
    let x = Var::from_tensor(&Tensor::zeros((2, 1, 4), DType::F64, &dev)?)?;
    let grads = x.conv1d(&k, 0, 1, 1, 1)?.broadcast_mul(&g)?.sum_all()?.backward()?;
    println!("conv1d dx: {:?} (expected the same)", grads.get(&x).unwrap().to_vec3::<f64>()?);
    // 3. conv2d stride 2, padding 1 on a non-square input: backward fails
    let x = Var::from_tensor(&Tensor::ones((1, 1, 6, 5), DType::F64, &dev)?)?;
    let w = Tensor::ones((1, 1, 3, 3), DType::F64, &dev)?;
    println!("conv2d stride 2 on 6x5: {:?}",
             first_line(x.conv2d(&w, 1, 2, 1, 1)?.sum_all()?.backward().map(|_| ())));
    // 4. gelu / gelu_erf: the backward uses 6-digit constants (0.398942 for 1/sqrt(2 pi))
    let x = Var::from_tensor(&Tensor::new(&[1.0f64], &dev)?)?;
    let g = x.gelu_erf()?.sum_all()?.backward()?;
    let exact = 0.5 * (1.0 + erf(1.0 / 2f64.sqrt())) + (-0.5f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
    println!("gelu_erf'(1) = {:.16} (exact {exact:.16})", g.get(&x).unwrap().to_vec1::<f64>()?[0]);
    // 5. candle_nn::LayerNorm::forward (the fused kernel on contiguous input): no float64, and
    //    in float32 no gradient reaches the input or the weights
    let x = Var::from_tensor(&Tensor::new(&[[1.0f32, 2.0, 4.0]], &dev)?)?;
    let ln = candle_nn::LayerNorm::new(Tensor::ones(3, DType::F32, &dev)?, Tensor::zeros(3, DType::F32, &dev)?, 1e-5);
    let y = ln.forward(&x)?;
    let g = (y.sqr()?.sum_all()? + x.sum_all()?)?.backward()?; // x.sum_all: dx is 1 + d(LN)
    println!("LayerNorm dx (f32): {:?} (1 = only the x.sum_all term)", g.get(&x).unwrap().to_vec2::<f32>()?);
    let x64 = Tensor::new(&[[1.0f64, 2.0, 4.0]], &dev)?;
    let ln64 = candle_nn::LayerNorm::new(Tensor::ones(3, DType::F64, &dev)?, Tensor::zeros(3, DType::F64, &dev)?, 1e-5);
    println!("LayerNorm f64 forward: {:?}", first_line(ln64.forward(&x64).map(|_| ())));
    Ok(())
}

fn first_line(r: candle_core::Result<()>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => format!("Err: {}", e.to_string().lines().next().unwrap_or("")),
    }
}

// erf by its Taylor series (enough digits at x = 0.707)
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..60 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}
