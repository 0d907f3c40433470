//! A branch-free `exp` for non-positive `f32` arguments, written so that LLVM
//! vectorises a loop over it (libm's `expf` is a call per element and was the
//! largest cost of a full-vocabulary softmax).
//!
//! Cephes-style: `x = n·ln 2 + r` with `|r| <= ln 2 / 2`, a degree-6 polynomial
//! for `e^r`, and `2^n` built from the exponent bits. Maximum relative error
//! against libm is about 2e-7 (a couple of ulps) over `[-87, 0]`; arguments
//! below -87 (where the result would be subnormal) give exactly 0, `exp(0)` is
//! exactly 1.

const LOG2E: f32 = std::f32::consts::LOG2_E;
const C1: f32 = 0.693_359_4; // ln 2, high part (exact in few bits)
const C2: f32 = -2.121_944_4e-4; // ln 2 - C1
const LOWEST: f32 = -87.0;

/// `e^x` for `x <= 0` (any `x` below -87, `-inf` included, gives 0).
#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes' coefficients, as published
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    let xc = if x > LOWEST { x } else { LOWEST };
    let xc = if xc < 0.0 { xc } else { 0.0 };
    let n = (xc * LOG2E + 0.5).floor();
    let r = xc - n * C1 - n * C2;
    let r2 = r * r;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let e = p * r2 + r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if x > LOWEST {
        e * scale
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_libm_over_the_range() {
        let mut worst = 0.0f64;
        let mut x = -86.999f32;
        while x <= 0.0 {
            let want = (x as f64).exp();
            let got = exp_nonpositive(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.000_731;
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-0.0), 1.0);
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-1000.0), 0.0);
    }
}
