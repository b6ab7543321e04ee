//! The seeded directions both sides regenerate (docs/protocol-model.md, "Directions both sides
//! regenerate") and the stratified sample of coordinates `model.step` reports.

/// The splitmix64 finalizer.
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a, 64 bits, over the UTF-8 bytes of a registry name.
pub fn fnv1a64(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The per-(seed, tensor) key.
pub fn key(seed: u64, name: &str) -> u64 {
    mix(seed ^ fnv1a64(name))
}

/// The sign (+1.0 or -1.0) of element `j` for a key.
pub fn sign(key: u64, j: u64) -> f64 {
    let z = mix(key.wrapping_add((j.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    if z >> 63 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// One tensor's part of a direction: `u_j = scale * sign` for `start <= j < stop`, else 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    pub name: String,
    pub start: usize,
    pub stop: Option<usize>,
    pub scale: f64,
}

/// The direction's values over a tensor of `n` elements (zeros outside the scope).
pub fn values(seed: u64, scope: &Scope, n: usize) -> Vec<f64> {
    let k = key(seed, &scope.name);
    let stop = scope.stop.unwrap_or(n).min(n);
    let mut u = vec![0.0; n];
    for (j, uj) in u.iter_mut().enumerate().take(stop).skip(scope.start) {
        *uj = scope.scale * sign(k, j as u64);
    }
    u
}

/// The flat indices `model.step` reports for a tensor of `n` elements sampled at `k`: every
/// index when `n <= k`, else one per stratum, `i_m = floor(m n / k) + mix(m) mod width_m`.
pub fn sample(n: usize, k: usize) -> Option<Vec<usize>> {
    if n <= k || k == 0 {
        return None;
    }
    let (n, k) = (n as u128, k as u128);
    let mut out = Vec::with_capacity(k as usize);
    for m in 0..k {
        let lo = m * n / k;
        let hi = (m + 1) * n / k;
        let off = u128::from(mix(m as u64)) % (hi - lo);
        out.push((lo + off) as usize);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs(seed: u64, name: &str, from: u64, count: u64) -> String {
        let k = key(seed, name);
        (from..from + count).map(|j| if sign(k, j) > 0.0 { '+' } else { '-' }).collect()
    }

    fn sum1000(seed: u64, name: &str) -> i64 {
        let k = key(seed, name);
        (0..1000).map(|j| sign(k, j) as i64).sum()
    }

    // The table of docs/protocol-model.md, verbatim.
    #[test]
    fn contract_vectors() {
        let rows: [(u64, &str, u64, u64, &str, i64); 5] = [
            (0, "fc1.weight", 0x0fc5ab63896269ed, 0x97a85473b1ac470b, "+-+-+++++--+++--", -12),
            (1, "fc1.weight", 0x0fc5ab63896269ed, 0x0c0dee666185dac9, "+--++++---+---++", 30),
            (0, "fc2.bias", 0x9025e524e4887e83, 0xac97325035b8facb, "+--++-+---+-+--+", -36),
            (12345, "w", 0xaf63ea4c86020456, 0xe35cec8d4893e4e5, "-+-+-+---++--+++", -10),
            (9007199254740991, "layer.0.weight", 0x7b3e0c79a947673a, 0x2c31aa0d52257019,
             "--+-+-+++-+-++--", -14),
        ];
        for (s, n, h, k, sg, total) in rows {
            assert_eq!(fnv1a64(n), h, "fnv1a64({n})");
            assert_eq!(key(s, n), k, "key({s}, {n})");
            assert_eq!(signs(s, n, 0, 16), sg, "signs({s}, {n})");
            assert_eq!(sum1000(s, n), total, "sum of the first 1000 ({s}, {n})");
        }
        assert_eq!(signs(0, "fc1.weight", 1000, 8), "--+++-++");
    }

    #[test]
    fn values_respect_scope_and_scale() {
        let sc = Scope { name: "fc1.weight".into(), start: 2, stop: Some(5), scale: 0.25 };
        let u = values(0, &sc, 8);
        assert_eq!(u[..2], [0.0, 0.0]);
        assert_eq!(u[5..], [0.0, 0.0, 0.0]);
        // signs 2..5 of S=0 fc1.weight are "+-+"
        assert_eq!(u[2..5], [0.25, -0.25, 0.25]);
    }

    // the harness's sampler (gradcheck.model_audit.directions.sample_indices) on the same sizes
    #[test]
    fn sample_matches_the_harness() {
        assert_eq!(sample(1000, 8).unwrap(), [0, 164, 355, 481, 502, 632, 867, 979]);
        assert_eq!(sample(100, 7).unwrap(), [0, 27, 36, 53, 63, 73, 92]);
    }

    #[test]
    fn sample_is_stratified_and_depends_on_size_only() {
        assert_eq!(sample(10, 64), None);
        let s = sample(1000, 64).unwrap();
        assert_eq!(s.len(), 64);
        for (m, i) in s.iter().enumerate() {
            assert!(*i >= m * 1000 / 64 && *i < (m + 1) * 1000 / 64);
        }
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sample(1000, 64), Some(s));
    }
}
