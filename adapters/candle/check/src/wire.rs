//! The wire of docs/protocol.md that the model protocol reuses: error types, scalars that may
//! be NaN/inf, arrays as base64 of little-endian float64.

use serde_json::{json, Value};

/// A request that cannot be answered, with its protocol error type.
#[derive(Debug, Clone, PartialEq)]
pub enum Fail {
    /// `unsupported`: the dtype (or method) is not available; the harness skips with the message.
    Unsupported(String),
    /// `invalid_request`: the request is malformed.
    Invalid(String),
    /// `engine_error`: Candle (or the user's closure) raised.
    Engine(String),
    /// `version_mismatch`: only in answer to `hello`.
    Version(String),
}

impl Fail {
    pub fn kind(&self) -> &'static str {
        match self {
            Fail::Unsupported(_) => "unsupported",
            Fail::Invalid(_) => "invalid_request",
            Fail::Engine(_) => "engine_error",
            Fail::Version(_) => "version_mismatch",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Fail::Unsupported(m) | Fail::Invalid(m) | Fail::Engine(m) | Fail::Version(m) => m,
        }
    }
}

impl From<candle_core::Error> for Fail {
    fn from(e: candle_core::Error) -> Self {
        Fail::Engine(without_backtrace(&e.to_string()))
    }
}

/// Candle appends a backtrace to its messages when `RUST_BACKTRACE` is set: the wire carries
/// the message only (the backtrace stays on stderr where Candle prints it).
pub fn without_backtrace(text: &str) -> String {
    match text.find("\n   0: ") {
        Some(i) => text[..i].to_string(),
        None => text.to_string(),
    }
}

pub type R<T> = std::result::Result<T, Fail>;

pub fn invalid<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Invalid(msg.into()))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn b64_decode(text: &str) -> R<Vec<u8>> {
    let mut table = [255u8; 256];
    for (i, &c) in B64.iter().enumerate() {
        table[c as usize] = i as u8;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        if c == b'=' {
            break;
        }
        let v = match table[c as usize] {
            255 => return invalid(format!("array data is not base64 (byte {c})")),
            v => u32::from(v),
        };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// `{dtype, shape, data}`: `data` the base64 of the little-endian float64 values.
pub fn encode_array(dtype: &str, shape: &[usize], values: &[f64]) -> Value {
    let mut bytes = Vec::with_capacity(8 * values.len());
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    json!({"dtype": dtype, "shape": shape, "data": b64_encode(&bytes)})
}

/// The values of an array (shape and dtype are the caller's to check).
pub fn decode_array(obj: &Value) -> R<(Vec<usize>, Vec<f64>)> {
    let shape: Vec<usize> = match obj.get("shape").and_then(Value::as_array) {
        Some(s) => s
            .iter()
            .map(|d| d.as_u64().map(|x| x as usize))
            .collect::<Option<_>>()
            .ok_or_else(|| Fail::Invalid("array shape must be a list of sizes".into()))?,
        None => return invalid("array must be {dtype, shape, data}"),
    };
    let data = obj
        .get("data")
        .and_then(Value::as_str)
        .ok_or_else(|| Fail::Invalid("array must be {dtype, shape, data}".into()))?;
    let bytes = b64_decode(data)?;
    let n: usize = shape.iter().product();
    if bytes.len() != 8 * n {
        return invalid(format!("array: {} bytes for shape {:?}", bytes.len(), shape));
    }
    let vals = bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    Ok((shape, vals))
}

/// A float64 on the wire: a number, or "NaN" / "Infinity" / "-Infinity".
pub fn encode_scalar(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("Infinity")
    } else {
        json!("-Infinity")
    }
}

pub fn decode_scalar(v: &Value) -> R<f64> {
    match v {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) if s == "NaN" => Ok(f64::NAN),
        Value::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Value::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => invalid(format!("scalar must be a number or \"NaN\"/\"Infinity\"/\"-Infinity\", got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_round_trip_bitwise() {
        let vals = [0.1, -2.5, f64::MIN_POSITIVE, 1e300, -0.0];
        let enc = encode_array("float64", &[5], &vals);
        let (shape, back) = decode_array(&enc).unwrap();
        assert_eq!(shape, vec![5]);
        for (a, b) in vals.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn scalars_carry_non_finite_values() {
        assert_eq!(encode_scalar(f64::NAN), json!("NaN"));
        assert_eq!(decode_scalar(&json!("-Infinity")).unwrap(), f64::NEG_INFINITY);
        assert_eq!(decode_scalar(&json!(1.5)).unwrap(), 1.5);
    }
}
