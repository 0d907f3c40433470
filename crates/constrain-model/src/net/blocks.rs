//! Layouts and conversions the quantized kernels share (`qmm`, `q4k`, `q8`).

use candle_core::quantized::k_quants::{BlockQ8K, BlockQ8_0};

const QK_K: usize = 256;
/// Values per `Q5_0` / `Q8_0` block.
const QK: usize = 32;

/// candle's `BlockQ8K`: `#[repr(C)] { d: f32, qs: [i8; 256], bsums: [i16; 16] }`.
#[repr(C)]
pub(crate) struct RawQ8K {
    pub(crate) d: f32,
    pub(crate) qs: [i8; QK_K],
    pub(crate) bsums: [i16; QK_K / 16],
}
const _: () = assert!(std::mem::size_of::<RawQ8K>() == std::mem::size_of::<BlockQ8K>());
const _: () = assert!(std::mem::align_of::<RawQ8K>() == std::mem::align_of::<BlockQ8K>());

/// IEEE half to single (exact, as `half::f16::to_f32`).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalize.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// One input row's 32-value block, quantized by candle's
/// `BlockQ8_0::from_float`, with the sums the kernels' unsigned trick needs.
#[derive(Clone, Copy)]
pub(crate) struct Act {
    /// The 32 values, 4 per `i32`.
    pub(crate) q: [i32; 8],
    /// Its scale (f16 widened).
    pub(crate) d: f32,
    /// `-16 · Σ q` (`Q5_0` stores values + 16; `Q8_0` values + 128, so
    /// its chain starts from `8 · neg16`): the start of the block's first
    /// `vpdpbusd` chain, so that the sum comes out signed with no
    /// subtraction (exact: every sum fits an `i32`).
    pub(crate) neg16: i32,
}

/// candle's `BlockQ8_0` is `#[repr(C)] { d: f16, qs: [i8; 32] }` with
/// private fields; this is the same layout.
#[repr(C)]
struct RawQ8_0 {
    d: u16,
    qs: [i8; QK],
}
const _: () = assert!(std::mem::size_of::<RawQ8_0>() == std::mem::size_of::<BlockQ8_0>());
const _: () = assert!(std::mem::align_of::<RawQ8_0>() == std::mem::align_of::<BlockQ8_0>());

/// A quantized input block with its sums.
pub(crate) fn act(b: &BlockQ8_0) -> Act {
    // SAFETY: same size, alignment and field layout (checked above).
    let raw = unsafe { &*(b as *const BlockQ8_0 as *const RawQ8_0) };
    let mut q = [0i32; 8];
    let mut sum = 0i32;
    for g in 0..8 {
        let bytes = [
            raw.qs[4 * g] as u8,
            raw.qs[4 * g + 1] as u8,
            raw.qs[4 * g + 2] as u8,
            raw.qs[4 * g + 3] as u8,
        ];
        q[g] = i32::from_le_bytes(bytes);
        sum += raw.qs[4 * g..4 * g + 4]
            .iter()
            .map(|&v| v as i32)
            .sum::<i32>();
    }
    Act {
        q,
        d: f16_to_f32(raw.d),
        neg16: -16 * sum,
    }
}
