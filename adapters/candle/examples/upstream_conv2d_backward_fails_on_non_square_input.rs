//! Candle: conv2d's backward fails with stride 2, padding 1 on a non-square input.
//!
//! Standalone: candle-core only.  `cargo run --release --locked --offline --example
//! upstream_conv2d_backward_fails_on_non_square_input` (from adapters/candle).
//!
//! The backward of `Op::Conv2D` (candle-core/src/backprop.rs) computes the output padding of
//! the conv_transpose2d that gives the input gradient from the height only and uses it for
//! both dimensions, so on a 6x5 input the gradient comes out 6x6 and adding it fails
//! ("shape mismatch in add").  The square 6x6 input, same kernel and stride, is shown as a
//! control: it works.
//! Exact (closed form, ones input and 3x3 ones kernel): d/dx sum(conv2d(x, w)) at (i, j) is
//! the number of output windows that cover (i, j).
//! Last line: `REPRODUCES` while the 6x5 backward fails or is wrong, `FIXED` once it is right.
use candle_core::{DType, Device, Tensor, Var};

/// dL/dx for L = sum(conv2d(ones(1, 1, h, w), ones(1, 1, 3, 3), padding 1, stride 2)).
fn candle_grad(h: usize, w: usize, dev: &Device) -> candle_core::Result<Vec<Vec<f64>>> {
    let x = Var::from_tensor(&Tensor::ones((1, 1, h, w), DType::F64, dev)?)?;
    let k = Tensor::ones((1, 1, 3, 3), DType::F64, dev)?;
    let grads = x.conv2d(&k, 1, 2, 1, 1)?.sum_all()?.backward()?;
    grads
        .get(&x)
        .expect("a gradient for x")
        .squeeze(0)?
        .squeeze(0)?
        .to_vec2::<f64>()
}

/// How many 3x3 windows (padding 1, stride 2) cover each input position.
fn exact_grad(h: usize, w: usize) -> Vec<Vec<f64>> {
    let covers = |n: usize, i: usize| {
        let out = (n + 2 - 3) / 2 + 1;
        (0..out)
            .filter(|&a| 2 * a <= i + 1 && i < 2 * a + 2)
            .count()
    };
    (0..h)
        .map(|i| {
            (0..w)
                .map(|j| (covers(h, i) * covers(w, j)) as f64)
                .collect()
        })
        .collect()
}

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    println!(
        "candle-core {}",
        option_env!("CANDLE_CORE_VERSION").unwrap_or("(version: see Cargo.lock)")
    );
    println!(
        "x = ones(1, 1, h, w); L = conv2d(x, ones(1, 1, 3, 3), padding 1, stride 2).sum(); dL/dx"
    );
    let square = candle_grad(6, 6, &dev)?;
    println!(
        "control 6x6: candle {square:?}, equals the exact counts: {}",
        square == exact_grad(6, 6)
    );
    let exact = exact_grad(6, 5);
    println!("exact 6x5:  {exact:?}");
    let verdict = match candle_grad(6, 5, &dev) {
        Ok(g) => {
            println!("candle 6x5: {g:?}");
            if g == exact {
                "FIXED"
            } else {
                "REPRODUCES"
            }
        }
        Err(e) => {
            println!(
                "candle 6x5: error: {}",
                e.to_string().lines().next().unwrap_or("")
            );
            "REPRODUCES"
        }
    };
    println!("{verdict}");
    Ok(())
}
